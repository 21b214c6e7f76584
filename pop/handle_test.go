package pop

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHandleRoundTrip(t *testing.T) {
	s := newSigner([]byte("k"))
	h := handle{nonce: 42, inc: 7, queue: 3, offset: 1 << 40, gen: 9, group: "g@x", topic: "tópico"}
	got, err := s.decode(s.encode(h))
	require.NoError(t, err)
	require.Equal(t, h, got)
	_, err = newSigner([]byte("other")).decode(s.encode(h))
	require.ErrorIs(t, err, ErrBadHandle, "forged: other key")
}

// FuzzHandleDecode: no input panics the decoder; anything it accepts
// re-encodes to the same handle (it was signed by us), and everything else
// is ErrBadHandle. The Service answers any string with nil, ErrBadHandle or
// ErrStaleHandle and never panics.
func FuzzHandleDecode(f *testing.F) {
	sg := newSigner([]byte("fuzz"))
	f.Add(sg.encode(handle{nonce: 1, inc: 1, queue: 0, offset: 0, gen: 1, group: "g", topic: "T"}))
	f.Add(sg.encode(handle{nonce: 1<<64 - 1, inc: 1<<64 - 1, queue: 1<<31 - 1, offset: 1<<63 - 1, gen: 1<<32 - 1, group: "group", topic: "topic"}))
	f.Add("")
	f.Add("AQ")
	f.Add("not base64 !")
	f.Add("AQAAAAAAAAABAQABAQFnAVQAAAAAAAAAAAAAAAAAAAAA")
	src := newMemSource()
	src.append("T", 0, 1)
	svc := New(src, Options{HandleKey: []byte("fuzz")})
	f.Cleanup(func() { svc.Close() })
	f.Fuzz(func(t *testing.T, s string) {
		h, err := sg.decode(s)
		if err != nil {
			require.ErrorIs(t, err, ErrBadHandle)
		} else {
			require.Equal(t, s, sg.encode(h))
		}
		err = svc.Ack(s)
		if err != nil && !errors.Is(err, ErrBadHandle) && !errors.Is(err, ErrStaleHandle) {
			t.Fatalf("ack %q: unexpected error %v", s, err)
		}
		_, err = svc.ChangeInvisible(s, 0)
		if err != nil && !errors.Is(err, ErrBadHandle) && !errors.Is(err, ErrStaleHandle) {
			t.Fatalf("change %q: unexpected error %v", s, err)
		}
	})
}

// TestHandleWithLineBreaksIsBad: base64 decoders skip \r and \n, so one
// handle had many spellings (found by FuzzHandleDecode); only the one we
// issued verifies.
func TestHandleWithLineBreaksIsBad(t *testing.T) {
	s := newSigner([]byte("k"))
	enc := s.encode(handle{nonce: 1, inc: 1, queue: 0, offset: 7, gen: 1, group: "g", topic: "T"})
	_, err := s.decode(enc)
	require.NoError(t, err)
	for _, bad := range []string{enc[:10] + "\n" + enc[10:], enc + "\r\n", "\n" + enc} {
		_, err := s.decode(bad)
		require.ErrorIs(t, err, ErrBadHandle, "%q", bad)
	}
}

// TestHandleKnownAnswer pins the version 2 encoding and its MAC: a change
// of either (a faster MAC that computes something else) must be a new
// handle version, not a silent one.
func TestHandleKnownAnswer(t *testing.T) {
	s := newSigner([]byte("k"))
	h := handle{nonce: 0x0102030405060708, inc: 77, queue: 123456, offset: 1 << 41, gen: 0xdeadbeef, group: "g", topic: "T"}
	const want = "AgECAwQFBgcITcDEB4CAgICAQO_9tvUNAWcBVCpY1t6Lg2Msfmqe9YE6_xI"
	require.Equal(t, want, s.encode(h))
	got, err := s.decode(want)
	require.NoError(t, err)
	require.Equal(t, h, got)
}
