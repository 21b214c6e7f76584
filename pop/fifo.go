package pop

import (
	"time"

	"github.com/brokercore/brokercore/store"
)

// fifo.go holds the FIFO decisions of the deterministic core. A FIFO queue
// has at most one in-flight batch: the lowest not-done offsets, delivered
// together under one attempt id. While any member is invisible the queue is
// blocked for every other attempt id; the batch's own attempt id gets the
// same members again with fresh handles and no extra attempt.

// fifoMembers returns the offsets of the batch's not-done members.
func (q *queueState) fifoMembers(buf []int64) []int64 {
	if q.batch.id == 0 {
		return buf
	}
	for off := max(q.batch.first, q.base); off <= q.batch.last && off < q.next(); off++ {
		if e := q.entry(off); !e.done && e.batch == q.batch.id {
			buf = append(buf, off)
		}
	}
	if len(buf) == 0 {
		q.batch = fifoBatch{}
	}
	return buf
}

// fifoLive reports whether the batch still blocks other attempt ids.
func (q *queueState) fifoLive(now int64) bool {
	var buf [32]int64
	for _, off := range q.fifoMembers(buf[:0]) {
		if q.entry(off).visibleAt > now {
			return true
		}
	}
	return false
}

// fifoOwns reports whether attempt is the attempt id of a batch that still
// has members: a re-pop with it gets those members back.
func (q *queueState) fifoOwns(attempt string) bool {
	if attempt == "" || q.batch.id == 0 || q.batch.attempt != attempt {
		return false
	}
	var buf [32]int64
	return len(q.fifoMembers(buf[:0])) > 0
}

// blockedByInvisible reports whether a not-done entry outside any batch is
// invisible (a non-FIFO delivery or a parked dead letter): FIFO order
// forbids passing it.
func (q *queueState) blockedByInvisible(now int64) bool {
	if q.pending == 0 {
		return false
	}
	if q.earliest > now {
		return true
	}
	for i := range q.entries {
		if e := &q.entries[i]; !e.done && e.visibleAt > now {
			return true
		}
	}
	return false
}

// fifoFreshWanted is how many new messages a FIFO pop would take from next().
func (q *queueState) fifoFreshWanted(now int64, attempt string, max int) int {
	if q.fifoOwns(attempt) || q.fifoLive(now) {
		return 0
	}
	var buf [32]int64
	if len(q.fifoMembers(buf[:0])) > 0 || q.blockedByInvisible(now) {
		return 0
	}
	n := max - q.pending
	if n < 0 {
		n = 0
	}
	return n
}

// popFIFO decides a FIFO pop of this queue at now. It returns the new picks
// and whether the queue was blocked by another attempt id's batch.
func (q *queueState) popFIFO(now int64, attempt string, inv time.Duration, max int, fresh []*store.Message, f tagFilter, newBatch func() uint64, out []pick) (_ []pick, blocked bool, skipped int) {
	var buf [32]int64
	members := q.fifoMembers(buf[:0])
	if len(members) > 0 {
		if attempt != "" && attempt == q.batch.attempt {
			// The same receive attempt again (its response was lost):
			// same members, fresh handles, no attempt counted.
			for i, off := range members {
				if i >= max {
					break
				}
				out = q.deliver(q.entry(off), off, now, inv, false, out)
			}
			return out, false, 0
		}
		if q.fifoLive(now) {
			return out, true, 0
		}
		// The batch's invisible time ended: deliver it again, counted,
		// now under this attempt id.
		q.batch.attempt = attempt
		for i, off := range members {
			e := q.entry(off)
			if i >= max {
				e.batch = 0
				continue
			}
			out = q.deliver(e, off, now, inv, true, out)
		}
		return out, false, 0
	}
	if q.blockedByInvisible(now) {
		return out, true, 0
	}
	id := newBatch()
	start := len(out)
	for i := range q.entries {
		if len(out)-start >= max {
			break
		}
		e := &q.entries[i]
		if e.done {
			continue
		}
		off := q.base + int64(i)
		e.batch = id
		out = q.deliver(e, off, now, inv, true, out)
	}
	out, skipped = q.popFresh(fresh, f, now, inv, max-(len(out)-start), id, out)
	if len(out) == start {
		return out, false, skipped
	}
	q.fifoUsed = true
	q.batch = fifoBatch{id: id, attempt: attempt, first: out[start].off, last: out[len(out)-1].off}
	return out, false, skipped
}
