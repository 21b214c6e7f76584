package schedule

import (
	"time"

	"github.com/brokercore/brokercore/store"
)

// The delivery core: step is a plain method over the level's state that takes
// the time as a value; loop is the thin driver (one goroutine per level and
// generation, a ticker, the stop channel).

// cursor is a loop's own position, like the offset a RocketMQ delivery task
// carries. Start takes it from the level's progress after the previous
// generation has fully ended, and only the loop moves it; the generation
// guard is what keeps a second cursor for the same level from acting.
type cursor struct {
	next int64
}

type stepResult struct {
	stale  bool // the generation is over: the loop must exit
	more   bool // a full batch went out: step again without waiting
	failed bool // a read or append failed: back off, then retry the same offset
}

// step delivers, under lv.mu, the due prefix of the level's queue from the
// cursor: one batch, one append, one progress update.
func (s *Scheduler) step(e *epoch, lv *level, c *cursor) stepResult {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if !s.isCurrent(e) {
		return stepResult{stale: true}
	}
	if lv.unsaved {
		// The last batch's progress is not on disk. Delivering more would
		// let a crash repeat more than the batch in flight, so hold back
		// until the file can be written.
		if err := s.persist(); err != nil {
			s.log.Error("schedule: progress still not saved, delivery held back", "level", lv.n, "next", lv.next.Load(), "err", err)
			return stepResult{failed: true}
		}
		lv.unsaved = false
	}
	return s.deliverDue(e, lv, c, s.now())
}

func (s *Scheduler) deliverDue(e *epoch, lv *level, c *cursor, now time.Time) stepResult {
	if lo := s.src.MinOffset(Topic, lv.queue); c.next < lo {
		s.log.Warn("schedule: retention removed undelivered messages", "level", lv.n, "queue", lv.queue, "from", c.next, "to", lo, "lost", lo-c.next, "generation", e.n)
		lv.skipped.Add(lo - c.next)
		c.next = lo
		lv.next.Store(lo)
		if s.persistFrom(lv); lv.unsaved {
			return stepResult{failed: true}
		}
	}
	msgs, err := s.src.Read(Topic, lv.queue, c.next, s.maxBatch)
	if err != nil {
		s.log.Warn("schedule: read failed, will retry", "level", lv.n, "queue", lv.queue, "offset", c.next, "err", err)
		return stepResult{failed: true}
	}
	if len(msgs) == 0 {
		lv.oldestDue.Store(0)
		return stepResult{}
	}
	out := make([]*store.Message, 0, len(msgs))
	next := c.next
	var pending time.Time // due time of the first message not due yet
	firstDue := msgs[0].StoredAt.Add(lv.delay)
	for _, m := range msgs {
		// StoredAt never decreases along the log and the delay is the same
		// for the whole queue, so the first message not due ends the batch.
		due := m.StoredAt.Add(lv.delay)
		if now.Before(due) {
			pending = due
			break
		}
		offset := m.QueueOffset
		if restore(m) {
			out = append(out, m)
		} else {
			lv.malformed.Add(1)
			s.log.Warn("schedule: record without scheduling properties skipped", "level", lv.n, "queue", lv.queue, "offset", offset)
		}
		next = offset + 1
	}
	if next == c.next { // nothing due
		lv.oldestDue.Store(pending.UnixNano())
		return stepResult{}
	}
	if len(out) > 0 {
		if err := s.src.Append(out...); err != nil {
			lv.retried.Add(1)
			lv.oldestDue.Store(firstDue.UnixNano())
			s.log.Warn("schedule: append failed, will retry the same offset", "level", lv.n, "queue", lv.queue, "offset", c.next, "messages", len(out), "generation", e.n, "err", err)
			return stepResult{failed: true}
		}
	}
	c.next = next
	lv.next.Store(next)
	lv.delivered.Add(int64(len(out)))
	if pending.IsZero() {
		lv.oldestDue.Store(0)
	} else {
		lv.oldestDue.Store(pending.UnixNano())
	}
	s.persistFrom(lv)
	return stepResult{more: pending.IsZero() && !lv.unsaved}
}

// persistFrom records progress after a batch; the caller holds lv.mu. On a
// failure the level delivers nothing more until a retry of the write works.
func (s *Scheduler) persistFrom(lv *level) {
	if err := s.persist(); err != nil {
		lv.unsaved = true
		s.log.Error("schedule: progress not saved", "level", lv.n, "next", lv.next.Load(), "err", err)
	}
}

// loop drives one level for generation e until e ends.
func (s *Scheduler) loop(e *epoch, lv *level, c cursor) {
	home := e
	defer s.all.Done()
	defer home.wg.Done()
	t := time.NewTicker(s.tick)
	defer t.Stop()
	var backoff time.Duration
	wait := 0 // ticks left before the next attempt
	for {
		if wait > 0 {
			wait--
		} else {
			r := s.step(e, lv, &c)
			switch {
			case r.stale:
				return
			case r.failed:
				backoff = min(max(2*backoff, s.tick), max(MaxRetryBackoff, s.tick))
				wait = int(backoff/s.tick) - 1
			case r.more:
				backoff = 0
				continue
			default:
				backoff = 0
			}
		}
		select {
		case <-e.stop:
			if !s.guardOff {
				return
			}
			// The field report's finally block: "if started, schedule my
			// successor on the current timer".
			n := s.cur.Load()
			if n == nil {
				return
			}
			e = n
		case <-t.C:
		}
	}
}
