package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// replayFn receives every record from a starting point to the end of the log.
type replayFn func(m *Message, seg *segment, pos int64, size int) error

// replay decodes the log from position pos of segs[from] to its end. The tail
// has been repaired, so anything that does not decode is corruption.
func replay(segs []*segment, from int, pos int64, fn replayFn) error {
	for j := from; j < len(segs); j++ {
		data, err := os.ReadFile(segs[j].path)
		if err != nil {
			return err
		}
		start := 0
		if j == from {
			start = int(min(pos, int64(len(data))))
		}
		frames, end := parseFrames(data, start)
		if end < len(data) {
			return fmt.Errorf("log segment %s position %d: %w: entry does not parse", segs[j].path, end, ErrCorrupt)
		}
		for _, fr := range frames {
			m, _, err := decodeRecord(data[fr.pos : fr.pos+int64(fr.size)])
			if err != nil {
				return fmt.Errorf("log segment %s position %d: %w", segs[j].path, fr.pos, err)
			}
			m.Body = nil // replay needs the placement, not the payload
			if err := fn(m, segs[j], fr.pos, fr.size); err != nil {
				return err
			}
		}
	}
	return nil
}

// provenStart says where replay starts when the checkpoint is trusted: the
// segment and position of the record ck.next, checked against the log (the
// record there must be ck.next). why explains a checkpoint that cannot be
// used.
func (s *Store) provenStart(ck *checkpoint) (seg int, pos int64, why string) {
	switch {
	case ck == nil:
		return 0, 0, "no checkpoint"
	case !ck.indexValid:
		return 0, 0, "the checkpoint records an unfinished index rebuild"
	case ck.next < s.logMin || ck.next > s.written:
		return 0, 0, fmt.Sprintf("checkpoint at log offset %d, log holds %d to %d", ck.next, s.logMin, s.written)
	}
	for i, sg := range s.segs {
		if sg.start != ck.segment {
			continue
		}
		size := sg.size
		if i == len(s.segs)-1 {
			size = s.tailSize
		}
		if ck.pos == size {
			if i == len(s.segs)-1 && ck.next == s.written {
				return len(s.segs), 0, ""
			}
			if i+1 < len(s.segs) && int64(s.segs[i+1].start)-1 == ck.next {
				return i + 1, 0, ""
			}
		} else if ck.pos < size && frameAt(sg.f, ck.pos, ck.next) {
			return i, ck.pos, ""
		}
		return 0, 0, fmt.Sprintf("log offset %d is not at segment %s position %d", ck.next, sg.path, ck.pos)
	}
	return 0, 0, fmt.Sprintf("checkpoint names segment %s, which the log does not have", segmentName(ck.segment))
}

// frameAt reports whether the wal entry at byte at of f is an intact record
// of log offset want.
func frameAt(f *os.File, at int64, want int64) bool {
	var hdr [binary.MaxVarintLen64]byte
	n, _ := f.ReadAt(hdr[:], at)
	size, k := binary.Uvarint(hdr[:n])
	if k <= 0 || size > uint64(MaxBatchBytes) {
		return false
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, at+int64(k)); err != nil {
		return false
	}
	var m Message
	_, err := decodeRecordTo(&m, buf, "")
	return err == nil && m.LogOffset == want
}

// openFromCheckpoint opens the index files the checkpoint vouches for and
// checks what it can cheaply: that each is as long as the checkpoint says
// and that its newest entry names the record it should. why explains what
// is wrong (then the index is rebuilt).
func (s *Store) openFromCheckpoint(ck *checkpoint) (why string, err error) {
	if s.lidx, err = openIndexFile(s.files, filepath.Join(s.dir, "index", logIndexName), ck.logFlushed); err != nil {
		return "", err
	}
	s.lastStored = ck.lastStored
	for _, cq := range ck.queues {
		q, err := s.queue(cq.topic, cq.id, true)
		if err != nil {
			return "", err
		}
		q.min, q.next, q.lastLog = cq.min, cq.next, cq.lastLog
		q.idx.reset(cq.flushed)
	}
	if why, err := s.loadJournal(ck); why != "" || err != nil {
		return why, err
	}
	if why := s.checkIndex(s.lidx, ck.next, ck.next-1, ck.next > s.logMin); why != "" {
		return "log index: " + why, nil
	}
	for _, cq := range ck.queues {
		q := s.queues[cq.topic][cq.id]
		if why := s.checkIndex(q.idx, cq.next, cq.lastLog, cq.next > cq.min && cq.lastLog >= s.logMin); why != "" {
			return fmt.Sprintf("%s/%d: %s", cq.topic, cq.id, why), nil
		}
	}
	return "", nil
}

