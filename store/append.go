package store

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/tidwall/wal"
)

// validate checks one message of a batch; it changes nothing.
func (s *Store) validate(i int, m *Message) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: message %d is nil", ErrInvalid, i)
	case m.Topic == "":
		return fmt.Errorf("%w: message %d has an empty topic", ErrInvalid, i)
	case len(m.Topic) > maxTopicLength:
		return fmt.Errorf("%w: message %d topic is %d bytes, limit %d", ErrInvalid, i, len(m.Topic), maxTopicLength)
	case m.QueueID < 0 || m.QueueID > maxQueueID:
		return fmt.Errorf("%w: message %d has queue %d", ErrInvalid, i, m.QueueID)
	case len(m.Body) > s.opts.MaxMessageSize:
		return fmt.Errorf("%w: message %d body is %d bytes, limit %d", ErrInvalid, i, len(m.Body), s.opts.MaxMessageSize)
	case metaSize(m) > MaxMetadataSize:
		return fmt.Errorf("%w: message %d metadata is %d bytes, limit %d", ErrInvalid, i, metaSize(m), MaxMetadataSize)
	}
	return nil
}

// waiter is an Append waiting for the fsync that covers log offsets below
// end; the leader (or a failure, or Close) sends its result on done. Before
// the result a leader may send errLead: the waiter leads the next groups.
type waiter struct {
	end  int64
	done chan error
}

// errLead on a waiter's channel hands it the lead (see Store.lead); it is
// never returned to a caller.
var errLead = errors.New("store: lead the pending groups")

// Room for errLead and the result, so a sender never blocks under mu.
var waiterPool = sync.Pool{New: func() any { return make(chan error, 2) }}

// placed is where one record of a batch lands.
type placed struct {
	q     *queue
	qoff  int64
	pos   int64
	size  int
	entry entry
}

// Append writes msgs as one atomic batch and fills in their QueueOffset,
// LogOffset and StoredAt. Under SyncGroup it returns once the batch is
// fsynced (sharing the fsync with concurrent appends). A batch with any bad
// message is refused whole with ErrInvalid and nothing is written.
func (s *Store) Append(msgs ...*Message) error {
	if len(msgs) == 0 {
		return nil
	}
	total := 0
	for i, m := range msgs {
		err := s.validate(i, m)
		if err == nil {
			if total += len(m.Body) + metaSize(m); total > MaxBatchBytes {
				err = fmt.Errorf("%w: batch of %d messages is over %d bytes", ErrInvalid, len(msgs), MaxBatchBytes)
			}
		}
		if err != nil {
			s.stats.rejected.Add(1)
			if m != nil {
				s.log.Warn("store: append rejected", "topic", m.Topic, "queue", m.QueueID, "batch", len(msgs), "err", err)
			} else {
				s.log.Warn("store: append rejected", "batch", len(msgs), "err", err)
			}
			return err
		}
	}
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	group := s.opts.Sync == SyncGroup
	var as []assigned
	if group {
		as = make([]assigned, len(msgs))
	}
	end, notes, err := s.write(msgs, as)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if !group {
		s.mu.Unlock()
		s.notify(notes)
		return nil
	}
	w := waiterPool.Get().(chan error)
	s.waiters = append(s.waiters, waiter{end: end, done: w})
	lead := !s.writing // nobody is writing and fsyncing: lead this group
	s.writing = true
	s.mu.Unlock()
	if lead {
		s.lead(maxLeadGroups)
	}
	for {
		// Answered once a write and an fsync covered the batch; or handed
		// the lead by a leader that had its fill of groups.
		if err = <-w; err != errLead {
			break
		}
		s.lead(maxLeadGroups)
	}
	waiterPool.Put(w)
	if err != nil {
		return err
	}
	for i, m := range msgs {
		m.QueueOffset, m.LogOffset, m.StoredAt = as[i].qoff, as[i].loff, as[i].stored
	}
	// Each appender, not the leader, calls its own OnAppend: a hook that
	// appends again must not wait on the goroutine that is calling it.
	s.notify(notes)
	return nil
}

// assigned holds what Append assigns to a message until the batch is
// durable (SyncGroup): a failed append fills in nothing.
type assigned struct {
	qoff, loff int64
	stored     time.Time
}

