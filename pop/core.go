package pop

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/brokercore/brokercore/store"
)

// core.go is the deterministic pop core of one group@topic: plain state
// and two steps, plan and apply, that take `now` as a value. It starts no
// goroutine, holds no channel or context and reads no clock. The driver
// (pop.go) runs: lock → plan → unlock → read the planned offsets → lock →
// apply → unlock → commit. Between plan and apply only acks and
// ChangeInvisible calls can change the state (pops of a group@topic are
// serialized by its lock), and both only take entries away from what a
// pop may deliver; apply re-decides with the same `now` and delivers
// nothing that was not read.

// view is what the core reads of the log and the offsets of its
// group@topic: plain lookups that never wait.
type view interface {
	MinOffset(queue int) int64
	MaxOffset(queue int) int64
	Epoch(queue int) uint64
	Committed(queue int) (int64, bool)
}

// coreConfig is what the core needs of Options.
type coreConfig struct {
	initial InitialOffset
	dlAt    int32 // MaxAttempts when a DeadLetter is set; 0 = no dead letters
	dlRetry int64 // nanos a parked dead letter stays invisible
}

// core is the pop state of one group@topic.
type core struct {
	group, topic string
	cfg          coreConfig
	queues       map[int]*queueState
	rr           int    // AllQueues rotation
	filter       Filter // the group's subscription on the topic
	subscribed   bool   // filter was set by a pop
	incSeq       uint64
	batchSeq     uint64
	log          *slog.Logger
	st           *counters
}

func newCore(group, topic string, cfg coreConfig, log *slog.Logger, st *counters) *core {
	return &core{group: group, topic: topic, cfg: cfg, queues: make(map[int]*queueState), log: log, st: st}
}

// popReq is a validated Request as the core sees it.
type popReq struct {
	fifo    bool
	attempt string
	client  string
	max     int
	inv     time.Duration
	filter  Filter
}

// queuePlan is one queue of a plan: what to read and, once read, the
// messages.
type queuePlan struct {
	qs    *queueState
	again []int64  // offsets of entries delivered again (or offered to DeadLetter), increasing
	gens  []uint32 // dead-letter round: the parked generation of again[i]
	from  int64    // first offset of the fresh read (qs.next at plan time)
	n     int      // fresh messages to read

	// Filled by the driver's read.
	got   []*store.Message // got[i] is again[i]'s message; nil if not read or gone
	read  []bool           // read[i]: again[i] was read (a nil got[i] is then gone)
	fresh []*store.Message
	err   error // the first read error
}

// lookup answers for a re-delivered offset: its message, and whether it
// was read at all (read with a nil message: gone from the log).
func (qp *queuePlan) lookup(off int64) (*store.Message, bool) {
	i, ok := slices.BinarySearch(qp.again, off)
	if !ok || i >= len(qp.read) || !qp.read[i] {
		return nil, false
	}
	return qp.got[i], true
}

// popPlan is the outcome of plan: the reads a pop needs.
type popPlan struct {
	now         int64
	req         popReq
	deadLetters bool // a dead-letter round: only DeadLetter offers, no delivery
	owned       bool // FIFO: some queue's batch belongs to req.attempt
	queues      []queuePlan
}

// subscribe makes f the group's filter on the topic.
func (c *core) subscribe(f Filter, client string) {
	if c.subscribed && f.expr == c.filter.expr {
		return
	}
	if c.subscribed {
		c.st.filterChanges.Add(1)
		c.log.Info("pop: subscription filter replaced", "group", c.group, "topic", c.topic, "client", client,
			"old_filter", c.filter.String(), "filter", f.String())
	}
	c.filter, c.subscribed = f, true
}

// state returns the queue's state, dropping it first if the offset epoch
// changed (a reset): popping then restarts at the committed offset.
func (c *core) state(q int, v view) *queueState {
	ep := v.Epoch(q)
	qs := c.queues[q]
	if qs != nil && qs.epoch == ep {
		return qs
	}
	start, ok := v.Committed(q)
	save := false
	if !ok {
		start = v.MinOffset(q)
		if c.cfg.initial == Latest {
			start, save = v.MaxOffset(q), true
		}
	}
	if min := v.MinOffset(q); start < min {
		c.log.Warn("pop: committed offset below the log's min offset, skipping ahead", "group", c.group, "topic", c.topic,
			"queue", q, "offset", start, "min", min)
		start = min
	}
	if qs != nil {
		c.st.resets.Add(1)
		c.log.Info("pop: offset epoch changed, dropping in-memory queue state", "group", c.group, "topic", c.topic, "queue", q,
			"old_epoch", qs.epoch, "epoch", ep, "offset", start, "dropped_in_flight", qs.pending())
	}
	c.incSeq++
	qs = newQueueState(q, c.incSeq, ep, start)
	qs.mustSave = save
	c.queues[q] = qs
	return qs
}

