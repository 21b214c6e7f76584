package schedule

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/store"
)

// The delivery core: step is a plain method over a lane's state that takes
// the time as a value; loop is the thin driver (one goroutine per lane and
// generation, a ticker, the stop channel). Tests call step directly.

// cursor is a level loop's own position, like the offset a RocketMQ delivery
// task carries. Start takes it from the level's progress after the previous
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
// cursor at time now: one batch, one append, one progress update.
func (s *Scheduler) step(g *generation, lv *level, c *cursor, now time.Time) stepResult {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if !s.isCurrent(g) {
		return stepResult{stale: true}
	}
	if lv.unsaved {
		// The last batch's progress is not on disk. Delivering more would
		// let a crash repeat more than the batch in flight, so hold back
		// until the file can be written.
		if err := s.persist(); err != nil {
			s.log.Error("schedule: progress still not saved, delivery held back", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", lv.next.Load(), "err", err)
			return stepResult{failed: true}
		}
		lv.unsaved = false
	}
	return s.deliverDue(g, lv, c, now)
}

func (s *Scheduler) deliverDue(g *generation, lv *level, c *cursor, now time.Time) stepResult {
	if lo := s.src.MinOffset(Topic, lv.queue); c.next < lo {
		s.log.Warn("schedule: retention removed undelivered messages", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", c.next, "to", lo, "lost", lo-c.next, "generation", g.n)
		lv.skipped.Add(uint64(lo - c.next))
		if _, err := s.commit(nil, lv, lo, nil, func() { c.next = lo; lv.next.Store(lo) }); err != nil {
			s.saveFailed(lv, err)
			return stepResult{failed: true}
		}
	}
	batch := s.opts.MaxBatch
	if lv.single > 0 {
		batch = 1
	}
	msgs, err := s.src.Read(Topic, lv.queue, c.next, batch)
	if err != nil {
		s.log.Warn("schedule: read failed, will retry", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", c.next, "err", err)
		return stepResult{failed: true}
	}
	if len(msgs) == 0 {
		lv.oldestDue.Store(0)
		return stepResult{}
	}
	out := make([]*store.Message, 0, len(msgs))
	var origins []origin // of out; kept for a dead letter
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
			origins = append(origins, origin{topic: Topic, queue: lv.queue, offset: offset,
				props: map[string]string{PropDelayLevel: strconv.Itoa(lv.n)}})
		} else {
			lv.malformed.Add(1)
			s.log.Warn("schedule: record without scheduling properties skipped", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", offset)
		}
		next = offset + 1
	}
	if next == c.next { // nothing due
		lv.oldestDue.Store(pending.UnixNano())
		return stepResult{}
	}
	appended, err := s.commit(out, lv, next, nil, func() {
		c.next = next
		lv.next.Store(next)
		lv.delivered.Add(uint64(len(out)))
	})
	if !appended && permanent(err) && len(out) > 0 {
		return s.refused(g, lv, c, out, origins, next, err)
	}
	if appended && lv.single > 0 {
		lv.single--
	}
	if !appended {
		lv.retried.Add(1)
		lv.oldestDue.Store(firstDue.UnixNano())
		s.log.Warn("schedule: append failed, will retry the same offset", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", c.next, "messages", len(out), "generation", g.n, "err", err)
		return stepResult{failed: true}
	}
	if pending.IsZero() {
		lv.oldestDue.Store(0)
	} else {
		lv.oldestDue.Store(pending.UnixNano())
	}
	if err != nil {
		s.saveFailed(lv, err)
	}
	return stepResult{more: pending.IsZero() && !lv.unsaved}
}

// refused handles a batch the log refused for good (store.ErrInvalid):
// retrying it can never succeed. A batch of several messages is delivered
// again one message at a time, at once, so only the refused ones are set
// aside; a single refused message goes to DeadLetterTopic with the reason,
// with the progress past it in the same commit; if the log refuses even
// its dead letter, the progress moves past it anyway (counted as dropped,
// logged at ERROR with its keys): nothing a log refuses for good may stop
// a level. A transient failure on the way is retried with the backoff.
func (s *Scheduler) refused(g *generation, lv *level, c *cursor, out []*store.Message, origins []origin, next int64, err error) stepResult {
	if len(out) > 1 {
		lv.single = int(next - c.next)
		s.log.Warn("schedule: batch refused for good, delivering it one message at a time", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", c.next, "messages", len(out), "err", err)
		return stepResult{more: true}
	}
	m, o := out[0], origins[0]
	advance := func(counter *atomic.Uint64) func() {
		return func() {
			c.next = next
			lv.next.Store(next)
			counter.Add(1)
			lv.single = max(lv.single-1, 0)
		}
	}
	dl := deadLetter(m, o, err)
	appended, serr := s.commit([]*store.Message{dl}, lv, next, nil, advance(&lv.deadLettered))
	if appended {
		s.log.Error("schedule: message refused by the log for good, moved to the dead-letter topic", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", o.offset, "real_topic", m.Topic, "real_queue", m.QueueID, "uniq_key", m.Properties[PropUniqKey], "dlq_topic", DeadLetterTopic, "dlq_offset", dl.QueueOffset, "err", err)
	} else if permanent(serr) {
		appended, serr = s.commit(nil, lv, next, nil, advance(&lv.dropped))
		if appended {
			s.log.Error("schedule: message and its dead letter refused by the log for good, dropped", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", o.offset, "real_topic", m.Topic, "real_queue", m.QueueID, "uniq_key", m.Properties[PropUniqKey], "err", err, "dlq_err", serr)
		}
	}
	if !appended {
		lv.retried.Add(1)
		s.log.Warn("schedule: dead letter append failed, will retry the same offset", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", c.next, "generation", g.n, "err", serr)
		return stepResult{failed: true}
	}
	if serr != nil {
		s.saveFailed(lv, serr)
	}
	return stepResult{more: !lv.unsaved}
}

// saveFailed marks a level whose progress write failed after its append: it
// delivers nothing more until a retry of the write works.
func (s *Scheduler) saveFailed(lv *level, err error) {
	lv.unsaved = true
	s.log.Error("schedule: progress not saved", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", lv.next.Load(), "err", err)
}

// loop drives one lane for generation g until g ends: step at once, then at
// every tick, again at once after a full batch, and after a failure only
// once a backoff (counted in ticks, so Stop ends it at once) has passed.
func (s *Scheduler) loop(g *generation, step func(now time.Time) stepResult) {
	defer g.wg.Done()
	t := time.NewTicker(s.opts.Tick)
	defer t.Stop()
	var backoff time.Duration
	wait := 0 // ticks left before the next attempt
	for {
		if wait > 0 {
			wait--
		} else {
			r := step(s.now())
			switch {
			case r.stale:
				return
			case r.failed:
				backoff = min(max(2*backoff, s.opts.Tick), max(MaxRetryBackoff, s.opts.Tick))
				wait = int(backoff/s.opts.Tick) - 1
			case r.more:
				backoff = 0
				continue
			default:
				backoff = 0
			}
		}
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
	}
}