// roll is a segment wal starts: its first wal index, and the final size of
// the segment before it.
type roll struct {
	start    uint64
	prevSize int64
}

// maxLeadGroups bounds how many groups an appender writes and fsyncs for
// others before its own Append returns; it then hands the lead to the
// oldest waiting appender.
const maxLeadGroups = 4

// lead is SyncGroup's group commit, run by the one goroutine holding the
// lead (s.writing): an appender that found nobody writing, an appender
// handed the lead, or a Sync/checkpoint/Close that found nobody writing. It
// takes the whole pending group, writes it to the wal (one write) and
// fsyncs it (one fsync) itself, outside mu, then publishes it and answers
// the waiters it covered; while it does so the next group gathers in pend.
// It repeats up to max groups (max < 1: until none is pending), then gives
// up the lead: to the oldest waiter if records are still pending, so
// leadership stays with the appenders and no goroutine hand-off sits in a
// lone appender's path.
func (s *Store) lead(max int) {
	for n := 0; ; n++ {
		s.mu.Lock()
		if s.pendN == 0 || s.failErr != nil || s.filesClosed || n == max {
			if s.pendN > 0 && s.failErr == nil && !s.filesClosed && len(s.waiters) > 0 {
				// Every waiter's records are pending (what was written is
				// fsynced), so the oldest one's are in the next group.
				s.waiters[0].done <- errLead
			} else {
				s.writing = false
				s.walCond.Broadcast()
			}
			s.mu.Unlock()
			return
		}
		batch, rolls, target := s.pend, s.pendRolls, s.written
		s.pend, s.spare, s.pendN, s.pendRolls = s.spare, wal.Batch{}, 0, nil
		s.mu.Unlock()

		err := s.walWrite(&batch)

		s.mu.Lock()
		if err != nil {
			s.fail(fmt.Errorf("wal write: %w", err))
			s.writing = false
			s.walCond.Broadcast()
			s.mu.Unlock()
			return
		}
		for _, r := range rolls {
			if err := s.addSegment(r.start, r.prevSize); err != nil {
				s.fail(err)
			}
		}
		s.walNext = target
		batch.Clear()
		s.spare = batch
		s.mu.Unlock()
		// A failure is recorded in the failed state and answered to every
		// waiter; the loop then stops.
		_ = s.fsyncLog()
	}
}

