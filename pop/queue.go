package pop

import (
	"container/heap"
	"math"
	"slices"
	"time"

	"github.com/brokercore/brokercore/store"
)

// queue.go is the deterministic state of one (group, topic, queue): plain
// data and decisions that take `now` as a value. It starts no goroutine,
// reads no clock and takes no lock; the Service serializes calls under its
// group@topic mutex.
//
// Only popped, unsettled offsets have an entry (sparse): an acked,
// dead-lettered or filtered offset has none. An entry keeps offsets and
// counters, never the message: a redelivery reads the body again. An
// in-flight entry is in the heap `hidden` ordered by visible time, so a
// pop finds what became visible without scanning the backlog; once its
// time is over it moves to `visible` (by offset: redeliveries go in
// order) or, when it reached the dead-letter threshold, to `dlDue`.

const never = math.MaxInt64

// Where an entry is.
const (
	inHidden  uint8 = iota // invisible until visibleAt
	inVisible              // revivable, in queueState.visible
	inDLDue                // due for DeadLetter, in queueState.dlDue
	detached               // an ack's commit is in flight
)

// entry is one popped offset that is not settled.
type entry struct {
	off       int64
	visibleAt int64  // unix nanos: invisible (in flight or parked) until then
	batch     uint64 // FIFO batch id it belongs to; 0 = none
	attempts  int32  // deliveries so far
	gen       uint32 // bumped on every delivery, change and park: old handles go stale
	hidx      int32  // index in hidden while where == inHidden
	where     uint8
}

// entryHeap orders hidden entries by visible time.
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].visibleAt < h[j].visibleAt }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = int32(i), int32(j)
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.hidx = int32(len(*h))
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.hidx = -1
	return e
}

// fifoBatch is the FIFO in-flight batch of a queue: members are the
// offsets delivered together under one attempt id, in order.
type fifoBatch struct {
	id      uint64
	attempt string
	members []int64
}

// queueState is the in-memory pop state of one (group, topic, queue) built
// under one offset epoch. Offsets below next without an entry are settled.
type queueState struct {
	queue     int
	inc       uint64 // incarnation: handles of an older state are stale
	epoch     uint64 // the Offsets epoch this state was built under
	next      int64  // the next offset to read for a first delivery
	committed int64  // last offset committed (or the start offset)
	mustSave  bool   // the start offset must be committed (InitialOffset Latest)
	live      map[int64]*entry
	order     []int64 // offsets with an entry, increasing; settled ones dropped lazily
	head      int     // order[:head] is dropped
	hidden    entryHeap
	visible   []*entry // by offset
	dlDue     []*entry
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
	return &queueState{queue: queue, inc: inc, epoch: epoch, next: start, committed: start, live: make(map[int64]*entry)}
}

func (q *queueState) pending() int { return len(q.live) }

// low is the lowest offset that is not settled: the offset that may be
// committed. It never passes an unacked message; an entry whose ack is
// committing counts as settled.
func (q *queueState) low() int64 {
	for q.head < len(q.order) {
		e := q.live[q.order[q.head]]
		if e != nil {
			if e.where != detached {
				return e.off
			}
			break
		}
		q.head++
	}
	if q.head > 64 && q.head*2 > len(q.order) {
		q.order = append(q.order[:0], q.order[q.head:]...)
		q.head = 0
	}
	for _, off := range q.order[q.head:] {
		if e := q.live[off]; e != nil && e.where != detached {
			return off
		}
	}
	return q.next
}

// add records the first delivery of off (at next).
func (q *queueState) add(off int64, batch uint64) *entry {
	e := &entry{off: off, batch: batch, hidx: -1, where: detached}
	q.live[off] = e
	q.order = append(q.order, off)
	q.next = off + 1
	return e
}

