package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/brokercore/brokercore/store"
)

// A raft entry is one command: a kind byte, then the kind's fields. Every
// field is a uvarint, a varint, or a uvarint length followed by that many
// bytes. The same encoding carries messages inside snapshots.
//
// The FSM applies entries in log order on every node, so what an entry does
// must follow from its bytes and the state before it: the leader's clock
// reading travels in the entry (at), and no node reads its own clock while
// applying.

type kind byte

const (
	kindProduce  kind = 1 + iota // messages appended as one batch
	kindCommit                   // consumer offsets committed (a batch)
	kindReset                    // a consumer offset reset (bumps the epoch)
	kindDeliver                  // scheduler delivery: messages + progress, one step
	kindInit                     // the cluster's identity, first entry of a cluster
	kindMember                   // a member's client address (routing to the leader)
	kindProgress                 // scheduler progress without messages (compare-and-set)
	kindRelease                  // a deleted topic (+ the host's record of it): messages released, offsets dropped (release.go)
	kindForget                   // a deleted group (+ the host's record of it): its offsets dropped (release.go)
	kindFenced                   // messages appended as one batch, only in the leader term that proposed them (txn.go)
)

func (k kind) String() string {
	switch k {
	case kindProduce:
		return "produce"
	case kindCommit:
		return "commit"
	case kindReset:
		return "reset"
	case kindDeliver:
		return "deliver"
	case kindInit:
		return "init"
	case kindMember:
		return "member"
	case kindProgress:
		return "progress"
	case kindRelease:
		return "release"
	case kindForget:
		return "forget"
	case kindFenced:
		return "fenced"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// errBadEntry marks bytes that are not an entry this version wrote.
var errBadEntry = errors.New("malformed entry")

// maxEntryItems bounds what a decoder allocates for hostile bytes.
const maxEntryItems = 1 << 20

// commitItem is one consumer offset.
type commitItem struct {
	Group, Topic string
	Queue        int
	Offset       int64
	Epoch        uint64
}

// entry is the decoded form of every kind; unused fields stay zero.
type entry struct {
	Kind     kind
	At       time.Time // the leader's clock when it proposed the entry
	Msgs     []*store.Message
	Split    []int // kindProduce, kindFenced: sizes of the producers' batches Msgs joins (nil = one batch)
	Commits  []commitItem
	Progress []byte // kindDeliver: the scheduler's encoded progress after the delivery
	Prev     []byte // kindDeliver: the progress the delivery starts from (compare-and-set)
	Text     string // kindInit: cluster id; kindMember: node id; kindRelease: topic; kindForget: group
	Text2    string // kindMember: client address
	Term     uint64 // kindFenced: the raft term the entry applies in only
}

func encodeEntry(e *entry) []byte {
	size := 32 + len(e.Progress) + len(e.Prev) + len(e.Text) + len(e.Text2)
	for _, m := range e.Msgs {
		size += msgSize(m)
	}
	b := make([]byte, 0, size)
	b = append(b, byte(e.Kind))
	b = binary.AppendVarint(b, e.At.UnixNano())
	switch e.Kind {
	case kindProduce, kindDeliver, kindProgress:
		b = appendBytes(b, e.Progress)
		b = appendBytes(b, e.Prev)
		b = binary.AppendUvarint(b, uint64(len(e.Split)))
		for _, n := range e.Split {
			b = binary.AppendUvarint(b, uint64(n))
		}
		b = binary.AppendUvarint(b, uint64(len(e.Msgs)))
		for _, m := range e.Msgs {
			b = appendMsg(b, m)
		}
	case kindCommit, kindReset:
		b = binary.AppendUvarint(b, uint64(len(e.Commits)))
		for _, c := range e.Commits {
			b = appendString(b, c.Group)
			b = appendString(b, c.Topic)
			b = binary.AppendVarint(b, int64(c.Queue))
			b = binary.AppendVarint(b, c.Offset)
			b = binary.AppendUvarint(b, c.Epoch)
		}
	case kindInit, kindMember:
		b = appendString(b, e.Text)
		b = appendString(b, e.Text2)
	case kindRelease, kindForget:
		b = appendString(b, e.Text)
		b = binary.AppendUvarint(b, uint64(len(e.Msgs)))
		for _, m := range e.Msgs {
			b = appendMsg(b, m)
		}
	case kindFenced:
		b = binary.AppendUvarint(b, e.Term)
		b = binary.AppendUvarint(b, uint64(len(e.Split)))
		for _, n := range e.Split {
			b = binary.AppendUvarint(b, uint64(n))
		}
		b = binary.AppendUvarint(b, uint64(len(e.Msgs)))
		for _, m := range e.Msgs {
			b = appendMsg(b, m)
		}
	}
	return b
}

func decodeEntry(b []byte) (*entry, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("empty: %w", errBadEntry)
	}
	d := decoder{b: b[1:]}
	e := &entry{Kind: kind(b[0])}
	e.At = time.Unix(0, d.varint()).UTC()
	switch e.Kind {
	case kindProduce, kindDeliver, kindProgress:
		e.Progress = d.bytes()
		e.Prev = d.bytes()
		if k := d.count(); k > 0 {
			e.Split = make([]int, 0, k)
			for i := 0; i < k && d.err == nil; i++ {
				e.Split = append(e.Split, int(min(d.uvarint(), maxEntryItems)))
			}
		}
		e.Msgs = d.msgs(d.count())
	case kindCommit, kindReset:
		n := d.count()
		for i := 0; i < n && d.err == nil; i++ {
			var c commitItem
			c.Group, c.Topic = d.string(), d.string()
			c.Queue = d.int()
			c.Offset = d.varint()
			c.Epoch = d.uvarint()
			e.Commits = append(e.Commits, c)
		}
	case kindInit, kindMember:
		e.Text, e.Text2 = d.string(), d.string()
	case kindRelease, kindForget:
		e.Text = d.string()
		e.Msgs = d.msgs(d.count())
	case kindFenced:
		e.Term = d.uvarint()
		if k := d.count(); k > 0 {
			e.Split = make([]int, 0, k)
			for i := 0; i < k && d.err == nil; i++ {
				e.Split = append(e.Split, int(min(d.uvarint(), maxEntryItems)))
			}
		}
		e.Msgs = d.msgs(d.count())
	default:
		return nil, fmt.Errorf("unknown kind %d: %w", b[0], errBadEntry)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes: %w", len(d.b), errBadEntry)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%s entry: %w", e.Kind, d.err)
	}
	return e, nil
}

