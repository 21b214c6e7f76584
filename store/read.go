package store

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Read returns up to max messages of (topic, queueID) starting at queue
// offset offset, in order. At MaxOffset, or for a queue never written, it
// returns an empty slice and no error; below MinOffset an *OffsetError
// (ErrOffsetTooSmall). max is clamped to MaxReadBatch. The messages are
// fresh copies owned by the caller.
func (s *Store) Read(topic string, queueID int, offset int64, max int) ([]*Message, error) {
	if topic == "" || queueID < 0 || max < 1 {
		s.stats.rejected.Add(1)
		err := fmt.Errorf("%w: read %q/%d max %d", ErrInvalid, topic, queueID, max)
		s.log.Warn("store: read rejected", "topic", topic, "queue", queueID, "max", max, "err", err)
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	s.stats.reads.Add(1)
	q := s.queues[topic][queueID]
	if q == nil {
		if offset < 0 {
			return nil, &OffsetError{Topic: topic, QueueID: queueID, Offset: offset, Min: 0}
		}
		return []*Message{}, nil
	}
	if offset < q.min {
		return nil, &OffsetError{Topic: topic, QueueID: queueID, Offset: offset, Min: q.min}
	}
	if offset >= q.visible {
		return []*Message{}, nil
	}
	n := int(min(int64(min(max, MaxReadBatch)), q.visible-offset))
	entries, err := q.idx.read(offset, n)
	if err != nil {
		return nil, fmt.Errorf("read %s/%d at %d: %w", topic, queueID, offset, err)
	}
	out := make([]*Message, 0, n)
	for i, e := range entries {
		m, err := s.readRecord(e)
		if err != nil {
			return nil, fmt.Errorf("read %s/%d at %d: %w", topic, queueID, offset+int64(i), err)
		}
		if m.Topic != topic || m.QueueID != queueID || m.QueueOffset != offset+int64(i) {
			return nil, fmt.Errorf("read %s/%d at %d: %w: index points at %s/%d offset %d",
				topic, queueID, offset+int64(i), ErrCorrupt, m.Topic, m.QueueID, m.QueueOffset)
		}
		out = append(out, m)
	}
	s.stats.readMsgs.Add(uint64(len(out)))
	return out, nil
}

// ReadAt returns the message at a log offset. A log offset that was never
// written (or not yet made visible) is ErrInvalid; one dropped by retention
// is ErrOffsetTooSmall.
func (s *Store) ReadAt(logOffset int64) (*Message, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	s.stats.reads.Add(1)
	if logOffset < s.logMin {
		return nil, fmt.Errorf("%w: log offset %d, oldest is %d", ErrOffsetTooSmall, logOffset, s.logMin)
	}
	if logOffset >= s.readableEnd() {
		s.stats.rejected.Add(1)
		return nil, fmt.Errorf("%w: log offset %d not written (next is %d)", ErrInvalid, logOffset, s.readableEnd())
	}
	e, err := s.lidx.get(logOffset)
	if err != nil {
		return nil, fmt.Errorf("read log offset %d: %w", logOffset, err)
	}
	m, err := s.readRecord(e)
	if err != nil {
		return nil, fmt.Errorf("read log offset %d: %w", logOffset, err)
	}
	s.stats.readMsgs.Add(1)
	return m, nil
}

// readableEnd is the first log offset readers may not see yet.
func (s *Store) readableEnd() int64 {
	if s.opts.Sync == SyncGroup {
		return s.durable
	}
	return s.written
}

// readRecord reads and checks the record an index entry points at. Callers
// hold mu (shared is enough).
func (s *Store) readRecord(e entry) (*Message, error) {
	// The segment holding wal index logOffset+1 is the last one starting at
	// or before it.
	idx := uint64(e.logOffset) + 1
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].start > idx }) - 1
	if i < 0 {
		return nil, fmt.Errorf("%w: log offset %d was retained away", ErrOffsetTooSmall, e.logOffset)
	}
	sg := s.segs[i]
	buf := make([]byte, e.size)
	if _, err := sg.f.ReadAt(buf, e.pos); err != nil {
		return nil, fmt.Errorf("%w: segment %s position %d: %v", ErrCorrupt, sg.path, e.pos, err)
	}
	m, _, err := decodeRecord(buf)
	if err != nil {
		return nil, fmt.Errorf("segment %s position %d: %w", sg.path, e.pos, err)
	}
	if m.LogOffset != e.logOffset {
		return nil, fmt.Errorf("%w: segment %s position %d holds log offset %d, index says %d",
			ErrCorrupt, sg.path, e.pos, m.LogOffset, e.logOffset)
	}
	return m, nil
}

// MinOffset returns the oldest readable queue offset of (topic, queueID);
// 0 for a queue never written.
func (s *Store) MinOffset(topic string, queueID int) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if q := s.queues[topic][queueID]; q != nil {
		return min(q.min, q.visible)
	}
	return 0
}

// MaxOffset returns the next queue offset to be assigned that readers can
// see: every offset below it is readable (or retained away).
func (s *Store) MaxOffset(topic string, queueID int) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if q := s.queues[topic][queueID]; q != nil {
		return q.visible
	}
	return 0
}

// OffsetAt returns the first readable queue offset whose StoredAt is at or
// after t: MinOffset for a t before everything, MaxOffset for a t after
// everything (and 0 for a queue never written). StoredAt never decreases
// along the log, so this is a binary search over the index.
func (s *Store) OffsetAt(topic string, queueID int, t time.Time) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queues[topic][queueID]
	if q == nil {
		return 0
	}
	lo := min(q.min, q.visible)
	want := t.UnixNano()
	off, err := q.search(lo, q.visible, func(e entry) bool { return e.storedAt >= want })
	if err != nil {
		s.log.Error("store: time lookup failed; answering the oldest offset", "topic", topic, "queue", queueID, "err", err)
		return lo
	}
	return off
}

// Topics returns the topics that have readable queues, sorted.
func (s *Store) Topics() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.queues))
	for t, qs := range s.queues {
		for _, q := range qs {
			if q.visible > 0 {
				out = append(out, t)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// Queues returns the queue ids of topic that are readable, sorted.
func (s *Store) Queues(topic string) []int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []int{}
	for id, q := range s.queues[topic] {
		if q.visible > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
