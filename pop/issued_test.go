package pop

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestAckOfTheReturnedHandleStringTakesTheFastPath: the very strings a pop
// returned are recognized (no decoding, no MAC check) and say exactly what
// their decoding says; copies of them take the full path and ack the same.
func TestAckOfTheReturnedHandleStringTakesTheFastPath(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 64)
	offs := NewMemoryOffsets()
	s := New(src, Options{Now: newFakeClock().Now, Offsets: offs})
	defer s.Close()
	r, err := s.Pop(bg, req0(MaxBatch, time.Hour))
	require.NoError(t, err)
	require.Len(t, r.Messages, MaxBatch)
	for i, d := range r.Messages {
		fast, gt, ok := s.ownHandle(d.Handle)
		require.True(t, ok, "handle %d", i)
		slow, err := s.signer.decode(strings.Clone(d.Handle))
		require.NoError(t, err)
		require.Equal(t, slow, fast, "handle %d", i)
		require.Equal(t, gtKey{"g", "T"}, gt.key)
		_, _, ok = s.ownHandle(strings.Clone(d.Handle))
		require.False(t, ok, "a copy is not the string the pop returned")
	}
	for i, d := range r.Messages {
		h := d.Handle
		if i%2 == 1 {
			h = strings.Clone(h) // the full path
		}
		require.NoError(t, s.Ack(h))
		c, _ := offs.Committed("g", "T", 0)
		require.EqualValues(t, i+1, c)
	}
	require.ErrorIs(t, s.Ack(r.Messages[0].Handle), ErrStaleHandle, "acked already: the fast path still resolves")
	require.EqualValues(t, 0, s.Stats().BadHandles)
}

// TestPiecesOfIssuedHandlesAreNotRecognized: a string inside a pop's
// handles that is not exactly one of them (two handles joined, a prefix,
// a suffix) is not taken for a handle: it is decoded and rejected.
func TestPiecesOfIssuedHandlesAreNotRecognized(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 8)
	s := New(src, Options{Now: newFakeClock().Now})
	defer s.Close()
	r, err := s.Pop(bg, req0(8, time.Hour))
	require.NoError(t, err)
	h0, h1 := r.Messages[0].Handle, r.Messages[1].Handle
	require.Equal(t, unsafe.Add(unsafe.Pointer(unsafe.StringData(h0)), len(h0)), unsafe.Pointer(unsafe.StringData(h1)),
		"one pop's handles slice one string")
	joined := unsafe.String(unsafe.StringData(h0), len(h0)+len(h1))
	for name, piece := range map[string]string{"joined": joined, "prefix": h0[:len(h0)-1], "suffix": h0[1:], "across": joined[4 : len(joined)-4]} {
		_, _, ok := s.ownHandle(piece)
		require.False(t, ok, name)
		require.Error(t, s.Ack(piece), name)
	}
	require.NoError(t, s.Ack(h0))
	require.NoError(t, s.Ack(h1))
}

// TestRecognizedHandlesOfManyPops: each of more pops than the ring holds
// acks fine; the recent ones are recognized, the older take the full path.
func TestRecognizedHandlesOfManyPops(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 4*issuedRing)
	s := New(src, Options{Now: newFakeClock().Now})
	defer s.Close()
	var pops [][]Delivery
	for range 2 * issuedRing {
		r, err := s.Pop(bg, req0(2, time.Hour))
		require.NoError(t, err)
		require.Len(t, r.Messages, 2)
		pops = append(pops, r.Messages)
	}
	for i, ds := range pops {
		_, _, ok := s.ownHandle(ds[1].Handle)
		require.Equal(t, i >= issuedRing, ok, "pop %d", i)
		for _, d := range ds {
			require.NoError(t, s.Ack(d.Handle), "pop %d", i)
		}
	}
}
