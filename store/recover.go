package store

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// scanItem is one wal entry met while scanning the tail, or (ok == false,
// framing == true) the point where a segment stops parsing as wal entries.
type scanItem struct {
	seg       int   // index into the segment list
	start     int64 // position of the wal entry (its length prefix)
	end       int64 // position just past it
	ok        bool  // decodes, checksum matches, LogOffset is where it must be
	framing   bool
	batchEnd  bool
	logOffset int64
	storedAt  time.Time
	err       error
}

// scanTail decodes every entry of segs[from:].
func scanTail(segs []*segment, from int) ([]scanItem, error) {
	var items []scanItem
	for j := from; j < len(segs); j++ {
		data, err := os.ReadFile(segs[j].path)
		if err != nil {
			return nil, err
		}
		segs[j].size = int64(len(data))
		frames, end := parseFrames(data, 0)
		prev := int64(0)
		for k, fr := range frames {
			it := scanItem{seg: j, start: prev, end: fr.pos + int64(fr.size)}
			prev = it.end
			m, batchEnd, err := decodeRecord(data[fr.pos : fr.pos+int64(fr.size)])
			want := int64(segs[j].start) - 1 + int64(k)
			switch {
			case err != nil:
				it.err = err
			case m.LogOffset != want:
				it.err = fmt.Errorf("%w: record has log offset %d, expected %d", ErrCorrupt, m.LogOffset, want)
			default:
				it.ok, it.batchEnd, it.logOffset, it.storedAt = true, batchEnd, m.LogOffset, m.StoredAt
			}
			items = append(items, it)
		}
		if end < len(data) {
			items = append(items, scanItem{seg: j, start: int64(end), end: int64(len(data)), framing: true,
				err: fmt.Errorf("%w: %d bytes do not parse as a wal entry", ErrCorrupt, len(data)-end)})
		}
	}
	return items, nil
}

// logPos is a position in the log: a segment (by its first wal index) and
// a byte offset in it. The zero logPos (ok false) is before everything.
type logPos struct {
	segment uint64
	pos     int64
	ok      bool
}

// before reports whether p is at or before byte pos of segment seg.
func (p logPos) before(seg uint64, pos int64) bool {
	return p.ok && (seg > p.segment || (seg == p.segment && pos >= p.pos))
}

// tailInfo is what repairTail learned about the end of the log.
type tailInfo struct {
	lastStored time.Time // StoredAt of the last kept record (zero if none was scanned)
	cutBytes   int64
	cutRecords int
}

