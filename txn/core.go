package txn

import (
	"container/heap"
	"time"

	"github.com/brokercore/brokercore/store"
)

// core is the Manager's state and every decision about it, with no I/O, no
// goroutine and no clock: callers pass now and apply what the log says. The
// Manager holds its mutex around every call.
//
// Invariants: every id in pending is a half below halfNext with no closing
// op record ingested; an entry is in the heap exactly when no append about
// it is in flight (busy false), and an uncertain entry stays busy until a
// restart; outcome holds at most remember closed ids.
type core struct {
	timeout, interval time.Duration
	checkMax          int
	remember          int

	pending   map[int64]*entry
	due       dueHeap
	outcome   map[int64]Resolution
	closed    []closedID // FIFO of outcome's ids, for eviction and progress
	early     map[int64][]opKind
	halfNext  int64 // next HalfTopic offset to ingest
	opNext    int64 // next OpTopic offset to ingest
	baseOp    int64 // op floor of halves that do not say theirs
	uncertain int

	stats Stats
}

type entry struct {
	id      int64
	group   string
	at      time.Time // when the next check is due
	checks  int
	opFloor int64
	busy    bool
	unsure  bool // its last resolution may or may not have landed
	idx     int  // in the heap; -1 when out of it
}

type closedID struct {
	id      int64
	opFloor int64
}

func newCore(o Options, halfNext, opNext int64) *core {
	return &core{
		timeout: o.TransactionTimeout, interval: o.CheckInterval, checkMax: o.CheckMax, remember: o.Remember,
		pending: make(map[int64]*entry), outcome: make(map[int64]Resolution), early: make(map[int64][]opKind),
		halfNext: halfNext, opNext: opNext, baseOp: opNext,
	}
}

// addHalf ingests the half record at offset h.id.
func (c *core) addHalf(h halfInfo) {
	if h.id < c.halfNext {
		return
	}
	c.halfNext = h.id + 1
	wait := c.timeout
	if h.immunity > 0 {
		wait = h.immunity
	}
	floor := h.opFloor
	if floor < 0 || floor > c.opNext {
		floor = c.baseOp
	}
	e := &entry{id: h.id, group: h.group, at: h.storedAt.Add(wait), opFloor: floor, idx: -1}
	c.pending[h.id] = e
	heap.Push(&c.due, e)
	c.stats.Prepared++
	for _, k := range c.early[h.id] {
		c.applyOp(h.id, k, h.storedAt)
	}
	delete(c.early, h.id)
}

// ingestHalf ingests record m of HalfTopic. In order (gap false) it takes
// only the next offset and reports false for any other; with gap true it
// steps past offsets the log no longer has (damaged, retained).
func (c *core) ingestHalf(m *store.Message, gap bool) bool {
	switch {
	case m.QueueOffset < c.halfNext:
		return true
	case m.QueueOffset > c.halfNext && !gap:
		return false
	}
	if h, ok := parseHalf(m); ok {
		c.halfNext = m.QueueOffset
		c.addHalf(h)
		return true
	}
	c.halfNext = m.QueueOffset + 1
	delete(c.early, m.QueueOffset)
	return true
}

// ingestOp ingests record m of OpTopic, with ingestHalf's rules.
func (c *core) ingestOp(m *store.Message, gap bool) bool {
	switch {
	case m.QueueOffset < c.opNext:
		return true
	case m.QueueOffset > c.opNext && !gap:
		return false
	}
	c.opNext = m.QueueOffset + 1
	if id, k, ok := parseOp(m); ok {
		c.applyOp(id, k, m.StoredAt)
	}
	return true
}

// drop forgets open transaction id whose half the log no longer has.
func (c *core) drop(id int64) {
	e, ok := c.pending[id]
	if !ok {
		return
	}
	if e.idx >= 0 {
		heap.Remove(&c.due, e.idx)
	}
	if e.unsure {
		c.uncertain--
	}
	delete(c.pending, id)
	c.stats.Lost++
}