// plan decides what a pop of queues (in this order) at now must read. A
// dead-letter round comes first when an entry of a covered queue reached
// the dead-letter threshold: it parks those entries and plans their reads
// only; the driver offers them to DeadLetter, settles them and plans again.
//
// queues is visited from index rot on, wrapping around (the AllQueues
// rotation; see rotation).
func (c *core) plan(now int64, req popReq, v view, queues []int, rot int) *popPlan {
	c.subscribe(req.filter, req.client)
	if p := c.planDeadLetters(now, req, v, queues); p != nil {
		return p
	}
	p := &popPlan{now: now, req: req, queues: make([]queuePlan, 0, min(len(queues), 4))}
	n := len(queues)
	if req.fifo && req.attempt != "" {
		for _, q := range queues {
			if qs := c.queues[q]; qs != nil && qs.epoch == v.Epoch(q) && qs.fifoOwns(req.attempt) {
				p.owned = true
				break
			}
		}
	}
	remaining := req.max
	for i := range n {
		if remaining <= 0 {
			break
		}
		qs := c.state(queues[(rot+i)%n], v)
		qs.refresh(now, c.cfg.dlAt)
		if p.owned && !qs.fifoOwns(req.attempt) {
			continue
		}
		qp := c.planQueue(now, req, v, qs, remaining)
		remaining -= len(qp.again) + qp.n
		if len(qp.again) > 0 || qp.n > 0 {
			p.queues = append(p.queues, qp)
		}
	}
	return p
}

// planQueue plans one queue with room for remaining messages.
func (c *core) planQueue(now int64, req popReq, v view, qs *queueState, remaining int) queuePlan {
	qp := queuePlan{qs: qs}
	n := 0
	if req.fifo {
		var mode fifoMode
		mode, qp.again = qs.fifoDecide(now, req.attempt, remaining, nil)
		if mode == fifoNew {
			n = max(remaining-qs.pending(), 0)
		}
	} else {
		qp.again = qs.revivable(remaining, nil)
		n = remaining - len(qp.again)
	}
	if n > 0 {
		if min := v.MinOffset(qs.queue); min > qs.next {
			c.log.Warn("pop: log no longer holds the next offset (retention), skipping ahead", "group", c.group, "topic", c.topic,
				"queue", qs.queue, "offset", qs.next, "min", min)
			qs.skipTo(min)
		}
		avail := max(v.MaxOffset(qs.queue)-qs.next, 0)
		n = int(min(int64(n), avail))
		if !req.filter.All() && n > 0 {
			n = int(min(int64(MaxBatch), avail)) // read ahead: some of it may be filtered out
		}
	}
	qp.from, qp.n = qs.next, n
	return qp
}

// planDeadLetters parks every entry of the covered queues that reached the
// dead-letter threshold and plans their reads; nil if there is none.
func (c *core) planDeadLetters(now int64, req popReq, v view, queues []int) *popPlan {
	if c.cfg.dlAt == 0 {
		return nil
	}
	var p *popPlan
	for _, q := range queues {
		qs := c.queues[q]
		if qs == nil {
			continue
		}
		qs.refresh(now, c.cfg.dlAt)
		if len(qs.dlDue) == 0 || c.state(q, v) != qs {
			continue
		}
		qp := queuePlan{qs: qs}
		due := make([]int64, 0, len(qs.dlDue))
		for _, i := range qs.dlDue {
			due = append(due, qs.slab[i].off)
		}
		slices.Sort(due)
		for _, off := range due {
			e := qs.get(off)
			qs.park(e, now, c.cfg.dlRetry)
			qp.again = append(qp.again, e.off)
			qp.gens = append(qp.gens, e.gen)
		}
		if p == nil {
			p = &popPlan{now: now, req: req, deadLetters: true}
		}
		p.queues = append(p.queues, qp)
	}
	return p
}

// dlOutcome is what became of a message offered to DeadLetter.
type dlOutcome uint8

const (
	dlRetry   dlOutcome = iota // the call failed (or the read did): offer it again later
	dlDone                     // dead-lettered
	dlGone                     // gone from the log: nothing to dead-letter
	dlDropped                  // refused for good: settled without a dead letter
)

// settleDeadLetters settles the offered entries whose DeadLetter call
// is over (ok[i][j] for p.queues[i].again[j] is not dlRetry) and are still
// parked under the same generation.
func (c *core) settleDeadLetters(p *popPlan, ok [][]dlOutcome) {
	for i := range p.queues {
		qp := &p.queues[i]
		if c.queues[qp.qs.queue] != qp.qs {
			continue
		}
		for j, off := range qp.again {
			e := qp.qs.get(off)
			if ok[i][j] == dlRetry || e == nil || e.gen != qp.gens[j] || e.where == detached {
				continue
			}
			if ok[i][j] != dlDropped {
				c.st.deadLettered.Add(1)
				c.log.Info("pop: message dead-lettered", "group", c.group, "topic", c.topic, "queue", qp.qs.queue,
					"offset", off, "attempts", e.attempts)
			}
			qp.qs.settle(e)
		}
	}
}

