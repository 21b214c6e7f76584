package pop

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"
)

// A receipt handle is base64url(version | nonce | body | mac): nonce is the
// issuing Service's random id, body the varints incarnation, queue, offset,
// generation and the length-prefixed group and topic. The generation
// changes on every delivery and every ChangeInvisible of the message, the
// incarnation every time a queue's state is rebuilt (offset reset), and the
// nonce on every restart — so a superseded handle verifies but no longer
// matches: ErrStaleHandle.
//
// The mac is an AES-128 CBC-MAC over three fixed-length blocks: a 16-byte
// tag of (group, topic) — HMAC-SHA256 under the handle key, computed once
// per group@topic (gtTag, its first CBC step included) — then nonce |
// incarnation and queue | generation | offset. Every handle's MAC input has
// the same length, where CBC-MAC is a secure MAC, and it costs two AES
// block encryptions instead of an HMAC-SHA256 (which was about half of the
// CPU of pop+ack).
const (
	handleVersion = 2
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
	key   []byte       // the handle key (HMAC-SHA256 of the group@topic tags)
	block cipher.Block // AES-128 under a key derived from it
}

// gtTag is the first CBC step of a group@topic's handles:
// E(HMAC(key, group, topic)). A groupTopic computes it once.
type gtTag [16]byte

func newSigner(key []byte) *signer {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("brokercore pop handle mac v2"))
	block, err := aes.NewCipher(m.Sum(nil)[:16])
	if err != nil {
		panic(err) // 16-byte key: cannot happen
	}
	return &signer{key: key, block: block}
}

// tag computes the gtTag of (group, topic).
func (s *signer) tag(group, topic string) gtTag {
	m := hmac.New(sha256.New, s.key)
	var n [binary.MaxVarintLen64]byte
	m.Write([]byte("brokercore pop handle group@topic"))
	m.Write(n[:binary.PutUvarint(n[:], uint64(len(group)))])
	m.Write([]byte(group))
	m.Write([]byte(topic))
	var x gtTag
	s.block.Encrypt(x[:], m.Sum(nil)[:16])
	return x
}

// macBlocks are the blocks mac encrypts in: what a cipher.Block (an
// interface) encrypts escapes, so a local array would be an allocation per
// MAC.
var macBlocks = sync.Pool{New: func() any { return new([16]byte) }}

func (s *signer) mac(h *handle, tag gtTag) [16]byte {
	first := s.macFirst(h, tag)
	return s.macLast(h, first)
}

// macFirst is the first CBC step of a handle's MAC; it depends only on the
// group@topic, the nonce and the incarnation, so the handles of one queue
// state share it (deliveries computes it once per queue of a pop).
func (s *signer) macFirst(h *handle, tag gtTag) [16]byte {
	be := binary.BigEndian
	x := macBlocks.Get().(*[16]byte)
	be.PutUint64(x[:8], be.Uint64(tag[:8])^h.nonce)
	be.PutUint64(x[8:], be.Uint64(tag[8:])^h.inc)
	s.block.Encrypt(x[:], x[:])
	out := *x
	macBlocks.Put(x)
	return out
}

// macLast is the last CBC step: the MAC of h after first.
func (s *signer) macLast(h *handle, first [16]byte) [16]byte {
	x := macBlocks.Get().(*[16]byte)
	out := s.macLastIn(x, h, first)
	macBlocks.Put(x)
	return out
}

// macLastIn is macLast encrypting in x (a pop signs all its handles in
// one block, without a trip to macBlocks per handle).
func (s *signer) macLastIn(x *[16]byte, h *handle, first [16]byte) [16]byte {
	be := binary.BigEndian
	be.PutUint64(x[:8], be.Uint64(first[:8])^(uint64(uint32(h.queue))<<32|uint64(h.gen)))
	be.PutUint64(x[8:], be.Uint64(first[8:])^uint64(h.offset))
	s.block.Encrypt(x[:], x[:])
	return *x
}

// encode is encodeWith for a group@topic whose tag and names are not at
// hand.
func (s *signer) encode(h handle) string {
	return s.encodeWith(h, s.tag(h.group, h.topic), handleNames(h.group, h.topic))
}

// handleNames is the tail of a handle's body: the length-prefixed group
// and topic. A groupTopic computes it once.
func handleNames(group, topic string) string {
	b := binary.AppendUvarint(nil, uint64(len(group)))
	b = append(b, group...)
	b = binary.AppendUvarint(b, uint64(len(topic)))
	return string(append(b, topic...))
}

// encodeWith encodes and MACs h with its group@topic's tag and names.
func (s *signer) encodeWith(h handle, tag gtTag, names string) string {
	var out [256]byte
	x := macBlocks.Get().(*[16]byte)
	b := s.appendHandle(out[:0], h, s.macFirst(&h, tag), names, x)
	macBlocks.Put(x)
	return string(b) // one allocation per handle
}

// appendHandle appends the encoded h, MACed after first (macFirst of its
// group@topic's tag) in x, to dst.
func (s *signer) appendHandle(dst []byte, h handle, first [16]byte, names string, x *[16]byte) []byte {
	var buf [128]byte
	b := buf[:0]
	if n := 1 + 8 + 4*binary.MaxVarintLen64 + len(names) + handleMACLen; n > len(buf) {
		b = make([]byte, 0, n)
	}
	b = append(b, handleVersion)
	b = binary.BigEndian.AppendUint64(b, h.nonce)
	b = binary.AppendUvarint(b, h.inc)
	b = binary.AppendUvarint(b, uint64(h.queue))
	b = binary.AppendUvarint(b, uint64(h.offset))
	b = binary.AppendUvarint(b, uint64(h.gen))
	b = append(b, names...)
	mac := s.macLastIn(x, &h, first)
	b = append(b, mac[:handleMACLen]...)
	return base64.RawURLEncoding.AppendEncode(dst, b)
}

