package store

import (
	"encoding/binary"
	"fmt"
)

// Offsets never go backwards, across any damage. When Open finds the log
// ending below what the checkpoint recorded as durable (a damaged or cut
// tail, a segment replaced by an older copy, a Repair cut), the records
// are gone but their offsets were handed out: Open writes a tombstone
// (record.go) for every log offset the checkpoint knew was issued and every
// queue offset of every queue the checkpoint lists, in one atomic batch,
// so the next offsets are above everything ever issued, and the floors
// live in the log itself (a later loss of every derived file keeps them).
// The loss is logged at ERROR and counted (Stats.LostRecords).
//
// A queue offset with no record in the log at all (a damaged record Repair
// replaced by a tombstone of no queue, or a record missing in the middle of
// a queue) is a hole: an index entry of size 0 that readers skip.

// lostFloors is what Open must keep the next offsets above.
type lostFloors struct {
	log    int64 // next log offset to hand out at least
	queues []ckptQueue
}

// fillLost writes the tombstones that keep every next offset above what the
// checkpoint recorded as issued, when the log lost records the checkpoint
// recorded as durable. Callers are Open, before the store is shared.
func (s *Store) fillLost(ck *checkpoint) error {
	s.snapStale = true // queues' offsets change outside the append path (snapshotQueues)
	if ck == nil || s.written >= ck.durable {
		return nil
	}
	from := s.written
	var ts []*Message
	lostQueues := 0
	for _, cq := range ck.queues {
		q := s.queues[cq.topic][cq.id]
		next := int64(0)
		if q != nil {
			next = q.next
		}
		if next >= cq.next {
			continue
		}
		if q == nil || q.next == q.min {
			// No record of it is left: it restarts where the checkpoint had it.
			var err error
			if q, err = s.queue(cq.topic, cq.id, true); err != nil {
				return err
			}
			q.min, q.next = min(cq.min, cq.next), min(cq.min, cq.next)
			q.idx.reset(q.next)
			if q.next == cq.next {
				q.visible = q.next
				continue
			}
		}
		lostQueues++
		for off := q.next; off < cq.next; off++ {
			ts = append(ts, &Message{Topic: cq.topic, QueueID: cq.id, QueueOffset: off})
		}
	}
	for l := from + int64(len(ts)); l < max(ck.next, ck.durable); l++ {
		ts = append(ts, &Message{}) // a log offset of no known queue
	}
	if len(ts) == 0 {
		return nil
	}
	if _, _, err := s.write(ts, nil, true, s.opts.Now()); err != nil {
		return err
	}
	s.stats.lost.Add(uint64(len(ts)))
	s.log.Error("store: records the checkpoint recorded as durable are missing from the log; their offsets are never handed out again",
		"dir", s.dir, "from_log_offset", from, "to_log_offset", s.written-1, "checkpoint_durable", ck.durable,
		"checkpoint_next", ck.next, "queues", lostQueues, "tombstones", len(ts))
	return s.fsyncLog()
}

// raiseToCheckpoint gives every queue whose records the log lacks in the
// middle (a record replaced by a tombstone of no queue) at least the next
// offset the checkpoint knew, as holes, once the log has every log offset
// the checkpoint knew. Callers are Open.
func (s *Store) raiseToCheckpoint(ck *checkpoint) error {
	s.snapStale = true // queues' offsets change outside the append path (snapshotQueues)
	if ck == nil || s.written < ck.next {
		return nil
	}
	for _, cq := range ck.queues {
		q := s.queues[cq.topic][cq.id]
		if q == nil || q.next >= cq.next {
			continue
		}
		if q.next == q.min {
			q.min, q.next = cq.next, cq.next
			q.idx.reset(cq.next)
			continue
		}
		ref, err := s.entryOf(q, q.next-1)
		if err != nil {
			return err
		}
		if err := s.addHoles(q, cq.next, ref); err != nil {
			return err
		}
		s.log.Error("store: queue offsets the checkpoint recorded have no record in the log; they are never handed out again",
			"dir", s.dir, "topic", q.topic, "queue", q.id, "from", q.next, "to", cq.next-1)
	}
	return nil
}

// addHoles adds hole entries to q up to (not including) next; ref gives
// them a log offset and a time, so searches stay monotonic.
func (s *Store) addHoles(q *queue, next int64, ref entry) error {
	hole := entry{logOffset: ref.logOffset, storedAt: ref.storedAt}
	for ; q.next < next; q.next++ {
		if err := s.addEntry(q.idx, q.next, hole); err != nil {
			return err
		}
	}
	return nil
}

// isHole reports whether an index entry stands for a queue offset with no
// record.
func (e entry) isHole() bool { return e.size == 0 }

// judgeDamaged decides whether the record an intact index entry e names is
// damaged in the log (rather than the entry pointing at the wrong bytes):
// the log-wide index must agree with e and the wal framing at e.pos must
// say a record of exactly e.size bytes starts there. A damaged record is
// remembered (reads skip it from then on), logged at ERROR once and
// counted. Callers hold mu exclusively.
func (s *Store) judgeDamaged(e entry, why error, where string) bool {
	if _, ok := s.damaged[e.logOffset]; ok {
		return true
	}
	if e.logOffset >= s.verified || e.logOffset < s.logMin {
		return false
	}
	le, err := s.lidx.get(e.logOffset)
	if err != nil || le != e {
		return false
	}
	i := s.segmentOf(e.logOffset)
	if i < 0 {
		return false
	}
	sg := s.segs[i]
	hdr := int64(uvarintLen(uint64(e.size)))
	if e.pos < hdr {
		return false
	}
	var b [binary.MaxVarintLen64]byte
	if _, err := sg.f.ReadAt(b[:hdr], e.pos-hdr); err != nil {
		return false
	}
	if n, k := binary.Uvarint(b[:hdr]); k != int(hdr) || n != uint64(e.size) {
		return false
	}
	if s.damaged == nil {
		s.damaged = map[int64]struct{}{}
	}
	s.damaged[e.logOffset] = struct{}{}
	s.stats.corrupt.Add(1)
	s.log.Error("store: damaged record skipped: readers get every record around it, never this one (store.Repair replaces it with a tombstone)",
		"dir", s.dir, "segment", sg.path, "position", e.pos, "bytes", e.size, "log_offset", e.logOffset, "record", where, "err", why)
	return true
}

// errDamaged says a record is damaged (judged by judgeDamaged).
func errDamaged(sg string, e entry) error {
	return fmt.Errorf("%w: segment %s position %d: the record of log offset %d is damaged", ErrCorrupt, sg, e.pos, e.logOffset)
}