// checkIndex checks what it can cheaply of index file x once its buffer is
// back from the journal: that it reaches next, that its newest entry names
// lastLog (when check), and, when entries sit in the file, that the file
// holds them. A queue whose entries are all in the journal costs no file
// access, so an Open at 100,000 queues opens few files.
func (s *Store) checkIndex(x *indexFile, next, lastLog int64, check bool) string {
	if x.next() != next {
		return fmt.Sprintf("%s: the index journal brings it to %d entries, the checkpoint says %d", x.Name(), x.next(), next)
	}
	if !check {
		return ""
	}
	if len(x.buf) > 0 {
		e, err := x.get(next - 1)
		if err != nil {
			return err.Error()
		}
		if e.logOffset != lastLog {
			return fmt.Sprintf("%s entry %d names log offset %d, expected %d", x.Name(), next-1, e.logOffset, lastLog)
		}
		if x.flushed == 0 {
			return ""
		}
		return checkFile(x, x.flushed-1)
	}
	return checkEnd(x, next-1, lastLog)
}

// checkFile checks that index file x holds an intact entry n.
func checkFile(x *indexFile, n int64) string {
	size, err := x.size()
	if err != nil {
		return err.Error()
	}
	if size <= n {
		return fmt.Sprintf("file %s holds %d entries, the checkpoint says %d", x.Name(), size, n+1)
	}
	if _, err := x.get(n); err != nil {
		return err.Error()
	}
	return ""
}

// checkEnd checks that index file x holds entry n, naming log offset lastLog.
func checkEnd(x *indexFile, n, lastLog int64) string {
	size, err := x.size()
	if err != nil {
		return err.Error()
	}
	if size <= n {
		return fmt.Sprintf("file %s holds %d entries, the checkpoint says %d", x.Name(), size, n+1)
	}
	e, err := x.get(n)
	if err != nil {
		return err.Error()
	}
	if e.logOffset != lastLog {
		return fmt.Sprintf("file %s entry %d names log offset %d, expected %d", x.Name(), n, e.logOffset, lastLog)
	}
	return ""
}

// invalidate records, before index files are deleted, that the checkpoint
// no longer vouches for them; what it knows about the log stays.
func (s *Store) invalidate(ck *checkpoint) error {
	if ck == nil || !ck.indexValid {
		return nil
	}
	c := *ck
	c.indexValid = false
	return writeCheckpoint(s.fs, s.dir, &c)
}