// decode verifies and parses a handle. Every failure wraps ErrBadHandle.
func (s *signer) decode(str string) (handle, error) {
	h, mac, err := parseHandle(str)
	if err != nil {
		return handle{}, err
	}
	if !s.verify(&h, mac, s.tag(h.group, h.topic)) {
		return handle{}, fmt.Errorf("handle signature: %w", ErrBadHandle)
	}
	return h, nil
}

// verify reports whether mac is h's under its group@topic's tag.
func (s *signer) verify(h *handle, mac [handleMACLen]byte, tag gtTag) bool {
	return s.verifyAfter(h, mac, s.macFirst(h, tag))
}

// verifyAfter is verify given the MAC's first step (macFirst).
func (s *signer) verifyAfter(h *handle, mac [handleMACLen]byte, first [16]byte) bool {
	want := s.macLast(h, first)
	return subtle.ConstantTimeCompare(mac[:], want[:handleMACLen]) == 1
}

// firstStep is a macFirst result and what it was computed for.
type firstStep struct {
	nonce, inc uint64
	x          [16]byte
}

// parseHandle parses a handle without verifying its MAC. Every failure
// wraps ErrBadHandle.
func parseHandle(str string) (handle, [handleMACLen]byte, error) {
	var buf [192]byte
	var h handle
	mac, names, err := parseHandleIn(buf[:], str, &h)
	g, t := splitNames(names)
	h.group, h.topic = string(g), string(t)
	return h, mac, err
}

// parseHandleIn parses a handle into h, decoding it into buf (or a larger
// buffer if buf is too small), without verifying its MAC. h's group and
// topic are left empty: names, the body's tail that holds both
// (handleNames, split by splitNames), points into the buffer. Every
// failure wraps ErrBadHandle.
func parseHandleIn(buf []byte, str string, h *handle) (mac [handleMACLen]byte, names []byte, err error) {
	if len(str) == 0 || len(str) > maxHandleLen {
		return mac, nil, fmt.Errorf("handle of %d bytes: %w", len(str), ErrBadHandle)
	}
	b := buf
	if n := base64.RawURLEncoding.DecodedLen(len(str)); n > len(buf) {
		b = make([]byte, n)
	}
	// Decode reads str's bytes in place (no copy): it never writes its src.
	n, err := base64.RawURLEncoding.Decode(b, unsafe.Slice(unsafe.StringData(str), len(str)))
	if err != nil || base64.RawURLEncoding.EncodedLen(n) != len(str) { // the decoder skips \r and \n: not ours
		return mac, nil, fmt.Errorf("handle encoding: %w", ErrBadHandle)
	}
	b = b[:n]
	if len(b) < 1+8+handleMACLen || b[0] != handleVersion {
		return mac, nil, fmt.Errorf("handle header: %w", ErrBadHandle)
	}
	copy(mac[:], b[len(b)-handleMACLen:])
	names, what := parseBody(b[:len(b)-handleMACLen], h)
	if what != "" {
		return mac, nil, fmt.Errorf("handle %s: %w", what, ErrBadHandle)
	}
	return mac, names, nil
}

// field reads a uvarint of at most limit off the front of r.
func field(r []byte, limit uint64) (uint64, []byte, bool) {
	v, n := binary.Uvarint(r)
	if n <= 0 || v > limit {
		return 0, r, false
	}
	return v, r[n:], true
}

// name reads a non-empty length-prefixed string off the front of r.
func name(r []byte) ([]byte, []byte, bool) {
	n, r, ok := field(r, uint64(len(r)))
	if !ok || n == 0 || n > uint64(len(r)) { // the length is checked again past its own varint
		return nil, r, false
	}
	return r[:n:n], r[n:], true
}

// parseBody parses version | nonce | varints | names (no MAC) into h and
// returns the names, or what is wrong with the body. (No error value: then
// escape analysis sees no flow from the body to the heap, and the decode
// buffer stays on the caller's stack.)
func parseBody(body []byte, h *handle) (names []byte, what string) {
	h.nonce = binary.BigEndian.Uint64(body[1:9])
	r := body[9:]
	var v uint64
	var ok bool
	if h.inc, r, ok = field(r, ^uint64(0)); !ok {
		return nil, "incarnation"
	}
	if v, r, ok = field(r, 1<<31-1); !ok {
		return nil, "queue"
	}
	h.queue = int(v)
	if v, r, ok = field(r, 1<<63-1); !ok {
		return nil, "offset"
	}
	h.offset = int64(v)
	if v, r, ok = field(r, 1<<32-1); !ok {
		return nil, "generation"
	}
	h.gen = uint32(v)
	names = r
	if _, r, ok = name(r); !ok {
		return nil, "group"
	}
	if _, r, ok = name(r); !ok {
		return nil, "topic"
	}
	if len(r) != 0 {
		return nil, "trailing bytes"
	}
	return names, ""
}

// splitNames splits names checked by parseBody into group and topic (nil,
// nil for nil).
func splitNames(names []byte) (group, topic []byte) {
	if names == nil {
		return nil, nil
	}
	group, r, _ := name(names)
	topic, _, _ = name(r)
	return group, topic
}
