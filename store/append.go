package store

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// validate checks one message of a batch; it changes nothing.
func (s *Store) validate(i int, m *Message) error {
	return checkMessage(i, m, s.opts.MaxMessageSize)
}

// waiter is an Append waiting for the fsync that covers log offsets below
// end; the leader (or a failure, or Close) sends its result on done. Before
// the result a leader may send errLead: the waiter leads the next groups.
type waiter struct {
	end  int64
	done chan error
	n    int // messages
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
		return s.usableShared()
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
			if uerr := s.usableShared(); uerr != nil {
				return uerr // after Close (or a failure) every call says so, bad input or not
			}
			s.stats.rejected.Add(1)
			if m != nil {
				s.log.Debug("store: append rejected", "topic", m.Topic, "queue", m.QueueID, "batch", len(msgs), "err", err)
			} else {
				s.log.Debug("store: append rejected", "batch", len(msgs), "err", err)
			}
			return err
		}
	}
	now := s.opts.Now() // read before mu: the clock is no part of what mu orders (write clamps it)
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	group := s.opts.Sync == SyncGroup
	var as []assigned
	var small [4]assigned // most batches: no allocation
	if group {
		as = small[:0]
		if len(msgs) > len(small) {
			as = make([]assigned, 0, len(msgs))
		}
		as = as[:len(msgs)]
	}
	end, notes, err := s.write(msgs, as, false, now)
	if err != nil {
		s.mu.Unlock()
		s.log.Debug("store: append failed", "batch", len(msgs), "err", err)
		return err
	}
	if !group {
		s.mu.Unlock()
		s.notify(notes)
		return nil
	}
	w := waiterPool.Get().(chan error)
	s.waiters = append(s.waiters, waiter{end: end, done: w, n: len(msgs)})
	s.waitRecs += len(msgs)
	if s.gatherWant > 0 && s.waitRecs >= s.gatherWant {
		s.gatherWant = 0 // the group is complete: wake the leader
		select {
		case s.gathered <- struct{}{}:
		default:
		}
	}
	lead := !s.syncing // nobody is fsyncing: lead
	s.syncing = true
	s.mu.Unlock()
	if lead {
		s.lead(maxLeadRounds, len(msgs))
	}
	for {
		// Answered once an fsync covered the batch; or handed the lead by
		// a leader that had its fill of rounds.
		if err = <-w; err != errLead {
			break
		}
		s.lead(maxLeadRounds, len(msgs))
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

// roll is a segment the log starts: its first wal index, the final size of
// the segment before it, and where in the frames being written it begins.
type roll struct {
	start    uint64
	prevSize int64
	at       int
}

// maxLeadRounds bounds how many fsyncs an appender does for others before
// its own Append returns; it then hands the lead to the oldest waiting
// appender.
const maxLeadRounds = 4

// lead is SyncGroup's group commit, run by the one goroutine holding the
// lead (s.syncing): an appender that found nobody fsyncing, an appender
// handed the lead, or a Sync/checkpoint/Close. Appenders queue their
// records under mu; the leader writes and fsyncs them, outside mu, so the
// next group is placed while the fsync runs
// (pipelined), then publishes it and answers the waiters it covered. It
// repeats up to max rounds (max < 1: while any waiter is left), then gives
// up the lead: to the oldest waiter if any is left, so leadership stays
// with the appenders and no goroutine hand-off sits in a lone appender's
// path.
func (s *Store) lead(max, own int) {
	for n := 0; ; n++ {
		s.mu.Lock()
		if len(s.waiters) == 0 || s.failErr != nil || s.filesClosed || n == max {
			if len(s.waiters) > 0 && s.failErr == nil && !s.filesClosed {
				s.waiters[0].done <- errLead
			} else {
				s.syncing = false
				s.walCond.Broadcast()
			}
			s.mu.Unlock()
			return
		}
		last, took := s.lastGroup, s.lastFsync
		s.mu.Unlock()
		if n == 1 {
			// The last fsync answered this leader's own messages too, and
			// its caller appends nothing more until lead returns: do not
			// wait for them.
			last -= own
		}
		s.gather(last, took)
		// A failure is recorded in the failed state and answered to every
		// waiter; the loop then stops.
		_ = s.fsyncLog()
	}
}

// gather lets the appenders the last fsync answered write their next
// records before the next fsync starts (for at most as long as that fsync
// took): otherwise two part-groups alternate, each written while the
// other's fsync runs, and every fsync carries part of the appenders. The
// leader sleeps until the appender that completes the group wakes it, or
// the time is up; it polls nothing, so it takes neither a processor nor
// mu from the appenders it waits for. The limit is a whole fsync, not
// less: waking 63 appenders and letting each place its next record takes
// two loaded cores longer than half a fast fsync, and a leader that stops
// waiting then fsyncs a round of one while the other 63 wait for it
// (measured: 1–5% of rounds of one record and 54–56 records per fsync
// with half, 61–63 with a whole fsync). The whole wait is paid only when
// an appender of the last round does not append again, and the group
// size waited for follows the last round: each appender that stops costs
// one wait. The group is counted in messages, not appenders: one appender
// may carry many senders' messages (a broker that appends the sends of one
// read burst together), and how they split into appends changes from one
// round to the next while how many come back does not.
func (s *Store) gather(last int, took time.Duration) {
	s.mu.Lock()
	if s.waitRecs >= last || took <= 0 || s.failErr != nil || s.filesClosed {
		s.mu.Unlock()
		return
	}
	s.gatherWant = last
	s.mu.Unlock()
	s.gatherTimer.Reset(took)
	select {
	case <-s.gathered:
	case <-s.gatherTimer.C:
	}
	s.gatherTimer.Stop()
	s.mu.Lock()
	s.gatherWant = 0
	s.mu.Unlock()
	select { // a signal sent as the timer fired
	case <-s.gathered:
	default:
	}
}

// write assigns offsets to the batch, encodes it, writes it to the log and
// adds it to the index. Under SyncGroup (as != nil) the assigned fields go
// to as (filled in once durable); otherwise into the messages. Callers
// hold mu exclusively. It returns the log offset just past the batch and
// the OnAppend notices to make once the batch is visible. With lost the
// records are tombstones (lost.go). now is Options.Now, read by the caller.
func (s *Store) write(msgs []*Message, as []assigned, lost bool, now time.Time) (int64, []notice, error) {
	// As Read returns it: UTC, no monotonic clock reading, so the message
	// Append filled in equals the one read back.
	stored := now.Round(0).UTC()
	if stored.Before(s.lastStored) {
		stored = s.lastStored // StoredAt never decreases along the log
	}
	// Assign offsets and placement without touching any shared state, so a
	// refusal or an error below leaves everything as it was. Where the log
	// starts a new segment (where wal would) and how it frames an entry is
	// decided here and verified against the files (verify.go) before any
	// entry is used.
	pl := s.plBuf[:0]
	size := s.tailSize
	group := s.opts.Sync == SyncGroup
	fr := &s.batch
	if group {
		fr = &s.pend // written by the group-commit leader, with the round (writePending)
	} else {
		fr.reset()
	}
	// Framed, the batch goes to fr.buf from base on; fpos follows it, so a
	// roll knows where in fr.buf its segment begins.
	base := len(fr.buf)
	fpos := base
	var rolls []roll
	segSize := int64(s.opts.SegmentSize)
	if size > segSize { // a new segment before the batch (SegmentSize shrank since the tail was written)
		rolls = append(rolls, roll{uint64(s.written) + 1, size, fpos})
		size = 0
	}
	buf := s.encBuf[:0]
	for i, m := range msgs {
		var q *queue
		qoff := m.QueueOffset // a tombstone's, or for one of no queue
		if !lost || m.Topic != "" {
			var err error
			if q, err = s.queue(m.Topic, m.QueueID, true); err != nil {
				return 0, nil, s.fail(fmt.Errorf("open index of %s/%d: %w", m.Topic, m.QueueID, err))
			}
			qoff = q.next
		}
		for j := i - 1; j >= 0 && q != nil; j-- { // batches are small: a scan beats a map
			if pl[j].q == q {
				qoff = pl[j].qoff + 1
				break
			}
		}
		loff := s.written + int64(i)
		c := *m
		c.QueueOffset, c.LogOffset, c.StoredAt = qoff, loff, stored
		at := len(buf)
		var flags byte
		if i == len(msgs)-1 {
			flags |= flagBatchEnd
		}
		if lost {
			flags |= flagLost
		}
		buf = appendRecordFlags(buf, &c, flags)
		n := len(buf) - at
		if n > s.opts.MaxMessageSize+MaxMetadataSize+256 {
			return 0, nil, fmt.Errorf("%w: message %d encodes to %d bytes", ErrInvalid, i, n)
		}
		hdr := int64(uvarintLen(uint64(n)))
		pl = append(pl, placed{q: q, qoff: qoff, pos: size + hdr, size: n,
			entry: entry{logOffset: loff, storedAt: stored.UnixNano(), pos: size + hdr, size: uint32(n)}})
		size += hdr + int64(n)
		fpos += int(hdr) + n
		if size >= segSize { // the segment is closed after this entry (as wal does)
			rolls = append(rolls, roll{uint64(loff) + 2, size, fpos})
			size = 0
		}
	}
	s.encBuf = buf
	s.plBuf = pl[:0]
	at := 0
	for i := range pl {
		fr.buf = appendFrame(fr.buf, buf[at:at+pl[i].size])
		at += pl[i].size
	}
	fr.rolls = append(fr.rolls, rolls...)
	lastPl := pl[len(pl)-1]
	frame := frameCheck{pos: lastPl.pos, size: uint32(lastPl.size)}
	copy(frame.head[:], buf[len(buf)-lastPl.size:])
	if size == 0 {
		frame = frameCheck{} // the last record closed its segment (checked at the roll)
	}
	if !group {
		if err := s.logWrite(fr); err != nil {
			return 0, nil, s.fail(fmt.Errorf("log write: %w", err))
		}
		// The records are in the log; from here on, memory follows.
		for _, r := range rolls {
			if err := s.addSegment(r.start, r.prevSize); err != nil {
				return 0, nil, s.fail(err)
			}
		}
		s.walWritten, s.walTail, s.walFrame = s.written+int64(len(msgs)), size, frame
	}
	s.tailSize, s.lastFrame = size, frame
	for i, m := range msgs {
		p := pl[i]
		if err := s.addEntry(s.lidx, p.entry.logOffset, p.entry); err != nil {
			return 0, nil, s.fail(err)
		}
		if p.q == nil {
			continue // a tombstone of no queue: the log index only
		}
		if err := s.addEntry(p.q.idx, p.qoff, p.entry); err != nil {
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
	if !lost {
		s.indexKeys(msgs, pl)
	}
	s.written += int64(len(msgs))
	s.lastStored = stored
	s.appended += int64(len(buf))
	if s.appended-s.ckptAt >= s.opts.CheckpointBytes && !s.ckptDue {
		s.ckptDue = true
		s.kickCommitter()
	}
	s.stats.appends.Add(1)
	s.stats.messages.Add(uint64(len(msgs)))
	s.stats.bytes.Add(uint64(len(buf)))
	if len(buf) > 1<<20 {
		s.encBuf = nil // do not pin a large batch's buffer
		if !group {
			s.batch = frames{}
		}
	}
	var notes []notice
	if s.opts.OnAppend != nil || s.hooks.any() {
		notes = make([]notice, 0, 1)
	}
	for i := range msgs {
		p := pl[i]
		if p.q == nil || p.q.next != p.qoff+1 {
			continue // report each queue once, with its final next
		}
		if as != nil {
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

// addSegment registers a segment the log writer just created, after checking that the
// segment before it ended where the store placed its records. Callers hold
// mu.
func (s *Store) addSegment(start uint64, prevSize int64) error {
	prev := s.segs[len(s.segs)-1]
	if err := s.verifySize(prev, prevSize); err != nil {
		return err
	}
	prev.size = prevSize
	sg := &segment{start: start, path: s.walDir + string(os.PathSeparator) + segmentName(start)}
	f, err := os.Open(sg.path)
	if err != nil {
		return fmt.Errorf("wal diverged from the store: the segment it should have started at wal index %d: %w", start, err)
	}
	sg.f = f
	s.segs = append(s.segs, sg)
	s.tailStart = start
	s.dirDirty = true
	s.ckptDue = true
	s.kickCommitter()
	return nil
}

// now is the store's clock.
func (s *Store) now() time.Time { return s.opts.Now() }

// pendingWrite is a group-commit round's records taken out of Store.pend,
// and what the log holds once they are written.
type pendingWrite struct {
	fr      *frames
	written int64
	tail    int64
	frame   frameCheck
}

// takePending takes the records waiting for the log (SyncGroup). Callers
// hold ioMu and mu.
func (s *Store) takePending() (pendingWrite, bool) {
	if s.walWritten == s.written {
		return pendingWrite{}, false
	}
	p := pendingWrite{fr: new(frames), written: s.written, tail: s.tailSize, frame: s.lastFrame}
	*p.fr, s.pend, s.spare = s.pend, s.spare, frames{}
	return p, true
}

// writePending writes a round's records to the log, one write per segment
// it touches. Callers hold ioMu (so nothing else writes the log) and not
// mu; the result is applied under mu by applyPending.
func (s *Store) writePending(p pendingWrite) error {
	if err := s.logWrite(p.fr); err != nil {
		return fmt.Errorf("log write: %w", err)
	}
	return nil
}

// applyPending records that p is in the log and registers the segments it
// started. Callers hold ioMu and mu.
func (s *Store) applyPending(p pendingWrite, werr error) error {
	if werr != nil {
		return s.fail(werr)
	}
	for _, r := range p.fr.rolls {
		if err := s.addSegment(r.start, r.prevSize); err != nil {
			return s.fail(err)
		}
	}
	s.walWritten, s.walTail, s.walFrame = p.written, p.tail, p.frame
	if cap(p.fr.buf) <= 1<<20 { // reuse the buffers of a round of ordinary size
		p.fr.reset()
		s.spare = *p.fr
	}
	return nil
}

// flushPendingLocked writes what waits for the log while holding mu (a
// checkpoint, retention). Callers hold ioMu and mu.
func (s *Store) flushPendingLocked() error {
	p, ok := s.takePending()
	if !ok {
		return nil
	}
	return s.applyPending(p, s.writePending(p))
}
