package store

import (
	"encoding/binary"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
)

// Releasing a topic (DeleteTopic, RocketMQ's deleteTopics of the consume
// queues) records a floor for it: the log offset the next record will get.
// Records of the topic below its floor are gone for readers (Read,
// LookupKey; MinOffset moves up to MaxOffset), its index files are
// removed, and the log space is freed by retention as usual. The floors
// live in one small file, dir/released, replaced atomically and fsynced
// before anything else changes: it is a fact the log cannot give back, so
// it is not derived state. Open applies them after the index is loaded or
// rebuilt (a rebuild from the log brings the records back into the index,
// the floor hides them again), so a crash at any point of a DeleteTopic
// leaves the topic either whole or released. Queue offsets are never
// handed out again: a topic written again after its release goes on from
// its old MaxOffset, with MinOffset there. A floor is forgotten once
// retention removed every record below it.
//
// File layout: magic "BCRL", version byte, uvarint count, per topic a
// string and a uvarint floor, then a CRC-32C of everything before it.
const (
	releasedFile    = "released"
	releasedMagic   = "BCRL"
	releasedVersion = 1
)

func encodeReleased(floors map[string]int64) []byte {
	b := append([]byte(releasedMagic), releasedVersion)
	b = binary.AppendUvarint(b, uint64(len(floors)))
	for _, t := range slices.Sorted(maps.Keys(floors)) {
		b = appendString(b, t)
		b = binary.AppendUvarint(b, uint64(floors[t]))
	}
	return binary.LittleEndian.AppendUint32(b, crc.Checksum(b))
}