// detach takes e out of whichever collection holds it.
func (q *queueState) detach(e *entry) {
	switch e.where {
	case inHidden:
		heap.Remove(&q.hidden, int(e.hidx))
	case inVisible:
		i, ok := slices.BinarySearchFunc(q.visible, e.off, func(x *entry, off int64) int { return cmpInt(x.off, off) })
		if ok {
			q.visible = slices.Delete(q.visible, i, i+1)
		}
	case inDLDue:
		if i := slices.Index(q.dlDue, e); i >= 0 {
			q.dlDue = slices.Delete(q.dlDue, i, i+1)
		}
	}
	e.where = detached
}

// hide puts a detached e into the heap of invisible entries.
func (q *queueState) hide(e *entry) {
	e.where = inHidden
	heap.Push(&q.hidden, e)
}

// settle removes e: acked, dead-lettered, filtered out or gone from the log.
func (q *queueState) settle(e *entry) {
	q.detach(e)
	delete(q.live, e.off)
}

// deliver hands e out again (or for the first time): fresh generation,
// new invisible time, and one more attempt unless count is false (the
// same-attemptId FIFO re-pop).
func (q *queueState) deliver(e *entry, now int64, inv time.Duration, count bool, m *store.Message, out []pick) []pick {
	q.detach(e)
	e.gen++
	e.visibleAt = now + int64(inv)
	if count {
		e.attempts++
	}
	q.hide(e)
	return append(out, pick{qs: q, off: e.off, gen: e.gen, att: e.attempts, msg: m})
}

// change makes e invisible until visibleAt (ChangeInvisible).
func (q *queueState) change(e *entry, visibleAt int64) {
	q.detach(e)
	e.gen++
	e.visibleAt = visibleAt
	q.hide(e)
}

// refresh moves the entries whose invisible time ended at now out of the
// heap: to dlDue if they reached dlAt deliveries (dlAt 0: no dead
// letters), else to visible.
func (q *queueState) refresh(now int64, dlAt int32) {
	moved := false
	for len(q.hidden) > 0 && q.hidden[0].visibleAt <= now {
		e := heap.Pop(&q.hidden).(*entry)
		if dlAt > 0 && e.attempts >= dlAt {
			e.where = inDLDue
			q.dlDue = append(q.dlDue, e)
			continue
		}
		e.where = inVisible
		q.visible = append(q.visible, e)
		moved = true
	}
	if moved {
		slices.SortFunc(q.visible, func(a, b *entry) int { return cmpInt(a.off, b.off) })
	}
}

// due reports whether something became visible by now (a waiter should
// look again).
func (q *queueState) due(now int64) bool {
	return len(q.visible) > 0 || len(q.dlDue) > 0 || (len(q.hidden) > 0 && q.hidden[0].visibleAt <= now)
}

// park hides a dead-letter candidate while DeadLetter is offered it: its
// handles go stale and it stays invisible for retry.
func (q *queueState) park(e *entry, until int64) {
	q.detach(e)
	e.gen++
	e.batch = 0
	e.visibleAt = until
	q.hide(e)
}

// revivable returns the offsets of up to max visible entries, in order.
func (q *queueState) revivable(max int, buf []int64) []int64 {
	for _, e := range q.visible[:min(max, len(q.visible))] {
		buf = append(buf, e.off)
	}
	return buf
}

// popFresh delivers up to max of the messages read at next (the first
// delivery of each), tagging them with batch (0 for non-FIFO). A message
// the filter rejects is settled at once (never delivered); skipped counts
// them. Offsets the log skipped (retention) are settled too.
func (q *queueState) popFresh(msgs []*store.Message, f tagFilter, now int64, inv time.Duration, max int, batch uint64, out []pick) (_ []pick, skipped int) {
	start := len(out)
	for _, m := range msgs {
		if len(out)-start >= max {
			break
		}
		if m == nil || m.QueueOffset < q.next {
			continue
		}
		if !f.match(m.Tags) {
			q.next = m.QueueOffset + 1
			skipped++
			continue
		}
		out = q.deliver(q.add(m.QueueOffset, batch), now, inv, true, m, out)
	}
	return out, skipped
}

// skipTo moves next forward to off (the log no longer has what lies
// before it); the skipped offsets count as settled.
func (q *queueState) skipTo(off int64) {
	if off > q.next {
		q.next = off
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