// repairTail cuts a torn or corrupt tail back to the end of the last whole
// batch, before tidwall/wal ever sees the files (wal.Open fails on a torn
// last entry). What counts as tail: everything after the first bad entry,
// as long as no good record follows it. A bad entry followed by good ones is
// corruption in the middle of the log: an error naming segment and position,
// never silently dropped data, unless it lies past the last checkpoint
// (synced), where a power loss may have written later pages but not earlier
// ones; there it is cut too, and logged as an error with the intact records
// it took. Records after the last batch-end marker are cut too, so a batch
// is all-or-nothing across a crash.
func repairTail(walDir string, segs []*segment, synced logPos, logger *slog.Logger) ([]*segment, tailInfo, error) {
	var info tailInfo
	if len(segs) == 0 {
		return segs, info, nil
	}
	i := len(segs) - 1
	for i > 0 && segs[i].size == 0 {
		i--
	}
	for {
		items, err := scanTail(segs, i)
		if err != nil {
			return nil, info, err
		}
		limit, intactAfter := len(items), 0
		for k, it := range items {
			if it.ok {
				continue
			}
			for _, later := range items[k+1:] {
				if !later.ok {
					continue
				}
				if !synced.before(segs[it.seg].start, it.start) {
					return nil, info, fmt.Errorf("log segment %s position %d (log offset %d follows it intact): %w",
						segs[it.seg].path, it.start, later.logOffset, it.err)
				}
				intactAfter++
			}
			limit = k
			break
		}
		kept := items[:limit]
		last := -1
		for k := len(kept) - 1; k >= 0; k-- {
			if kept[k].batchEnd {
				last = k
				break
			}
		}
		if last < 0 && i > 0 {
			i-- // the batch boundary lies further back
			continue
		}
		cutSeg, cutPos := 0, int64(0)
		if last >= 0 {
			cutSeg, cutPos = kept[last].seg, kept[last].end
			info.lastStored = kept[last].storedAt
		}
		for _, s := range segs[cutSeg:] {
			info.cutBytes += s.size
		}
		info.cutBytes -= cutPos
		if info.cutBytes == 0 {
			return segs, info, nil
		}
		info.cutRecords = len(items) - (last + 1)
		attrs := []any{"segment", segs[cutSeg].path, "position", cutPos, "bytes", info.cutBytes, "entries", info.cutRecords}
		if limit < len(items) {
			attrs = append(attrs, "reason", items[limit].err.Error())
		} else {
			attrs = append(attrs, "reason", "incomplete batch")
		}
		if intactAfter > 0 {
			attrs = append(attrs, "intact_records_cut", intactAfter)
			logger.Error("store: recovery cut the unsynced log tail at a bad record followed by intact ones", attrs...)
		} else {
			logger.Warn("store: recovery cut the log tail", attrs...)
		}
		for j := len(segs) - 1; j > cutSeg; j-- {
			if err := os.Remove(segs[j].path); err != nil {
				return nil, info, err
			}
		}
		if err := truncateSync(segs[cutSeg].path, cutPos); err != nil {
			return nil, info, err
		}
		segs[cutSeg].size = cutPos
		if err := syncDir(walDir); err != nil {
			return nil, info, err
		}
		return segs[:cutSeg+1], info, nil
	}
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

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

// loadIndex brings the index up to the log: from the checkpoint when it is
// consistent with the log, else rebuilt from the oldest segment.
func (s *Store) loadIndex(tail tailInfo, trust bool) error {
	ck, err := readCheckpoint(s.dir)
	if err != nil {
		s.log.Warn("store: unreadable checkpoint, rebuilding the index from the log", "dir", s.dir, "err", err)
		ck = nil
	}
	valid := trust && ck != nil && ck.next <= s.written && ck.next >= s.logMin
	fromSeg, fromPos := 0, int64(0)
	if valid {
		fromSeg = -1
		for i, sg := range s.segs {
			if sg.start == ck.segment {
				fromSeg, fromPos = i, ck.pos
			}
		}
		if ck.next == s.written {
			fromSeg = len(s.segs) // nothing to replay
		}
		valid = fromSeg >= 0
	}
	if ck != nil && !valid && trust {
		s.log.Warn("store: checkpoint does not match the log, rebuilding the index",
			"dir", s.dir, "checkpoint", ck.next, "log_min", s.logMin, "log_next", s.written)
	}
	next := s.logMin
	if valid {
		next = ck.next
		s.lastStored = ck.lastStored
	} else {
		fromSeg, fromPos = 0, 0
		if err := os.RemoveAll(filepath.Join(s.dir, "index")); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(s.dir, "index"), 0o750); err != nil {
			return err
		}
	}
	if s.lidx, err = openIndexFile(filepath.Join(s.dir, "index", "log.idx"), next); err != nil {
		return err
	}
	if valid {
		for _, cq := range ck.queues {
			q, err := s.queue(cq.topic, cq.id, true)
			if err != nil {
				return err
			}
			q.min, q.next, q.lastLog = cq.min, cq.next, cq.lastLog
			q.idx.reset(cq.next)
		}
	}
	replayed := 0
	expect := next
	err = replay(s.segs, fromSeg, fromPos, func(m *Message, sg *segment, pos int64, size int) error {
		if m.LogOffset < expect {
			return nil // before the checkpoint position: already indexed
		}
		if m.LogOffset != expect {
			return fmt.Errorf("log segment %s position %d: %w: log offset %d, expected %d", sg.path, pos, ErrCorrupt, m.LogOffset, expect)
		}
		expect++
		q, err := s.queue(m.Topic, m.QueueID, true)
		if err != nil {
			return err
		}
		if m.QueueOffset != q.next {
			if valid || m.QueueOffset < q.next {
				return fmt.Errorf("log segment %s position %d: %w: %s/%d queue offset %d, expected %d",
					sg.path, pos, ErrCorrupt, m.Topic, m.QueueID, m.QueueOffset, q.next)
			}
			q.min, q.next = m.QueueOffset, m.QueueOffset // older records were retained
		}
		e := entry{logOffset: m.LogOffset, storedAt: m.StoredAt.UnixNano(), pos: pos, size: uint32(size)}
		if err := s.lidx.add(m.LogOffset, e); err != nil {
			return err
		}
		if err := q.idx.add(q.next, e); err != nil {
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
	if err != nil {
		return err
	}
	s.stats.replayed.Store(int64(replayed))
	if !valid && ck != nil {
		// A queue the log no longer shows: if retention took its records,
		// it keeps the offsets the checkpoint gave it (offsets never go
		// backwards, even for an emptied queue); if the tail cut took them,
		// they were never durable and it restarts where the log still had
		// records of it.
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
	}
	if expect != s.written {
		return fmt.Errorf("%w: replay ended at log offset %d, log ends at %d", ErrCorrupt, expect, s.written)
	}
	if tail.lastStored.After(s.lastStored) {
		s.lastStored = tail.lastStored
	}
	for _, qs := range s.queues {
		for _, q := range qs {
			if err := s.raiseMin(q); err != nil {
				return err
			}
			if err := checkNewest(q); err != nil {
				return err
			}
			q.visible = q.next
		}
	}
	if s.written > s.logMin {
		e, err := s.lidx.get(s.written - 1)
		if err == nil && e.logOffset != s.written-1 {
			err = fmt.Errorf("%w: log index ends at %d, log at %d", ErrCorrupt, e.logOffset, s.written-1)
		}
		if err != nil {
			return fmt.Errorf("log index: %w", err)
		}
	}
	s.log.Info("store: opened", "dir", s.dir, "log_min", s.logMin, "log_next", s.written,
		"segments", len(s.segs), "replayed", replayed, "queues", s.nq, "cut_bytes", tail.cutBytes)
	if replayed > 0 || !valid {
		return s.checkpoint()
	}
	return nil
}

// raiseMin moves q.min up to the first offset whose record is still in the
// log (after retention dropped segments).
func (s *Store) raiseMin(q *queue) error {
	if q.min >= q.next {
		return nil
	}
	first, err := q.idx.get(q.min)
	if err != nil {
		return fmt.Errorf("%s/%d: %w", q.topic, q.queueID(), err)
	}
	if first.logOffset >= s.logMin {
		return nil
	}
	m, err := q.search(q.min, q.next, func(e entry) bool { return e.logOffset >= s.logMin })
	if err != nil {
		return err
	}
	q.min = m
	return nil
}

func (q *queue) queueID() int { return q.id }

// checkNewest verifies that a queue's index ends where its state says, so a
// damaged or stale index file is caught (and rebuilt) at Open rather than
// at a Read.
func checkNewest(q *queue) error {
	if q.next <= q.min || q.lastLog < 0 {
		return nil
	}
	e, err := q.idx.get(q.next - 1)
	if err != nil {
		return fmt.Errorf("%s/%d: %w", q.topic, q.id, err)
	}
	if e.logOffset != q.lastLog {
		return fmt.Errorf("%w: %s/%d index ends at log offset %d, expected %d", ErrCorrupt, q.topic, q.id, e.logOffset, q.lastLog)
	}
	return nil
}