// removeIndex deletes every index file.
func (s *Store) removeIndex() error {
	dir := filepath.Join(s.dir, "index")
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range ents {
		if err := s.fs.Remove(filepath.Join(dir, e.Name())); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return s.fs.MkdirAll(dir, 0o750)
}

// loadIndex brings the index up to the log: from the checkpoint when the log
// and the index files prove it, else rebuilt from the oldest segment.
func (s *Store) loadIndex(ck *checkpoint, cut int64) error {
	s.snapStale = true // queues' offsets change outside the append path (snapshotQueues)
	fromSeg, fromPos, why := s.provenStart(ck)
	if why == "" {
		var err error
		if why, err = s.openFromCheckpoint(ck); err != nil {
			return err
		}
	}
	valid := why == ""
	if !valid {
		if ck != nil {
			s.log.Warn("store: index unusable, rebuilding it from the log", "dir", s.dir, "reason", why)
		}
		s.closeIndex()
		if err := s.invalidate(ck); err != nil {
			return err
		}
		if err := s.removeIndex(); err != nil {
			return err
		}
		var err error
		if ck != nil {
			s.jgen = max(s.jgen, ck.journalGen)
		}
		if s.lidx, err = openIndexFile(s.files, filepath.Join(s.dir, "index", logIndexName), s.logMin); err != nil {
			return err
		}
		fromSeg, fromPos = 0, 0
		if ck != nil {
			s.stats.rebuilds.Add(1)
		}
	}
	replayed, err := s.replayFrom(fromSeg, fromPos, valid)
	if err != nil {
		return err
	}
	if !valid && ck != nil {
		if err := s.restoreEmptied(ck); err != nil {
			return err
		}
		if err := s.fillLost(ck); err != nil {
			return err
		}
		if err := s.raiseToCheckpoint(ck); err != nil {
			return err
		}
	}
	for _, qs := range s.queues {
		for _, q := range qs {
			if err := s.raiseMin(q); err != nil {
				return err
			}
			q.visible = q.next
		}
	}
	s.stats.replayed.Store(int64(replayed))
	s.log.Info("store: opened", "dir", s.dir, "log_min", s.logMin, "log_next", s.written,
		"segments", len(s.segs), "replayed", replayed, "queues", s.nq, "cut_bytes", cut, "rebuilt", !valid)
	if replayed > 0 || !valid {
		return s.checkpoint()
	}
	return nil
}

// replayFrom indexes the log from (segment, pos) to its end.
func (s *Store) replayFrom(fromSeg int, fromPos int64, fromCheckpoint bool) (int, error) {
	expect := s.lidx.next()
	replayed := 0
	err := replay(s.segs, fromSeg, fromPos, func(m *Message, sg *segment, pos int64, size int) error {
		if m.LogOffset < expect {
			return nil // before the checkpoint position: already indexed
		}
		if m.LogOffset != expect {
			return fmt.Errorf("log segment %s position %d: %w: log offset %d, expected %d", sg.path, pos, ErrCorrupt, m.LogOffset, expect)
		}
		expect++
		e := entry{logOffset: m.LogOffset, storedAt: m.StoredAt.UnixNano(), pos: pos, size: uint32(size)}
		if m.Topic == "" { // a tombstone of no queue (lost.go), or a damaged record
			replayed++
			return s.addEntry(s.lidx, m.LogOffset, e)
		}
		q, err := s.queue(m.Topic, m.QueueID, true)
		if err != nil {
			return err
		}
		if m.QueueOffset != q.next {
			switch {
			case m.QueueOffset < q.next || (fromCheckpoint && q.lastLog < 0):
				return fmt.Errorf("log segment %s position %d: %w: %s/%d queue offset %d, expected %d",
					sg.path, pos, ErrCorrupt, m.Topic, m.QueueID, m.QueueOffset, q.next)
			case q.lastLog >= 0:
				// Records of the queue are missing in the middle (a damaged
				// record Repair replaced): holes, never handed out again.
				if err := s.addHoles(q, m.QueueOffset, e); err != nil {
					return err
				}
			default:
				q.min, q.next = m.QueueOffset, m.QueueOffset // older records were retained
			}
		}
		if err := s.addEntry(s.lidx, m.LogOffset, e); err != nil {
			return err
		}
		if err := s.addEntry(q.idx, q.next, e); err != nil {
			return err
		}
		q.next++
		q.lastLog = m.LogOffset
		if m.StoredAt.After(s.lastStored) {
			s.lastStored = m.StoredAt
		}
		replayed++
		return nil
	})
	if err == nil && expect != s.written {
		err = fmt.Errorf("%w: replay ended at log offset %d, log ends at %d", ErrCorrupt, expect, s.written)
	}
	return replayed, err
}

// restoreEmptied gives a queue the log no longer shows (after a rebuild)
// the offsets the checkpoint knew: if retention took its records, it keeps
// them (offsets never go backwards, even for an emptied queue); if the tail
// cut took them, they were never durable and it restarts where the log
// still had records of it.
func (s *Store) restoreEmptied(ck *checkpoint) error {
	for _, cq := range ck.queues {
		if s.queues[cq.topic][cq.id] != nil {
			continue
		}
		q, err := s.queue(cq.topic, cq.id, true)
		if err != nil {
			return err
		}
		next := cq.next
		if cq.lastLog >= s.logMin {
			next = cq.min
		}
		q.min, q.next, q.lastLog = next, next, -1
		q.idx.reset(next)
	}
	return nil
}

// raiseMin moves q.min up to the first offset whose record is still in the
// log (after retention dropped segments).
func (s *Store) raiseMin(q *queue) error {
	s.snapStale = true // queues' offsets change outside the append path (snapshotQueues)
	if q.min >= q.next {
		return nil
	}
	first, err := s.entryOf(q, q.min)
	if err != nil {
		return fmt.Errorf("%s/%d: %w", q.topic, q.id, err)
	}
	if first.logOffset >= s.logMin {
		return nil
	}
	get := func(n int64) (entry, error) { return s.entryOf(q, n) }
	m, err := q.searchWith(q.min, q.next, get, func(e entry) bool { return e.logOffset >= s.logMin })
	if err != nil {
		return err
	}
	q.min = m
	return nil
}