// write assigns offsets to the batch, encodes it and adds it to the index.
// Under SyncGroup (as != nil) the records join the pending wal batch that a
// leading appender writes for the whole group, and the assigned fields go to
// as; otherwise write appends them to the wal itself and fills in the
// messages. Callers hold mu exclusively. It returns the log offset just past
// the batch and the OnAppend notices to make once the batch is visible.
func (s *Store) write(msgs []*Message, as []assigned) (int64, []notice, error) {
	// As Read returns it: UTC, no monotonic clock reading, so the message
	// Append filled in equals the one read back.
	stored := s.opts.Now().Round(0).UTC()
	if stored.Before(s.lastStored) {
		stored = s.lastStored // StoredAt never decreases along the log
	}
	// Assign offsets and placement without touching any shared state, so a
	// refusal or an error below leaves everything as it was.
	pl := s.plBuf[:0]
	size := s.tailSize
	var rolls []roll
	segSize := int64(s.opts.SegmentSize)
	if size > segSize { // wal starts a new segment before the batch
		rolls = append(rolls, roll{uint64(s.written) + 1, size})
		size = 0
	}
	s.batch.Clear()
	buf := s.encBuf[:0]
	for i, m := range msgs {
		q, err := s.queue(m.Topic, m.QueueID, true)
		if err != nil {
			return 0, nil, fmt.Errorf("store: open index of %s/%d: %w", m.Topic, m.QueueID, err)
		}
		qoff := q.next
		for j := i - 1; j >= 0; j-- { // batches are small: a scan beats a map
			if pl[j].q == q {
				qoff = pl[j].qoff + 1
				break
			}
		}
		loff := s.written + int64(i)
		c := *m
		c.QueueOffset, c.LogOffset, c.StoredAt = qoff, loff, stored
		at := len(buf)
		buf = appendRecord(buf, &c, i == len(msgs)-1)
		n := len(buf) - at
		if n > s.opts.MaxMessageSize+MaxMetadataSize+256 {
			return 0, nil, fmt.Errorf("%w: message %d encodes to %d bytes", ErrInvalid, i, n)
		}
		hdr := int64(uvarintLen(uint64(n)))
		pl = append(pl, placed{q: q, qoff: qoff, pos: size + hdr, size: n,
			entry: entry{logOffset: loff, storedAt: stored.UnixNano(), pos: size + hdr, size: uint32(n)}})
		size += hdr + int64(n)
		if size >= segSize { // wal closes the segment after this entry
			rolls = append(rolls, roll{uint64(loff) + 2, size})
			size = 0
		}
	}
	s.encBuf = buf
	s.plBuf = pl[:0]
	wb := &s.batch
	if as != nil {
		wb = &s.pend // the leading appender writes it
	}
	at := 0
	for i := range pl {
		wb.Write(uint64(s.written)+uint64(i)+1, buf[at:at+pl[i].size])
		at += pl[i].size
	}
	if as != nil {
		s.pendN += len(pl)
		s.pendRolls = append(s.pendRolls, rolls...)
	} else {
		if err := s.walWrite(wb); err != nil {
			return 0, nil, s.fail(fmt.Errorf("wal write: %w", err))
		}
		// The records are in the wal; from here on, memory follows.
		for _, r := range rolls {
			if err := s.addSegment(r.start, r.prevSize); err != nil {
				return 0, nil, s.fail(err)
			}
		}
		s.walNext = s.written + int64(len(msgs))
	}
	if len(rolls) > 0 {
		s.tailStart = rolls[len(rolls)-1].start
	}
	s.tailSize = size
	for i, m := range msgs {
		p := pl[i]
		if err := s.lidx.add(p.entry.logOffset, p.entry); err != nil {
			return 0, nil, s.fail(err)
		}
		if err := p.q.idx.add(p.qoff, p.entry); err != nil {
			return 0, nil, s.fail(err)
		}
		p.q.next = p.qoff + 1
		p.q.lastLog = p.entry.logOffset
		if as != nil {
			as[i] = assigned{p.qoff, p.entry.logOffset, stored}
		} else {
			m.QueueOffset, m.LogOffset, m.StoredAt = p.qoff, p.entry.logOffset, stored
		}
	}
	s.written += int64(len(msgs))
	s.lastStored = stored
	s.stats.appends.Add(1)
	s.stats.messages.Add(uint64(len(msgs)))
	s.stats.bytes.Add(uint64(len(buf)))
	if len(buf) > 1<<20 {
		s.encBuf = nil // do not pin a large batch's buffer
		if as == nil {
			s.batch = wal.Batch{}
		}
	}
	var notes []notice
	if s.opts.OnAppend != nil || s.hooks.any() {
		notes = make([]notice, 0, 1)
	}
	for i := range msgs {
		p := pl[i]
		if p.q.next != p.qoff+1 {
			continue // report each queue once, with its final next
		}
		if s.opts.Sync == SyncGroup {
			s.pending = append(s.pending, pendingVis{q: p.q, next: p.q.next, end: s.written})
		} else {
			p.q.visible = p.q.next
		}
		if notes != nil {
			notes = append(notes, notice{p.q.topic, p.q.id, p.q.next})
		}
	}
	return s.written, notes, nil
}

// addSegment registers a segment wal just created (the projected tail,
// tailStart and tailSize, moved on when the records were placed). Callers
// hold mu.
func (s *Store) addSegment(start uint64, prevSize int64) error {
	s.segs[len(s.segs)-1].size = prevSize
	// wal keeps the closed segment's bytes in its read cache (at most one
	// segment: SegmentCacheSize 1). The store never reads through wal, but
	// freeing them at every roll measured 25% slower batch appends: the
	// smaller heap makes the collector run far more often while wal grows
	// the new segment's buffer. One cached segment is the bounded price.
	sg := &segment{start: start, path: s.walDir + string(os.PathSeparator) + segmentName(start)}
	f, err := os.Open(sg.path)
	if err != nil {
		return fmt.Errorf("open new segment: %w", err)
	}
	sg.f = f
	s.segs = append(s.segs, sg)
	s.dirDirty = true
	s.ckptDue = true
	s.kickCommitter()
	return nil
}

// now is the store's clock.
func (s *Store) now() time.Time { return s.opts.Now() }
