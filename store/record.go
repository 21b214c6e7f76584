package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/brokercore/brokercore/internal/crc"
)

// Record layout (one tidwall/wal entry per record):
//
//	[0]    version (recordVersion)
//	[1]    flags (flagBatchEnd: the last record of its Append batch;
//	       flagLost: a tombstone, see below)
//	[2:6]  CRC-32C (Castagnoli), little endian, over bytes [0:2] and [6:]
//	[6:]   uvarint LogOffset, uvarint QueueOffset,
//	       varint StoredAt seconds, uvarint StoredAt nanoseconds,
//	       varint BornAt seconds, uvarint BornAt nanoseconds,
//	       varint QueueID, varint ReconsumeTimes,
//	       string Topic, string Tags, uvarint #Keys + strings,
//	       uvarint #Properties + (key, value) strings sorted by key,
//	       bytes Body
//
// Strings and bytes are a uvarint length followed by the bytes. A record
// must be consumed exactly: trailing bytes are corruption too.
//
// A tombstone (flagLost) holds the offsets of a record that was lost: Open
// writes one for every offset the checkpoint recorded as issued that the
// log no longer has (so no offset is ever handed out twice), and Repair
// replaces a damaged record with one (with an empty Topic: the damaged
// record's queue is unknown). Readers skip tombstones; they are never
// returned as data.
const (
	recordVersion byte = 1
	flagBatchEnd  byte = 1 << 0
	flagLost      byte = 1 << 1
	knownFlags         = flagBatchEnd | flagLost
	recordHeader       = 6
)

// isTombstone reports whether an intact record is a tombstone.
func isTombstone(rec []byte) bool { return len(rec) > 1 && rec[1]&flagLost != 0 }

// recordCRC is the checksum of a whole encoded record, skipping the CRC
// field itself.
func recordCRC(rec []byte) uint32 {
	return crc.Update(crc.Update(0, rec[:2]), rec[recordHeader:])
}

// metaSize is the number of bytes a message's metadata (everything but the
// body) takes, used to bound it by MaxMetadataSize.
func metaSize(m *Message) int {
	n := len(m.Topic) + len(m.Tags)
	for _, k := range m.Keys {
		n += len(k) + 1
	}
	for k, v := range m.Properties {
		n += len(k) + len(v) + 2
	}
	return n
}

// appendRecord encodes m (with its assigned fields already set) to dst.
func appendRecord(dst []byte, m *Message, batchEnd bool) []byte {
	var flags byte
	if batchEnd {
		flags |= flagBatchEnd
	}
	return appendRecordFlags(dst, m, flags)
}

// appendRecordFlags encodes m with the given flags.
func appendRecordFlags(dst []byte, m *Message, flags byte) []byte {
	start := len(dst)
	dst = append(dst, recordVersion, flags, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, uint64(m.LogOffset))
	dst = binary.AppendUvarint(dst, uint64(m.QueueOffset))
	dst = appendTime(dst, m.StoredAt)
	dst = appendTime(dst, m.BornAt)
	dst = binary.AppendVarint(dst, int64(m.QueueID))
	dst = binary.AppendVarint(dst, int64(m.ReconsumeTimes))
	dst = appendString(dst, m.Topic)
	dst = appendString(dst, m.Tags)
	dst = binary.AppendUvarint(dst, uint64(len(m.Keys)))
	for _, k := range m.Keys {
		dst = appendString(dst, k)
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Properties)))
	if len(m.Properties) > 0 {
		keys := make([]string, 0, len(m.Properties))
		for k := range m.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			dst = appendString(dst, k)
			dst = appendString(dst, m.Properties[k])
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Body)))
	dst = append(dst, m.Body...)
	binary.LittleEndian.PutUint32(dst[start+2:], recordCRC(dst[start:]))
	return dst
}