func msgSize(m *store.Message) int {
	n := 64 + len(m.Topic) + len(m.Tags) + len(m.Body)
	for _, k := range m.Keys {
		n += len(k) + 2
	}
	for k, v := range m.Properties {
		n += len(k) + len(v) + 4
	}
	return n
}

// appendMsg encodes what a producer sets plus what the log assigned
// (snapshots carry LogOffset and StoredAt; in an entry they are zero).
func appendMsg(b []byte, m *store.Message) []byte {
	b = appendString(b, m.Topic)
	b = binary.AppendVarint(b, int64(m.QueueID))
	b = appendString(b, m.Tags)
	b = binary.AppendUvarint(b, uint64(len(m.Keys)))
	for _, k := range m.Keys {
		b = appendString(b, k)
	}
	b = appendBytes(b, m.Body)
	keys := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same message encodes to the same bytes
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m.Properties[k])
	}
	b = binary.AppendVarint(b, timeNanos(m.BornAt))
	b = binary.AppendVarint(b, int64(m.ReconsumeTimes))
	b = binary.AppendVarint(b, m.LogOffset)
	b = binary.AppendVarint(b, timeNanos(m.StoredAt))
	return b
}

func timeNanos(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

func nanosTime(n int64) time.Time {
	if n == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	if p == nil {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(p))+1) // 0 = nil, n+1 = n bytes
	return append(b, p...)
}

type decoder struct {
	b   []byte
	err error

	// Set by msgs for the messages of one entry: bodies are cut from one
	// copy (arena), and a topic repeated from the message before is
	// shared, so an entry of n messages costs a few allocations, not ~3n.
	arena []byte
	topic string
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated or bad %s: %w", what, errBadEntry)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int")
		return 0
	}
	return int(v)
}

func (d *decoder) count() int {
	n := d.uvarint()
	if n > maxEntryItems || n > uint64(len(d.b)) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func (d *decoder) raw(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail("length")
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) string() string { return string(d.raw(d.uvarint())) }

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	return append([]byte{}, d.raw(n-1)...)
}

// minMsgBytes is the shortest encoded message (ten fields of at least a
// byte each): it bounds what msgs allocates for a count.
const minMsgBytes = 10

// msgs decodes n messages (an entry's batch) into one backing array.
func (d *decoder) msgs(n int) []*store.Message {
	if n == 0 || d.err != nil {
		return nil
	}
	if n > len(d.b)/minMsgBytes {
		d.fail("message count")
		return nil
	}
	d.arena = make([]byte, 0, len(d.b)) // the bodies are part of what is left
	ms := make([]store.Message, n)
	out := make([]*store.Message, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		d.msgInto(&ms[i])
		out = append(out, &ms[i])
	}
	d.arena = nil
	return out
}

func (d *decoder) msg() *store.Message {
	m := &store.Message{}
	d.msgInto(m)
	return m
}

// msgInto decodes one message into m.
func (d *decoder) msgInto(m *store.Message) {
	m.Topic = d.topicString()
	m.QueueID = d.int()
	m.Tags = d.string()
	if n := d.count(); n > 0 {
		m.Keys = make([]string, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			m.Keys = append(m.Keys, d.string())
		}
	}
	m.Body = d.body()
	if n := d.count(); n > 0 {
		m.Properties = make(map[string]string, n)
		for i := 0; i < n && d.err == nil; i++ {
			k := d.string()
			m.Properties[k] = d.string()
		}
	}
	m.BornAt = nanosTime(d.varint())
	m.ReconsumeTimes = d.int()
	m.LogOffset = d.varint()
	m.StoredAt = nanosTime(d.varint())
}

// topicString is string, sharing the last topic when it repeats.
func (d *decoder) topicString() string {
	p := d.raw(d.uvarint())
	if string(p) == d.topic { // no allocation for the comparison
		return d.topic
	}
	d.topic = string(p)
	return d.topic
}

// body is bytes, copied into the arena when there is one (capped, so an
// append to one body never writes into the next).
func (d *decoder) body() []byte {
	if d.arena == nil {
		return d.bytes()
	}
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	p := d.raw(n - 1)
	if d.err != nil {
		return nil
	}
	at := len(d.arena)
	d.arena = append(d.arena, p...)
	return d.arena[at:len(d.arena):len(d.arena)]
}
