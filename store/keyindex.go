package store

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/brokercore/brokercore/internal/crc"
)

// The key index maps (topic, key) to the log offsets of the messages that
// carry key in Keys (or as the value of a property named in
// Options.KeyProperties), RocketMQ's IndexService. It is derived state like
// the queue index: rebuilt from the log when missing or damaged, and never
// trusted over it (every hit is read back from the log and compared, so a
// hash collision or a stale file never answers a wrong message).
//
// Entries of the segment being written are kept in memory (keyEntry, 24
// bytes per key, appended in log order under the store lock at Append: no
// I/O on the append path). Once a segment is closed, the next checkpoint
// writes its entries, sorted by (hash, log offset), to one file, keys/<the
// segment's name>.kx, and drops them from memory: one write per closed
// segment, none for a checkpoint without a roll, no fsync per append.
// Retention removes a segment's key file with the segment (at the next
// checkpoint). Open checks each key file's header against its segment and
// rebuilds any that is missing or does not match by reading the segment;
// the entries of the tail segment come back from the key file Close wrote
// for it when it covers exactly what the log holds, else from the segment.
// A lookup that meets a damaged entry rebuilds that file from its segment.
//
// Key file layout: a 64-byte header, then count entries of keyEntrySize
// bytes sorted by (hash, log offset):
//
//	header [0:4] "BCKX", [4] version, [5:8] zero,
//	       [8:16] segment start (wal index), [16:24] first log offset,
//	       [24:32] end log offset (exclusive), [32:40] oldest StoredAt,
//	       [40:48] newest StoredAt (Unix ns), [48:56] count, [56:60] zero,
//	       [60:64] CRC-32C of [0:60]
//	entry  [0:8] hash, [8:16] log offset, [16:24] StoredAt (Unix ns),
//	       [24:28] zero, [28:32] CRC-32C of [0:28]
const (
	keyMagic      = "BCKX"
	keyVersion    = 1
	keyHeaderSize = 64
	keyEntrySize  = 32
	keyDir        = "keys"
	keySuffix     = ".kx"
)

// keyEntry is one (topic, key) occurrence.
type keyEntry struct {
	hash      uint64
	logOffset int64
	storedAt  int64
}

func (e keyEntry) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], e.hash)
	binary.LittleEndian.PutUint64(b[8:], uint64(e.logOffset))
	binary.LittleEndian.PutUint64(b[16:], uint64(e.storedAt))
	binary.LittleEndian.PutUint32(b[24:], 0)
	binary.LittleEndian.PutUint32(b[28:], crc.Checksum(b[:28]))
}

func decodeKeyEntry(b []byte) (keyEntry, error) {
	if len(b) != keyEntrySize || binary.LittleEndian.Uint32(b[28:]) != crc.Checksum(b[:28]) || binary.LittleEndian.Uint32(b[24:]) != 0 {
		return keyEntry{}, fmt.Errorf("%w: key index entry checksum", ErrCorrupt)
	}
	e := keyEntry{
		hash:      binary.LittleEndian.Uint64(b[0:]),
		logOffset: int64(binary.LittleEndian.Uint64(b[8:])),
		storedAt:  int64(binary.LittleEndian.Uint64(b[16:])),
	}
	if e.logOffset < 0 {
		return keyEntry{}, fmt.Errorf("%w: key index entry out of range", ErrCorrupt)
	}
	return e, nil
}

// keyFile is what the store keeps of one written key file: its header.
type keyFile struct {
	start          uint64 // the segment's wal index
	first, end     int64  // log offsets [first, end) it covers
	oldest, newest int64  // StoredAt range of its entries (Unix ns)
	count          int64
}

func (k keyFile) encodeHeader(b []byte) {
	copy(b, keyMagic)
	b[4] = keyVersion
	b[5], b[6], b[7] = 0, 0, 0
	binary.LittleEndian.PutUint64(b[8:], k.start)
	binary.LittleEndian.PutUint64(b[16:], uint64(k.first))
	binary.LittleEndian.PutUint64(b[24:], uint64(k.end))
	binary.LittleEndian.PutUint64(b[32:], uint64(k.oldest))
	binary.LittleEndian.PutUint64(b[40:], uint64(k.newest))
	binary.LittleEndian.PutUint64(b[48:], uint64(k.count))
	binary.LittleEndian.PutUint32(b[56:], 0)
	binary.LittleEndian.PutUint32(b[60:], crc.Checksum(b[:60]))
}

// decodeKeyHeader never panics; anything malformed is ErrCorrupt.
func decodeKeyHeader(b []byte) (keyFile, error) {
	if len(b) < keyHeaderSize || string(b[:4]) != keyMagic {
		return keyFile{}, fmt.Errorf("%w: key file: bad magic", ErrCorrupt)
	}
	if binary.LittleEndian.Uint32(b[60:]) != crc.Checksum(b[:60]) {
		return keyFile{}, fmt.Errorf("%w: key file: header checksum", ErrCorrupt)
	}
	if b[4] != keyVersion || b[5]|b[6]|b[7] != 0 || binary.LittleEndian.Uint32(b[56:]) != 0 {
		return keyFile{}, fmt.Errorf("%w: key file: unknown version %d", ErrCorrupt, b[4])
	}
	k := keyFile{
		start:  binary.LittleEndian.Uint64(b[8:]),
		first:  int64(binary.LittleEndian.Uint64(b[16:])),
		end:    int64(binary.LittleEndian.Uint64(b[24:])),
		oldest: int64(binary.LittleEndian.Uint64(b[32:])),
		newest: int64(binary.LittleEndian.Uint64(b[40:])),
		count:  int64(binary.LittleEndian.Uint64(b[48:])),
	}
	if k.first < 0 || k.end < k.first || k.count < 0 || k.count > (1<<40) {
		return keyFile{}, fmt.Errorf("%w: key file: header out of range", ErrCorrupt)
	}
	return k, nil
}