func appendTime(dst []byte, t time.Time) []byte {
	dst = binary.AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decodeRecord decodes one record. It never panics: any malformed input,
// including a checksum mismatch, yields an error wrapping ErrCorrupt. The
// returned Message's Body aliases rec (callers pass a buffer they own).
func decodeRecord(rec []byte) (m *Message, batchEnd bool, err error) {
	m = &Message{}
	if batchEnd, err = decodeRecordTo(m, rec, ""); err != nil {
		return nil, false, err
	}
	return m, batchEnd, nil
}

// decodeRecordTo decodes one record into m, as decodeRecord. A Topic equal
// to topic shares that string instead of allocating a copy. On error m is
// left partly filled.
func decodeRecordTo(m *Message, rec []byte, topic string) (batchEnd bool, err error) {
	if len(rec) < recordHeader {
		return false, fmt.Errorf("%w: record of %d bytes is shorter than its header", ErrCorrupt, len(rec))
	}
	if rec[0] != recordVersion {
		return false, fmt.Errorf("%w: unknown record version %d", ErrCorrupt, rec[0])
	}
	if rec[1]&^knownFlags != 0 {
		return false, fmt.Errorf("%w: unknown record flags %#x", ErrCorrupt, rec[1])
	}
	if want, got := binary.LittleEndian.Uint32(rec[2:]), recordCRC(rec); want != got {
		return false, fmt.Errorf("%w: record checksum %#08x, computed %#08x", ErrCorrupt, want, got)
	}
	d := decoder{buf: rec[recordHeader:]}
	m.LogOffset = d.offset()
	m.QueueOffset = d.offset()
	m.StoredAt = d.time()
	m.BornAt = d.time()
	m.QueueID = d.int()
	m.ReconsumeTimes = d.int()
	if b := d.raw(); string(b) == topic && d.err == nil {
		m.Topic = topic
	} else {
		m.Topic = string(b)
	}
	m.Tags = d.string()
	if n := d.count(); n > 0 {
		m.Keys = make([]string, n)
		for i := range m.Keys {
			m.Keys[i] = d.string()
		}
	}
	if n := d.count(); n > 0 {
		m.Properties = make(map[string]string, n)
		for range n {
			k := d.string()
			m.Properties[k] = d.string()
		}
	}
	m.Body = d.bytes()
	if d.err == nil && len(d.buf) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.buf))
	}
	if d.err != nil {
		return false, fmt.Errorf("%w: record: %v", ErrCorrupt, d.err)
	}
	return rec[1]&flagBatchEnd != 0, nil
}

// decoder reads the fields of a record; after the first error every read
// returns a zero value and err keeps that first error.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.buf) > 0 && d.buf[0] < 0x80 { // most fields take one byte
		v := uint64(d.buf[0])
		d.buf = d.buf[1:]
		return v
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.err = fmt.Errorf("bad uvarint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	if len(d.buf) > 0 && d.buf[0] < 0x80 {
		u := int64(d.buf[0])
		d.buf = d.buf[1:]
		return u>>1 ^ -(u & 1) // zig-zag, as binary.Varint
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.err = fmt.Errorf("bad varint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) offset() int64 {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.fail("offset out of range")
		return 0
	}
	return int64(v)
}

func (d *decoder) int() int {
	v := d.varint()
	if v != int64(int(v)) {
		d.fail("int out of range")
		return 0
	}
	return int(v)
}

func (d *decoder) time() time.Time {
	sec := d.varint()
	nsec := d.uvarint()
	if nsec >= 1e9 {
		d.fail("bad nanoseconds")
		return time.Time{}
	}
	if d.err != nil {
		return time.Time{}
	}
	// UTC: a zero time comes back as time.Time{} and a UTC time as itself.
	return time.Unix(sec, int64(nsec)).UTC()
}

// count reads an element count; every element takes at least one byte, so
// a count larger than what is left is corruption (and never a huge make).
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.buf)) {
		d.fail("count exceeds record")
		return 0
	}
	return int(n)
}

func (d *decoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) {
		d.fail("length exceeds record")
		return nil
	}
	b := d.buf[:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) string() string { return string(d.raw()) }

func (d *decoder) bytes() []byte {
	b := d.raw()
	if len(b) == 0 {
		return nil
	}
	return b[:len(b):len(b)]
}

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s", msg)
	}
}