// settleGone settles the planned entries whose messages the read found
// gone from the log (retention removed them before they were acked): they
// cannot be delivered again. It returns how many.
func (c *core) settleGone(p *popPlan) int {
	n := 0
	for i := range p.queues {
		qp := &p.queues[i]
		if c.queues[qp.qs.queue] != qp.qs {
			continue
		}
		for j, off := range qp.again {
			if j >= len(qp.read) || !qp.read[j] || qp.got[j] != nil {
				continue
			}
			if e := qp.qs.get(off); e != nil && e.where != detached && (qp.gens == nil || e.gen == qp.gens[j]) {
				c.log.Warn("pop: in-flight message gone from the log before it was acked, settled", "group", c.group, "topic", c.topic,
					"queue", qp.qs.queue, "offset", off, "attempts", e.attempts)
				qp.qs.settle(e)
				n++
			}
		}
	}
	return n
}

// apply carries out the plan at the same now with the messages read: it
// decides again (acks and changes since plan only take entries away) and
// delivers only what was read. It returns the picks and how many messages
// the filter settled.
func (c *core) apply(p *popPlan) ([]pick, int, error) {
	req := p.req
	out := make([]pick, 0, req.max)
	skipped := 0
	var firstErr error
	for i := range p.queues {
		qp := &p.queues[i]
		qs := qp.qs
		if len(out) >= req.max {
			break
		}
		if c.queues[qs.queue] != qs {
			continue
		}
		if qp.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("pop %s@%s queue %d read at %d: %w", c.group, c.topic, qs.queue, qp.from, qp.err)
		}
		fresh := qp.fresh
		if qs.next != qp.from {
			fresh = nil
		}
		var sk int
		if req.fifo {
			if p.owned && !qs.fifoOwns(req.attempt) {
				continue
			}
			var blocked bool
			out, blocked, sk = qs.fifoApply(p.now, req.attempt, req.inv, req.max-len(out), qp.lookup, fresh, req.filter, c.newBatchID, out)
			if blocked {
				c.log.Debug("pop: FIFO queue blocked by another attempt's batch", "group", c.group, "topic", c.topic,
					"queue", qs.queue, "attempt", req.attempt, "batch_attempt", qs.batch.attempt)
			}
		} else {
			out, sk = qs.reviveApply(p.now, req.inv, req.max-len(out), qp, req.filter, out)
			var sk2 int
			out, sk2 = qs.popFresh(fresh, req.filter, p.now, req.inv, req.max-len(out), 0, out)
			sk += sk2
		}
		skipped += sk
	}
	if len(out) == 0 && firstErr != nil {
		return nil, skipped, firstErr
	}
	return out, skipped, nil
}

// reviveApply delivers again the planned entries that are still visible.
func (q *queueState) reviveApply(now int64, inv time.Duration, max int, qp *queuePlan, f Filter, out []pick) ([]pick, int) {
	start, skipped := len(out), 0
	for _, off := range qp.again {
		if len(out)-start >= max {
			break
		}
		e := q.get(off)
		if e == nil || e.where != inVisible || e.visibleAt > now {
			continue
		}
		m, ok := qp.lookup(off)
		if !ok {
			continue
		}
		if m == nil || !f.Match(m.Tags) { // gone from the log, or the filter changed
			q.settle(e)
			skipped++
			continue
		}
		e.batch = 0
		out = q.deliver(e, now, inv, true, m, out)
	}
	return out, skipped
}

// rotation returns where a pop over n queues starts (AllQueues: a
// different queue on every pop, so that no queue starves).
func (c *core) rotation(n int) int {
	if n <= 1 {
		return 0
	}
	r := c.rr % n
	c.rr++
	return r
}

func (c *core) newBatchID() uint64 {
	c.batchSeq++
	return c.batchSeq
}

// resolve finds the live entry a handle refers to, given the queue's
// current Offsets epoch. Every failure wraps ErrStaleHandle.
func (c *core) resolve(h handle, epoch uint64) (*queueState, *entry, error) {
	qs := c.queues[h.queue]
	if qs == nil || qs.inc != h.inc {
		return nil, nil, fmt.Errorf("handle of %s@%s queue %d offset %d: queue state rebuilt since: %w", h.group, h.topic, h.queue, h.offset, ErrStaleHandle)
	}
	if epoch != qs.epoch {
		return nil, nil, fmt.Errorf("handle of %s@%s queue %d offset %d: popped before an offset reset (epoch %d, now %d): %w",
			h.group, h.topic, h.queue, h.offset, qs.epoch, epoch, ErrStaleHandle)
	}
	e := qs.get(h.offset)
	if e == nil || e.gen != h.gen || e.where == detached {
		return nil, nil, fmt.Errorf("handle of %s@%s queue %d offset %d: delivery superseded or acked: %w", h.group, h.topic, h.queue, h.offset, ErrStaleHandle)
	}
	return qs, e, nil
}

// due reports whether an invisible time or FIFO block ended by now in any
// queue (waiters should look again).
func (c *core) due(now int64) bool {
	for _, qs := range c.queues {
		if qs.due(now) {
			return true
		}
	}
	return false
}
