package pop

import (
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
// in-flight entry is kept ordered by visible time (in its duration's lane,
// or the fallback heap `hidden`: lanes.go), so a pop finds what became
// visible without scanning the backlog; once its
// time is over it moves to `visible` (by offset: redeliveries go in
// order) or, when it reached the dead-letter threshold, to `dlDue`.

// Where an entry is.
const (
	inHidden  uint8 = iota // invisible until visibleAt
	inVisible              // revivable, in queueState.visible
	inDLDue                // due for DeadLetter, in queueState.dlDue
	detached               // an ack's commit is in flight
)

// entry is one popped offset that is not settled. It holds no pointer,
// and neither do the collections of entries (a slab, the offset order,
// slot heaps), so the garbage collector never scans the in-flight table.
type entry struct {
	off       int64
	visibleAt int64  // unix nanos: invisible (in flight or parked) until then
	batch     uint64 // FIFO batch id it belongs to; 0 = none
	attempts  int32  // deliveries so far
	gen       uint32 // bumped on every delivery, change and park: old handles go stale
	slot      int32  // its index in queueState.slab
	hidx      int32  // index in hidden while in the heap
	hseq      uint32 // hide sequence number: names the lane item that holds it
	lane      int16  // its lane while where == inHidden; -1 = the heap
	where     uint8
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
//
// A *entry is only valid until the next add (the slab may move) and names
// another entry once its own is settled: callers holding one across an
// unlock look the offset up again.
type queueState struct {
	queue     int
	inc       uint64 // incarnation: handles of an older state are stale
	epoch     uint64 // the Offsets epoch this state was built under
	next      int64  // the next offset to read for a first delivery
	committed int64  // last offset committed (or the start offset)
	mustSave  bool   // the start offset must be committed (InitialOffset Latest)
	slab      []entry
	free      []int32    // unused slab slots
	nLive     int        // entries in the slab
	order     []orderRef // offsets with an entry and their slots, increasing; settled ones dropped lazily
	head      int        // order[:head] is dropped
	lanes     []lane     // invisible entries by duration, in visible-time order (lanes.go)
	hidden    []int32    // other invisible entries' slots: a min-heap on visibleAt
	nHidden   int        // invisible entries in lanes and heap
	hseq      uint32     // last hide sequence number
	visible   []int32    // slots of revivable entries, by offset
	dlDue     []int32    // slots of entries due for DeadLetter
	batch     fifoBatch
	fifoUsed  bool // a FIFO batch was formed: acks may unblock waiters
}

// orderRef is an offset of queueState.order and the slab slot its entry
// was given: the entry is still there while slab[slot].off is off (a
// settled entry's off is -1), which needs no map lookup.
type orderRef struct {
	off  int64
	slot int32
}

// liveAt returns the entry r names, or nil once it was settled.
func (q *queueState) liveAt(r orderRef) *entry {
	if int(r.slot) < len(q.slab) && q.slab[r.slot].off == r.off {
		return &q.slab[r.slot]
	}
	return nil
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
	return &queueState{queue: queue, inc: inc, epoch: epoch, next: start, committed: start}
}

func (q *queueState) pending() int { return q.nLive }

// get returns the entry of off, or nil: a binary search of order (every
// entry has its orderRef in order[head:]), no map: with 100k messages in
// flight a map of them cost a cache miss per pop and per ack.
func (q *queueState) get(off int64) *entry {
	o := q.order[q.head:]
	if n := len(o); n > recentRefs && o[n-recentRefs].off <= off {
		// Mostly the offsets of the last pops are acked: their refs are at
		// the end, in a few cache lines, whatever the backlog before them.
		o = o[n-recentRefs:]
	}
	i, ok := slices.BinarySearchFunc(o, off, func(r orderRef, off int64) int { return cmpInt(r.off, off) })
	if !ok {
		return nil
	}
	return q.liveAt(o[i])
}

// recentRefs is how many refs at the end of order get looks at first.
const recentRefs = 2 * MaxBatch

// liveOffsets lists the offsets that have an entry, increasing.
func (q *queueState) liveOffsets() []int64 {
	var out []int64
	for _, r := range q.order[q.head:] {
		if q.liveAt(r) != nil {
			out = append(out, r.off)
		}
	}
	return out
}

// low is the lowest offset that is not settled: the offset that may be
// committed. It never passes an unacked message; an entry whose ack is
// committing counts as settled.
func (q *queueState) low() int64 {
	for q.head < len(q.order) {
		e := q.liveAt(q.order[q.head])
		if e != nil {
			if e.where != detached {
				return e.off
			}
			break
		}
		q.head++
	}
	for _, r := range q.order[q.head:] {
		if e := q.liveAt(r); e != nil && e.where != detached {
			return r.off
		}
	}
	return q.next
}

// compact drops settled offsets from order once they are most of it, so a
// never-acked head message does not make order grow with every pop; and
// once the prefix low() walked past (order[:head]) is most of order, it
// moves the rest down, so acks in order do not make it grow either.
func (q *queueState) compact() {
	n := len(q.order) - q.head
	switch {
	case n >= 64 && n >= 2*q.nLive:
		o := q.order[:0]
		for _, r := range q.order[q.head:] {
			if q.liveAt(r) != nil {
				o = append(o, r)
			}
		}
		q.order, q.head = o, 0
	case q.head >= 64 && q.head >= n:
		q.order, q.head = q.order[:copy(q.order, q.order[q.head:])], 0
	}
}

// add records the first delivery of off (at next).
func (q *queueState) add(off int64, batch uint64) *entry {
	var i int32
	if n := len(q.free); n > 0 {
		i, q.free = q.free[n-1], q.free[:n-1]
	} else {
		i = int32(len(q.slab))
		q.slab = append(q.slab, entry{})
	}
	q.slab[i] = entry{off: off, batch: batch, slot: i, hidx: -1, where: detached}
	q.nLive++
	q.compact()
	q.order = append(q.order, orderRef{off: off, slot: i})
	q.next = off + 1
	return &q.slab[i]
}

// detach takes e out of whichever collection holds it.
func (q *queueState) detach(e *entry) {
	switch e.where {
	case inHidden:
		q.nHidden--
		if e.lane >= 0 {
			q.laneLeft(int(e.lane))
		} else {
			q.heapRemove(int(e.hidx))
		}
	case inVisible:
		i, ok := slices.BinarySearchFunc(q.visible, e.off, func(x int32, off int64) int { return cmpInt(q.slab[x].off, off) })
		if ok {
			q.visible = slices.Delete(q.visible, i, i+1)
		}
	case inDLDue:
		if i := slices.Index(q.dlDue, e.slot); i >= 0 {
			q.dlDue = slices.Delete(q.dlDue, i, i+1)
		}
	}
	e.where = detached
}

// hide puts a detached e, invisible for dur (0: unknown), among the
// invisible entries: in dur's lane, or in the heap.
func (q *queueState) hide(e *entry, dur int64) {
	e.where = inHidden
	q.nHidden++
	q.hseq++
	if q.hseq == 0 {
		q.hseq++
	}
	e.hseq = q.hseq
	if li := q.laneOf(dur, e.visibleAt); li >= 0 {
		e.lane = int16(li)
		q.lanes[li].items = append(q.lanes[li].items, laneItem{at: e.visibleAt, slot: e.slot, hseq: e.hseq})
		return
	}
	e.lane = -1
	e.hidx = int32(len(q.hidden))
	q.hidden = append(q.hidden, e.slot)
	q.heapUp(int(e.hidx))
}

// settle removes e: acked, dead-lettered, filtered out or gone from the log.
func (q *queueState) settle(e *entry) {
	q.detach(e)
	q.nLive--
	q.free = append(q.free, e.slot)
	*e = entry{off: -1} // no orderRef names it any more (liveAt)
	if q.nLive == 0 && len(q.slab) > 1024 {
		q.slab, q.free = nil, nil // give a drained queue's slab back
	}
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
	q.hide(e, int64(inv))
	return append(out, pick{qs: q, off: e.off, gen: e.gen, att: e.attempts, msg: m})
}

// change makes e invisible for d from now (ChangeInvisible).
func (q *queueState) change(e *entry, now int64, d int64) {
	q.detach(e)
	e.gen++
	e.visibleAt = now + d
	q.hide(e, d)
}

// refresh moves the entries whose invisible time ended at now out of the
// lanes and the heap: to dlDue if they reached dlAt deliveries (dlAt 0: no dead
// letters), else to visible.
func (q *queueState) refresh(now int64, dlAt int32) {
	moved := false
	for {
		e, ok := q.earliestHidden()
		if !ok || e.visibleAt > now {
			break
		}
		q.detach(e)
		if dlAt > 0 && e.attempts >= dlAt {
			e.where = inDLDue
			q.dlDue = append(q.dlDue, e.slot)
			continue
		}
		e.where = inVisible
		q.visible = append(q.visible, e.slot)
		moved = true
	}
	if moved {
		slices.SortFunc(q.visible, func(a, b int32) int { return cmpInt(q.slab[a].off, q.slab[b].off) })
	}
}

// due reports whether something became visible by now (a waiter should
// look again).
func (q *queueState) due(now int64) bool {
	if len(q.visible) > 0 || len(q.dlDue) > 0 {
		return true
	}
	e, ok := q.earliestHidden()
	return ok && e.visibleAt <= now
}

// park hides a dead-letter candidate while DeadLetter is offered it: its
// handles go stale and it stays invisible for retry.
func (q *queueState) park(e *entry, now, retry int64) {
	q.detach(e)
	e.gen++
	e.batch = 0
	e.visibleAt = now + retry
	q.hide(e, retry)
}

// The heap of hidden slots, ordered by visible time; each entry knows its
// index (hidx).

func (q *queueState) heapLess(i, j int) bool {
	return q.slab[q.hidden[i]].visibleAt < q.slab[q.hidden[j]].visibleAt
}

func (q *queueState) heapSwap(i, j int) {
	h := q.hidden
	h[i], h[j] = h[j], h[i]
	q.slab[h[i]].hidx, q.slab[h[j]].hidx = int32(i), int32(j)
}

func (q *queueState) heapUp(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !q.heapLess(j, i) {
			break
		}
		q.heapSwap(i, j)
		j = i
	}
}

func (q *queueState) heapDown(i int) {
	n := len(q.hidden)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && q.heapLess(r, l) {
			j = r
		}
		if !q.heapLess(j, i) {
			return
		}
		q.heapSwap(i, j)
		i = j
	}
}

