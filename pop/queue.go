package pop

import (
	"math"
	"time"

	"github.com/brokercore/brokercore/store"
)

// queue.go is the deterministic core of one (group, topic, queue): plain
// state and decisions that take `now` as a value. It starts no goroutine,
// reads no clock and takes no lock; the Service (service.go) serializes
// calls under its group@topic mutex.

const never = math.MaxInt64

// entry is one popped message that is not yet behind the committed offset.
type entry struct {
	msg       *store.Message
	visibleAt int64  // unix nanos: invisible (in flight or parked) until then
	attempts  int32  // deliveries so far
	gen       uint32 // bumped on every delivery, change and park: old handles go stale
	batch     uint64 // FIFO batch id it belongs to; 0 = none
	done      bool   // acked, dead-lettered, or a gap the log skipped
}

// fifoBatch is the FIFO in-flight batch of a queue: members are the
// not-done entries in [first, last] tagged with id.
type fifoBatch struct {
	id          uint64
	attempt     string
	first, last int64
}

// queueState is the in-memory pop state of one (group, topic, queue) built
// under one offset epoch. entries covers every offset in [base, next()):
// each was popped at least once. Everything below base is done and
// committed (or being committed).
type queueState struct {
	queue     int
	inc       uint64 // incarnation: handles of an older state are stale
	epoch     uint64 // the Offsets epoch this state was built under
	base      int64
	entries   []entry
	pending   int   // not-done entries
	committed int64 // last offset committed (or the start offset)
	earliest  int64 // no not-done entry becomes visible before this
	batch     fifoBatch
	fifoUsed  bool // a FIFO batch was formed: acks may unblock waiters
}

// pick is one delivery decided by the core; the driver turns it into a
// Delivery with a handle after leaving the lock.
type pick struct {
	qs  *queueState
	off int64
	gen uint32
	att int32
	msg *store.Message
}

func newQueueState(queue int, inc, epoch uint64, start int64) *queueState {
	return &queueState{queue: queue, inc: inc, epoch: epoch, base: start, committed: start, earliest: never}
}

func (q *queueState) next() int64 { return q.base + int64(len(q.entries)) }

func (q *queueState) entry(off int64) *entry {
	if off < q.base || off >= q.next() {
		return nil
	}
	return &q.entries[off-q.base]
}

// low is the lowest offset that is not done: the offset that may be
// committed. It never passes an unacked message.
func (q *queueState) low() int64 {
	for i := range q.entries {
		if !q.entries[i].done {
			return q.base + int64(i)
		}
	}
	return q.next()
}

// lowIfDone is low() as it would be once off were done.
func (q *queueState) lowIfDone(off int64) int64 {
	for i := range q.entries {
		o := q.base + int64(i)
		if !q.entries[i].done && o != off {
			return o
		}
	}
	return q.next()
}

// trim drops done entries at the head.
func (q *queueState) trim() {
	i := 0
	for i < len(q.entries) && q.entries[i].done {
		q.entries[i] = entry{}
		i++
	}
	if i == 0 {
		return
	}
	q.base += int64(i)
	q.entries = q.entries[i:]
	if len(q.entries) == 0 {
		q.entries = q.entries[:0:0]
		if cap(q.entries) == 0 {
			q.entries = nil
		}
	}
}

func (q *queueState) markDone(e *entry) {
	if !e.done {
		e.done = true
		e.gen++
		e.msg = nil
		q.pending--
	}
}

// deliver hands e out again (or for the first time): fresh generation,
// new invisible time, and one more attempt unless count is false (the
// same-attemptId FIFO re-pop).
func (q *queueState) deliver(e *entry, off, now int64, inv time.Duration, count bool, out []pick) []pick {
	e.gen++
	e.visibleAt = now + int64(inv)
	if count {
		e.attempts++
	}
	if e.visibleAt < q.earliest {
		q.earliest = e.visibleAt
	}
	return append(out, pick{qs: q, off: off, gen: e.gen, att: e.attempts, msg: e.msg})
}

// refreshEarliest recomputes the earliest visible time of not-done entries.
func (q *queueState) refreshEarliest() {
	q.earliest = never
	for i := range q.entries {
		if e := &q.entries[i]; !e.done && e.visibleAt < q.earliest {
			q.earliest = e.visibleAt
		}
	}
}

// deadLetterDue parks every not-done entry whose invisible time ended after
// maxAttempts deliveries: its handles go stale and it stays invisible for
// retry while the caller offers it to DeadLetter.
func (q *queueState) deadLetterDue(now int64, maxAttempts int, retry time.Duration, out []pick) []pick {
	if now < q.earliest {
		return out
	}
	for i := range q.entries {
		e := &q.entries[i]
		if e.done || e.visibleAt > now || int(e.attempts) < maxAttempts {
			continue
		}
		e.gen++
		e.batch = 0
		e.visibleAt = now + int64(retry)
		out = append(out, pick{qs: q, off: q.base + int64(i), gen: e.gen, att: e.attempts, msg: e.msg})
	}
	q.refreshEarliest()
	return out
}

// revivable counts not-done entries visible at now, up to limit.
func (q *queueState) revivable(now int64, limit int) int {
	if now < q.earliest {
		return 0
	}
	n := 0
	for i := range q.entries {
		if e := &q.entries[i]; !e.done && e.visibleAt <= now {
			if n++; n >= limit {
				break
			}
		}
	}
	return n
}

// popRevived redelivers up to max visible not-done entries (non-FIFO).
func (q *queueState) popRevived(now int64, inv time.Duration, max int, out []pick) []pick {
	if now < q.earliest || max <= 0 {
		return out
	}
	start := len(out)
	full := false
	for i := range q.entries {
		e := &q.entries[i]
		if e.done || e.visibleAt > now {
			continue
		}
		if len(out)-start >= max {
			full = true
			break
		}
		e.batch = 0
		out = q.deliver(e, q.base+int64(i), now, inv, true, out)
	}
	if !full {
		q.refreshEarliest()
	}
	return out
}

// popFresh delivers up to max of the messages read at next() (the first
// delivery of each), tagging them with batch (0 for non-FIFO). A message
// the filter rejects is settled at once (done, never delivered); skipped
// counts them.
func (q *queueState) popFresh(msgs []*store.Message, f tagFilter, now int64, inv time.Duration, max int, batch uint64, out []pick) (_ []pick, skipped int) {
	start := len(out)
	for _, m := range msgs {
		if len(out)-start >= max {
			break
		}
		if m == nil || m.QueueOffset < q.next() {
			continue
		}
		for q.next() < m.QueueOffset { // a gap the log skipped (retention)
			q.entries = append(q.entries, entry{done: true})
		}
		if !f.match(m.Tags) {
			q.entries = append(q.entries, entry{done: true})
			skipped++
			continue
		}
		q.entries = append(q.entries, entry{msg: m, batch: batch})
		q.pending++
		out = q.deliver(&q.entries[len(q.entries)-1], m.QueueOffset, now, inv, true, out)
	}
	if skipped > 0 {
		q.trim()
	}
	return out, skipped
}

// skipTo moves next() forward to off (the log no longer has what lies
// before it); the skipped offsets count as done.
func (q *queueState) skipTo(off int64) {
	if len(q.entries) == 0 && off > q.base {
		q.base = off
		return
	}
	for q.next() < off {
		q.entries = append(q.entries, entry{done: true})
	}
}