// decodeReleased never panics; anything malformed is ErrCorrupt.
func decodeReleased(b []byte) (map[string]int64, error) {
	if len(b) < len(releasedMagic)+1+4 || string(b[:len(releasedMagic)]) != releasedMagic {
		return nil, fmt.Errorf("%w: released topics: bad magic", ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc.Checksum(body) != sum {
		return nil, fmt.Errorf("%w: released topics: checksum mismatch", ErrCorrupt)
	}
	if body[len(releasedMagic)] != releasedVersion {
		return nil, fmt.Errorf("%w: released topics: unknown version %d", ErrCorrupt, body[len(releasedMagic)])
	}
	d := decoder{buf: body[len(releasedMagic)+1:]}
	n := d.count()
	out := make(map[string]int64, min(n, 1024))
	for range n {
		t := d.string()
		f := d.offset()
		if d.err == nil && (t == "" || len(t) > maxTopicLength) {
			d.fail("bad topic")
		}
		if d.err != nil {
			break
		}
		out[t] = f
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: released topics: %v", ErrCorrupt, d.err)
	}
	return out, nil
}

// DeleteTopic releases topic: every message of it appended before the call
// is gone for readers once it returns (Read answers nothing below the new
// MinOffset, which equals MaxOffset for a queue not written since; LookupKey
// finds none of them), its index files are removed and retention frees its
// log space as usual. Offsets are not reused: the topic's queues go on from
// their MaxOffset if it is written again. It is durable and crash-safe: a
// crash during DeleteTopic leaves the topic either whole or released, never
// in between, and a release survives the loss of every derived file.
// Topics and Queues leave the topic out until it is written again. ReadAt
// of a released message still answers it (the log keeps it until
// retention). Releasing an unknown topic records nothing and is no error.
func (s *Store) DeleteTopic(topic string) error {
	if topic == "" || len(topic) > maxTopicLength {
		if err := s.usableShared(); err != nil {
			return err
		}
		s.stats.rejected.Add(1)
		return fmt.Errorf("%w: delete topic %q", ErrInvalid, topic)
	}
	s.ckptMu.Lock()
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		s.ckptMu.Unlock()
		return err
	}
	if len(s.queues[topic]) == 0 {
		s.mu.Unlock()
		s.ckptMu.Unlock()
		return nil
	}
	floors := maps.Clone(s.floors)
	if floors == nil {
		floors = map[string]int64{}
	}
	floors[topic] = s.written
	for t, f := range floors {
		if f <= s.logMin {
			delete(floors, t) // retention removed every record below it
		}
	}
	floors[topic] = s.written
	s.mu.Unlock()
	// Durable before anything changes: a crash from here on is a release.
	err := fsx.WriteFile(s.fs, filepath.Join(s.dir, releasedFile), encodeReleased(floors), 0o640)
	s.mu.Lock()
	if err != nil {
		err = s.fail(fmt.Errorf("write released topics: %w", err))
		s.mu.Unlock()
		s.ckptMu.Unlock()
		return err
	}
	s.floors = floors
	for _, q := range s.queues[topic] {
		if err = s.releaseQueue(q, floors[topic]); err != nil {
			err = s.fail(err)
			break
		}
	}
	s.mu.Unlock()
	s.ckptMu.Unlock()
	if err != nil {
		return err
	}
	s.log.Info("store: topic released", "dir", s.dir, "topic", topic, "floor", floors[topic])
	// Record the new MinOffsets (else the next Open finds the removed index
	// files and rebuilds the index from the log, which also ends released).
	return s.checkpoint()
}

// releaseQueue hides the records of q below floor: MinOffset moves up to
// the first record at or above it; an index file that holds nothing else
// is removed. Callers hold mu exclusively.
func (s *Store) releaseQueue(q *queue, floor int64) error {
	s.snapStale = true // queues' offsets change outside the append path (snapshotQueues)
	if q.lastLog < floor {
		if q.min == q.next && q.idx.flushed == q.next && len(q.idx.buf) == 0 {
			return nil // released before, nothing written since
		}
		q.min = q.next
		q.idx.reset(q.next)
		s.files.forget(q.idx)
		if err := s.fs.Remove(q.idx.path); err != nil && !fsx.IsNotExist(err) {
			return fmt.Errorf("remove index %s: %w", q.idx.path, err)
		}
		return nil
	}
	if q.min >= q.next {
		return nil
	}
	first, err := s.entryOf(q, q.min)
	if err != nil {
		return fmt.Errorf("%s/%d: %w", q.topic, q.id, err)
	}
	if first.logOffset >= floor {
		return nil
	}
	get := func(n int64) (entry, error) { return s.entryOf(q, n) }
	m, err := q.searchWith(q.min, q.next, get, func(e entry) bool { return e.logOffset >= floor })
	if err != nil {
		return err
	}
	q.min = m
	s.trimIndex(q.idx, m)
	return nil
}

// releasedQueue reports whether q holds nothing but released records
// (Topics and Queues leave it out). Callers hold mu.
func (s *Store) releasedQueue(q *queue) bool {
	f, ok := s.floors[q.topic]
	return ok && q.lastLog < f
}

// released reports whether m belongs to a release of its topic.
func (s *Store) released(m *Message) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f, ok := s.floors[m.Topic]
	return ok && m.LogOffset < f
}

// openReleased reads the released topics and applies them to the index
// Open loaded. It reports whether it changed anything (then Open writes a
// checkpoint).
func (s *Store) openReleased() (bool, error) {
	b, err := fsx.ReadFile(s.fs, filepath.Join(s.dir, releasedFile))
	if fsx.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	floors, err := decodeReleased(b)
	if err != nil {
		return false, err // not derived: refuse rather than bring released data back
	}
	s.floors = floors
	changed := false
	for t, f := range floors {
		for _, q := range s.queues[t] {
			min, flushed := q.min, q.idx.flushed
			if err := s.releaseQueue(q, f); err != nil {
				return false, err
			}
			changed = changed || q.min != min || q.idx.flushed != flushed
		}
	}
	return changed, nil
}

// forget closes x's file if it is open (before it is removed). Callers
// hold the store lock exclusively, so nobody uses it.
func (c *fileCache) forget(x *indexFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(x)
}