// encodeKeyFile sorts entries, given in log order, by (hash, log offset)
// and encodes the file.
func encodeKeyFile(k keyFile, entries []keyEntry) []byte {
	entries = sortByHash(entries)
	k.count = int64(len(entries))
	b := make([]byte, keyHeaderSize+len(entries)*keyEntrySize)
	k.encodeHeader(b)
	for i, e := range entries {
		e.put(b[keyHeaderSize+i*keyEntrySize:])
	}
	return b
}

// decodeKeyFile decodes a whole key file (tests, fuzzing, the rebuild
// check): the header, the size it implies, every entry, their order and
// range. It never panics.
func decodeKeyFile(b []byte) (keyFile, []keyEntry, error) {
	k, err := decodeKeyHeader(b)
	if err != nil {
		return k, nil, err
	}
	if int64(len(b)-keyHeaderSize) != k.count*keyEntrySize {
		return k, nil, fmt.Errorf("%w: key file: %d bytes for %d entries", ErrCorrupt, len(b), k.count)
	}
	out := make([]keyEntry, 0, k.count)
	for i := int64(0); i < k.count; i++ {
		e, err := decodeKeyEntry(b[keyHeaderSize+i*keyEntrySize : keyHeaderSize+(i+1)*keyEntrySize])
		if err != nil {
			return k, nil, err
		}
		if e.logOffset < k.first || e.logOffset >= k.end {
			return k, nil, fmt.Errorf("%w: key file: entry log offset %d outside [%d, %d)", ErrCorrupt, e.logOffset, k.first, k.end)
		}
		if i > 0 {
			p := out[i-1]
			if p.hash > e.hash || (p.hash == e.hash && p.logOffset > e.logOffset) {
				return k, nil, fmt.Errorf("%w: key file: entries out of order", ErrCorrupt)
			}
		}
		out = append(out, e)
	}
	return k, out, nil
}

// sortByHash sorts entries by hash, keeping the order of equal hashes (so
// entries in log order end up in (hash, log offset) order): a radix sort
// of four 16-bit digits, O(n) (with the encoding, half the cost per key of
// a comparison sort at a segment's keys). It returns the sorted slice.
func sortByHash(entries []keyEntry) []keyEntry {
	if len(entries) < 256 {
		slices.SortStableFunc(entries, func(a, b keyEntry) int {
			switch {
			case a.hash < b.hash:
				return -1
			case a.hash > b.hash:
				return 1
			}
			return 0
		})
		return entries
	}
	src, dst := entries, make([]keyEntry, len(entries))
	var count [1 << 16]int
	for shift := uint(0); shift < 64; shift += 16 {
		clear(count[:])
		for _, e := range src {
			count[(e.hash>>shift)&0xffff]++
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, e := range src {
			d := (e.hash >> shift) & 0xffff
			dst[count[d]] = e
			count[d]++
		}
		src, dst = dst, src
	}
	return src // four passes: back in entries
}

func keyFilePath(dir string, start uint64) string {
	return filepath.Join(dir, keyDir, segmentName(start)+keySuffix)
}

// keyHash is FNV-1a (64 bits) of topic, a zero byte and key: stable across
// processes (the files keep it).
func keyHash(topic, key string) uint64 {
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for i := 0; i < len(topic); i++ {
		h = (h ^ uint64(topic[i])) * prime64
	}
	h *= prime64 // the zero byte
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime64
	}
	return h
}

// hashKey is the hash the store uses (a test may replace it to force
// collisions).
func (s *Store) hashKey(topic, key string) uint64 {
	if s.opts.keyHash != nil {
		return s.opts.keyHash(topic, key)
	}
	return keyHash(topic, key)
}

// keysOf calls fn with every key m is indexed under.
func (s *Store) keysOf(m *Message, fn func(key string)) {
	for _, k := range m.Keys {
		if k != "" {
			fn(k)
		}
	}
	for _, p := range s.opts.KeyProperties {
		if v := m.Properties[p]; v != "" {
			fn(v)
		}
	}
}

// hasKey reports whether m is indexed under key.
func (s *Store) hasKey(m *Message, key string) bool {
	found := false
	s.keysOf(m, func(k string) { found = found || k == key })
	return found
}

// indexKeys adds the keys of an appended batch to the in-memory entries.
// Callers hold mu exclusively (Append's write).
func (s *Store) indexKeys(msgs []*Message, pl []placed) {
	if s.opts.NoKeyIndex {
		return
	}
	for i, m := range msgs {
		p := pl[i]
		if p.q == nil {
			continue
		}
		s.keysOf(m, func(k string) {
			s.keyMem = append(s.keyMem, keyEntry{hash: s.hashKey(m.Topic, k), logOffset: p.entry.logOffset, storedAt: p.entry.storedAt})
		})
	}
}
