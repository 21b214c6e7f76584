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
// Invariants: every id in pending is a half seen by c.half with no closing
// op record ingested; an entry is in the heap exactly when no append about
// it is in flight (busy false), and an uncertain entry stays busy until the
// log settles it (settle, or an op record about it ingested); outcome holds
// at most remember closed ids.
type core struct {
	timeout, interval time.Duration
	checkMax          int
	remember          int

	pending   map[int64]*entry
	due       dueHeap
	outcome   map[int64]Resolution
	closed    []closedID // FIFO of outcome's ids, for eviction and progress
	early     map[int64][]opKind
	half      frontier // HalfTopic's ingested offsets
	op        frontier // OpTopic's
	baseOp    int64    // op floor of halves that do not say theirs
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
	unsure  bool   // its last append may or may not have landed
	gen     uint64 // how many appends about it failed uncertainly
	idx     int    // in the heap; -1 when out of it
}

// unsureRef names an uncertain entry as it was when a settling began: an
// entry that failed again since is not settled by it.
type unsureRef struct {
	id  int64
	gen uint64
}

type closedID struct {
	id      int64
	opFloor int64
}

func newCore(o Options, halfNext, opNext int64) *core {
	return &core{
		timeout: o.TransactionTimeout, interval: o.CheckInterval, checkMax: o.CheckMax, remember: o.Remember,
		pending: make(map[int64]*entry), outcome: make(map[int64]Resolution), early: make(map[int64][]opKind),
		half: frontier{next: halfNext}, op: frontier{next: opNext}, baseOp: opNext,
	}
}

// addHalf ingests the half h (its offset already marked in c.half).
func (c *core) addHalf(h halfInfo) {
	if _, ok := c.pending[h.id]; ok {
		return
	}
	if _, ok := c.outcome[h.id]; ok {
		return
	}
	wait := c.timeout
	if h.immunity > 0 {
		wait = h.immunity
	}
	floor := h.opFloor
	if floor < 0 {
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

// ingestHalf ingests record m of HalfTopic. own says the Manager appended
// it itself: it may then be ahead of records other appends have not
// ingested yet. A record read from the log (own false) past the frontier
// steps over offsets the log no longer has (damaged, retained).
func (c *core) ingestHalf(m *store.Message, own bool) {
	if c.half.seen(m.QueueOffset) {
		return
	}
	c.half.mark(m.QueueOffset, own)
	if h, ok := parseHalf(m); ok {
		c.addHalf(h)
		return
	}
	delete(c.early, m.QueueOffset)
}

// ingestOp ingests record m of OpTopic, with ingestHalf's rules.
func (c *core) ingestOp(m *store.Message, own bool) {
	if c.op.seen(m.QueueOffset) {
		return
	}
	c.op.mark(m.QueueOffset, own)
	if id, k, ok := parseOp(m); ok {
		c.applyOp(id, k, m.StoredAt)
	}
}

// frontier is how far a queue has been ingested: every offset below next,
// and the offsets in ahead (own records that landed before others).
type frontier struct {
	next  int64
	ahead map[int64]struct{}
}

func (f *frontier) seen(off int64) bool {
	if off < f.next {
		return true
	}
	_, ok := f.ahead[off]
	return ok
}

func (f *frontier) mark(off int64, own bool) {
	if own && off > f.next {
		if f.ahead == nil {
			f.ahead = make(map[int64]struct{})
		}
		f.ahead[off] = struct{}{}
		return
	}
	if off >= f.next {
		f.next = off + 1
	}
	for a := range f.ahead {
		if a < f.next {
			delete(f.ahead, a)
		}
	}
	for {
		if _, ok := f.ahead[f.next]; !ok {
			return
		}
		delete(f.ahead, f.next)
		f.next++
	}
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
	e, ok := c.pending[id]
	if !ok {
		if !c.half.seen(id) {
			c.early[id] = append(c.early[id], k) // a foreign writer's half not ingested yet
		}
		return // else closed already, forgotten, or not a half: nothing to do
	}
	if !k.resolves() {
		e.checks++
		e.at = at.Add(c.interval)
		c.stats.ChecksSent++
		c.sure(e)
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
// until the log settles it.
func (c *core) abort(id int64, uncertain bool) {
	e, ok := c.pending[id]
	if !ok {
		return
	}
	if uncertain {
		if !e.unsure {
			e.unsure = true
			c.uncertain++
		}
		e.gen++
		return
	}
	c.unbusy(e)
}

// unsureRefs names the uncertain entries. O(pending).
func (c *core) unsureRefs() []unsureRef {
	if c.uncertain == 0 {
		return nil
	}
	var out []unsureRef
	for id, e := range c.pending {
		if e.unsure {
			out = append(out, unsureRef{id, e.gen})
		}
	}
	return out
}

// settle ends the uncertainty of r once the log was read past every record
// its failed append could have left, and none was found: the append never
// landed, so the transaction is open again (due as it was). It reports
// whether r was still uncertain as named.
func (c *core) settle(r unsureRef) bool {
	e, ok := c.pending[r.id]
	if !ok || !e.unsure || e.gen != r.gen {
		return false
	}
	c.sure(e)
	c.unbusy(e)
	return true
}

// sure clears e's uncertainty.
func (c *core) sure(e *entry) {
	if e.unsure {
		e.unsure = false
		c.uncertain--
	}
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
	half, op = c.half.next, c.op.next
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
