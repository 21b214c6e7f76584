package pop

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"
)

// A receipt handle is base64url(version | nonce | body | mac): nonce is the
// issuing Service's random id, body the varints incarnation, queue, offset,
// generation and the length-prefixed group and topic, mac the first
// handleMACLen bytes of HMAC-SHA256 over everything before it. The
// generation changes on every delivery and every ChangeInvisible of the
// message, the incarnation every time a queue's state is rebuilt (offset
// reset), and the nonce on every restart — so a superseded handle verifies
// but no longer matches: ErrStaleHandle.
const (
	handleVersion = 1
	handleMACLen  = 16
	maxHandleLen  = 4096
)

type handle struct {
	nonce  uint64
	inc    uint64
	queue  int
	offset int64
	gen    uint32
	group  string
	topic  string
}

type signer struct {
	pool sync.Pool
}

func newSigner(key []byte) *signer {
	s := &signer{}
	s.pool.New = func() any { return hmac.New(sha256.New, key) }
	return s
}

func (s *signer) mac(b []byte) []byte {
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(b)
	var sum [sha256.Size]byte
	out := h.Sum(sum[:0])
	s.pool.Put(h)
	return out[:handleMACLen]
}

func (s *signer) encode(h handle) string {
	var buf [128]byte
	b := buf[:0]
	if n := 1 + 8 + 5*binary.MaxVarintLen64 + len(h.group) + len(h.topic) + handleMACLen; n > len(buf) {
		b = make([]byte, 0, n)
	}
	b = append(b, handleVersion)
	b = binary.BigEndian.AppendUint64(b, h.nonce)
	b = binary.AppendUvarint(b, h.inc)
	b = binary.AppendUvarint(b, uint64(h.queue))
	b = binary.AppendUvarint(b, uint64(h.offset))
	b = binary.AppendUvarint(b, uint64(h.gen))
	b = binary.AppendUvarint(b, uint64(len(h.group)))
	b = append(b, h.group...)
	b = binary.AppendUvarint(b, uint64(len(h.topic)))
	b = append(b, h.topic...)
	b = append(b, s.mac(b)...)
	var out [256]byte
	if n := base64.RawURLEncoding.EncodedLen(len(b)); n <= len(out) {
		base64.RawURLEncoding.Encode(out[:n], b)
		return string(out[:n]) // one allocation per handle
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decode verifies and parses a handle. Every failure wraps ErrBadHandle.
func (s *signer) decode(str string) (handle, error) {
	var h handle
	if len(str) == 0 || len(str) > maxHandleLen {
		return h, fmt.Errorf("handle of %d bytes: %w", len(str), ErrBadHandle)
	}
	var buf [192]byte
	b := buf[:]
	if n := base64.RawURLEncoding.DecodedLen(len(str)); n > len(buf) {
		b = make([]byte, n)
	}
	n, err := base64.RawURLEncoding.Decode(b, []byte(str))
	if err != nil {
		return h, fmt.Errorf("handle encoding: %w", ErrBadHandle)
	}
	b = b[:n]
	if len(b) < 1+8+handleMACLen || b[0] != handleVersion {
		return h, fmt.Errorf("handle header: %w", ErrBadHandle)
	}
	body, mac := b[:len(b)-handleMACLen], b[len(b)-handleMACLen:]
	if !hmac.Equal(mac, s.mac(body)) {
		return h, fmt.Errorf("handle signature: %w", ErrBadHandle)
	}
	h.nonce = binary.BigEndian.Uint64(body[1:9])
	r := body[9:]
	next := func(limit uint64) (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 || v > limit {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	var ok bool
	var v uint64
	if h.inc, ok = next(^uint64(0)); !ok {
		return h, fmt.Errorf("handle incarnation: %w", ErrBadHandle)
	}
	if v, ok = next(1<<31 - 1); !ok {
		return h, fmt.Errorf("handle queue: %w", ErrBadHandle)
	}
	h.queue = int(v)
	if v, ok = next(1<<63 - 1); !ok {
		return h, fmt.Errorf("handle offset: %w", ErrBadHandle)
	}
	h.offset = int64(v)
	if v, ok = next(1<<32 - 1); !ok {
		return h, fmt.Errorf("handle generation: %w", ErrBadHandle)
	}
	h.gen = uint32(v)
	str2 := func() (string, bool) {
		n, ok := next(uint64(len(r)))
		if !ok {
			return "", false
		}
		out := string(r[:n])
		r = r[n:]
		return out, true
	}
	if h.group, ok = str2(); !ok || h.group == "" {
		return h, fmt.Errorf("handle group: %w", ErrBadHandle)
	}
	if h.topic, ok = str2(); !ok || h.topic == "" {
		return h, fmt.Errorf("handle topic: %w", ErrBadHandle)
	}
	if len(r) != 0 {
		return h, fmt.Errorf("handle trailing bytes: %w", ErrBadHandle)
	}
	return h, nil
}