func (q *queueState) heapRemove(i int) {
	n := len(q.hidden) - 1
	q.slab[q.hidden[i]].hidx = -1
	if i != n {
		q.hidden[i] = q.hidden[n]
		q.slab[q.hidden[i]].hidx = int32(i)
	}
	q.hidden = q.hidden[:n]
	if i < n {
		q.heapDown(i)
		q.heapUp(i)
	}
}

// revivable returns the offsets of up to max visible entries, in order.
func (q *queueState) revivable(max int, buf []int64) []int64 {
	for _, i := range q.visible[:min(max, len(q.visible))] {
		buf = append(buf, q.slab[i].off)
	}
	return buf
}

// popFresh delivers up to max of the messages read at next (the first
// delivery of each), tagging them with batch (0 for non-FIFO). A message
// the filter rejects is settled at once (never delivered); skipped counts
// them. Offsets the log skipped (retention) are settled too.
func (q *queueState) popFresh(msgs []*store.Message, f Filter, now int64, inv time.Duration, max int, batch uint64, out []pick) (_ []pick, skipped int) {
	start := len(out)
	for _, m := range msgs {
		if len(out)-start >= max {
			break
		}
		if m == nil || m.QueueOffset < q.next {
			continue
		}
		if !f.Match(m.Tags) {
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
