package pop

import (
	"time"

	"github.com/brokercore/brokercore/store"
)

// fifo.go holds the FIFO decisions of the deterministic core. A FIFO queue
// has at most one in-flight batch: the lowest unsettled offsets, delivered
// together under one attempt id. While any member is invisible the queue is
// blocked for every other attempt id; the batch's own attempt id gets the
// same members again with fresh handles and no extra attempt.

// fifoMode is what a FIFO pop does with a queue.
type fifoMode uint8

const (
	fifoBlocked fifoMode = iota // another attempt's batch (or an earlier in-flight message) blocks it
	fifoRepop                   // the batch's own attempt id: the same members again, uncounted
	fifoExpired                 // the batch's invisible time ended: its members again, counted
	fifoNew                     // no batch: a new one from the lowest unsettled offsets
)

// fifoMembers returns the batch's unsettled members, in order, and drops
// the batch once it has none.
func (q *queueState) fifoMembers() []int64 {
	if q.batch.id == 0 {
		return nil
	}
	m := q.batch.members[:0]
	for _, off := range q.batch.members {
		if e := q.get(off); e != nil && e.batch == q.batch.id && e.where != detached {
			m = append(m, off)
		}
	}
	q.batch.members = m
	if len(m) == 0 {
		q.batch = fifoBatch{}
	}
	return m
}

// fifoOwns reports whether attempt is the attempt id of a batch that still
// has members: a re-pop with it gets those members back.
func (q *queueState) fifoOwns(attempt string) bool {
	return attempt != "" && q.batch.id != 0 && q.batch.attempt == attempt && len(q.fifoMembers()) > 0
}

// fifoDecide decides a FIFO pop of this queue at now (after refresh): the
// mode and the offsets of entries it delivers again.
func (q *queueState) fifoDecide(now int64, attempt string, max int, buf []int64) (fifoMode, []int64) {
	if members := q.fifoMembers(); len(members) > 0 {
		if attempt != "" && attempt == q.batch.attempt {
			return fifoRepop, append(buf, members[:min(max, len(members))]...)
		}
		for _, off := range members {
			if q.get(off).visibleAt > now {
				return fifoBlocked, buf
			}
		}
		return fifoExpired, append(buf, members[:min(max, len(members))]...)
	}
	// No batch: FIFO order forbids passing an invisible entry (a non-FIFO
	// delivery or a parked dead letter).
	if q.nHidden > 0 || len(q.dlDue) > 0 {
		return fifoBlocked, buf
	}
	return fifoNew, q.revivable(max, buf)
}

// fifoApply carries out a FIFO pop of this queue at now with the messages
// the driver read (got looks a re-delivered offset up; fresh were read at
// next). It returns the picks, whether the queue was blocked, and how many
// messages the filter settled.
func (q *queueState) fifoApply(now int64, attempt string, inv time.Duration, max int, got func(int64) (*store.Message, bool), fresh []*store.Message, f Filter, newBatch func() uint64, out []pick) (_ []pick, blocked bool, skipped int) {
	var buf [MaxBatch]int64
	mode, offs := q.fifoDecide(now, attempt, max, buf[:0])
	switch mode {
	case fifoBlocked:
		return out, true, 0
	case fifoRepop, fifoExpired:
		out, skipped = q.fifoAgain(now, attempt, inv, mode == fifoExpired, offs, got, out)
		return out, false, skipped
	}
	out, skipped = q.fifoNewBatch(now, attempt, inv, max, offs, got, fresh, f, newBatch(), out)
	return out, false, skipped
}

// fifoAgain delivers the batch's members offs again: counted, under the
// new attempt id, when the batch expired (members beyond offs leave it);
// uncounted for the batch's own attempt id.
func (q *queueState) fifoAgain(now int64, attempt string, inv time.Duration, expired bool, offs []int64, got func(int64) (*store.Message, bool), out []pick) ([]pick, int) {
	if expired {
		q.batch.attempt = attempt
		for _, off := range q.batch.members[len(offs):] {
			if e := q.get(off); e != nil {
				e.batch = 0
			}
		}
		q.batch.members = q.batch.members[:len(offs)]
	}
	gone := 0
	for _, off := range offs {
		m, ok := got(off)
		if !ok {
			break // not read: deliver the prefix, keep the order
		}
		if m == nil { // gone from the log (retention)
			q.settle(q.get(off))
			gone++
			continue
		}
		out = q.deliver(q.get(off), now, inv, expired, m, out)
	}
	return out, gone
}

// fifoNewBatch forms batch id from the lowest unsettled offsets: the
// visible entries offs, then fresh messages, up to max.
func (q *queueState) fifoNewBatch(now int64, attempt string, inv time.Duration, max int, offs []int64, got func(int64) (*store.Message, bool), fresh []*store.Message, f Filter, id uint64, out []pick) ([]pick, int) {
	start, skipped := len(out), 0
	members := make([]int64, 0, max)
	complete := true
	for _, off := range offs {
		m, ok := got(off)
		if !ok {
			complete = false // not read: no fresh message may pass it
			break
		}
		e := q.get(off)
		if m == nil || !f.Match(m.Tags) { // gone from the log, or the filter changed
			q.settle(e)
			skipped++
			continue
		}
		e.batch = id
		out = q.deliver(e, now, inv, true, m, out)
		members = append(members, off)
	}
	if complete {
		n := len(out)
		var sk int
		out, sk = q.popFresh(fresh, f, now, inv, max-(len(out)-start), id, out)
		skipped += sk
		for _, p := range out[n:] {
			members = append(members, p.off)
		}
	}
	if len(out) > start {
		q.fifoUsed = true
		q.batch = fifoBatch{id: id, attempt: attempt, members: members}
	}
	return out, skipped
}