// applyOp ingests an op record stored at `at`: k happened to transaction id.
func (c *core) applyOp(id int64, k opKind, at time.Time) {
	if id >= c.halfNext {
		c.early[id] = append(c.early[id], k) // a foreign writer's half not ingested yet
		return
	}
	e, ok := c.pending[id]
	if !ok {
		return // closed already, forgotten, or not a half: nothing to do
	}
	if !k.resolves() {
		e.checks++
		e.at = at.Add(c.interval)
		c.stats.ChecksSent++
		c.unbusy(e)
		return
	}
	if e.idx >= 0 {
		heap.Remove(&c.due, e.idx)
	}
	if e.unsure {
		c.uncertain--
	}
	delete(c.pending, id)
	c.remind(id, e.opFloor, k.outcome())
	switch k {
	case opCommit:
		c.stats.Committed++
	case opRollback:
		c.stats.RolledBack++
	case opDiscard:
		c.stats.RolledBack++
		c.stats.CheckLimitExceeded++
	}
}

func (c *core) remind(id, opFloor int64, r Resolution) {
	c.outcome[id] = r
	c.closed = append(c.closed, closedID{id, opFloor})
	if len(c.closed) > c.remember {
		delete(c.outcome, c.closed[0].id)
		c.closed[0] = closedID{}
		c.closed = c.closed[1:]
	}
}

// action is what begin tells the Manager to do about a resolution.
type action int

const (
	actAppend action = iota // append the records, then applyOp or abort
	actDone                 // resolved this way already: answer nil
	actWait                 // an append about it is in flight: wait, ask again
)

// begin decides what a resolution r of id needs; on actAppend the entry is
// busy until applyOp or abort.
func (c *core) begin(id int64, r Resolution) (action, error) {
	if e, ok := c.pending[id]; ok {
		if e.busy {
			if e.unsure {
				return 0, ErrUncertain
			}
			return actWait, nil
		}
		c.busy(e)
		return actAppend, nil
	}
	if o, ok := c.outcome[id]; ok {
		if o == r {
			return actDone, nil
		}
		c.stats.Refused++
		return 0, ErrAlreadyResolved
	}
	return 0, ErrNotFound
}

// abort ends an append about id that failed; uncertain says it may have
// landed, so the entry stays busy (no check, no discard, no resolution)
// until the log is read again.
func (c *core) abort(id int64, uncertain bool) {
	e, ok := c.pending[id]
	if !ok {
		return
	}
	if uncertain {
		e.unsure = true
		c.uncertain++
		return
	}
	c.unbusy(e)
}

func (c *core) busy(e *entry) {
	e.busy = true
	if e.idx >= 0 {
		heap.Remove(&c.due, e.idx)
	}
}

func (c *core) unbusy(e *entry) {
	e.busy = false
	if e.idx < 0 {
		heap.Push(&c.due, e)
	}
}

// dueCheck is one decision of dueChecks.
type dueCheck struct {
	id      int64
	group   string
	checks  int  // checks made before this one
	discard bool // past CheckMax: roll back and keep in CheckMaxTimeTopic
}

// dueChecks returns up to max transactions whose check is due at now, in
// due order, each made busy: the Manager appends a check record (or a
// discard batch) and calls applyOp, or abort.
func (c *core) dueChecks(now time.Time, max int) []dueCheck {
	var out []dueCheck
	for len(out) < max && c.due.Len() > 0 && !c.due[0].at.After(now) {
		e := c.due[0]
		c.busy(e)
		out = append(out, dueCheck{id: e.id, group: e.group, checks: e.checks, discard: e.checks >= c.checkMax})
	}
	return out
}

// nextDue is when the earliest check is due (ok false: none).
func (c *core) nextDue() (time.Time, bool) {
	if c.due.Len() == 0 {
		return time.Time{}, false
	}
	return c.due[0].at, true
}

// floors returns where a rebuild must start reading to know every pending
// transaction and every remembered outcome: HalfTopic's and OpTopic's
// offsets. O(pending + remembered).
func (c *core) floors() (half, op int64) {
	half, op = c.halfNext, c.opNext
	for id, e := range c.pending {
		half, op = min(half, id), min(op, e.opFloor)
	}
	for _, cl := range c.closed {
		half, op = min(half, cl.id), min(op, cl.opFloor)
	}
	return half, op
}

func (c *core) snapshot() Stats {
	s := c.stats
	s.Pending = len(c.pending)
	s.Uncertain = c.uncertain
	return s
}

// dueHeap orders entries by due time, then by id.
type dueHeap []*entry

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].id < h[j].id
}
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *dueHeap) Push(x any) {
	e := x.(*entry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.idx = -1
	*h = old[:len(old)-1]
	return e
}
