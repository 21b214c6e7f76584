package replica

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/store"
)

// batcher joins concurrent produces into one raft entry, the way the
// store's SyncGroup joins appends into one fsync: a raft entry costs a
// round trip to the followers and an fsync of the raft log on a majority,
// whatever its size. Each producer's batch stays atomic (the FSM appends
// the whole entry as one store batch) and is answered with its own
// messages.
//
// One entry is in flight at a time (more while the queue holds more than
// an entry's limits). Measured on loopback, entries in flight together
// only split the same round trip among them: their producers come back at
// once, and the cohorts then collide at the serial stages (a follower's
// one AppendEntries at a time, the FSM). So the batcher makes each round
// as full as it can: whoever sees an entry answered first lets the
// producers it answered run (a yield, repeated while the queue grows, no
// timed wait), then proposes everything queued and leaves the wait for
// that entry to one of its producers, so no producer waits for an entry
// other than its own.
type batcher struct {
	n *Node
	// fenced, when set, makes the entries kindFenced of term (one leader
	// term's transaction records, txn.go) instead of kindProduce.
	fenced bool
	term   uint64

	mu      sync.Mutex
	queue   []*pending
	queued  int // bytes in queue
	qmsgs   int // messages in queue
	running int

	stats batchStats
}

// batchStats splits a produce's latency (benchmarks report it): the time
// producers waited for their entry to be proposed, the time raft took
// from proposal to the entry applied here, and the time from the answer to
// the producer running again.
type batchStats struct {
	Produces    atomic.Uint64
	QueuedNanos atomic.Uint64 // summed over produces
	Entries     atomic.Uint64
	RaftNanos   atomic.Uint64 // summed over entries
	WakeNanos   atomic.Uint64 // summed over produces
}

// The batcher's policy (variables so that BenchmarkProducePolicy can
// compare others).
var (
	maxInflight     = 1 // entries in flight
	maxInflightFull = 4 // entries in flight while the queue fills more than one entry
	maxYields       = 8 // yields before a cut while the queue grows
)

// maxProposeBytes bounds one producer's batch as an entry (msgSize): far
// below what raft's log holds in one entry (maxFrameBody), so no entry
// is ever written that the log cannot read back (a variable for tests).
var maxProposeBytes = 64 << 20

const (
	maxEntryBytes = 4 << 20
	maxEntryMsgs  = 4096
)

type pending struct { // one producer's batch waiting for its entry
	at       time.Time
	msgs     []*store.Message
	size     int
	out      []*store.Message
	err      error
	answered time.Time
	wait     *group        // set before a signal on done: wait for this entry and answer it
	done     chan struct{} // one signal per wait handed over, then one for the answer
}

// group is the producers of one entry.
type group struct {
	members []*pending
	p       proposal
	err     error // not proposed
}

func (b *batcher) produce(msgs []*store.Message) ([]*store.Message, error) {
	r := &pending{at: time.Now(), msgs: msgs, done: make(chan struct{}, 1)}
	for _, m := range msgs {
		r.size += msgSize(m)
	}
	b.mu.Lock()
	b.queue = append(b.queue, r)
	b.queued += r.size
	b.qmsgs += len(msgs)
	free := b.free()
	b.mu.Unlock()
	if free {
		b.join(0)
		b.mu.Lock()
		g := b.next()
		b.mu.Unlock()
		if g != nil {
			b.launch(g, r)
		}
	}
	for {
		<-r.done
		if g := r.wait; g != nil {
			r.wait = nil
			b.complete(g, r)
			continue
		}
		b.stats.WakeNanos.Add(uint64(time.Since(r.answered)))
		return r.out, r.err
	}
}

// free reports whether an entry may be proposed now (under mu).
func (b *batcher) free() bool {
	if len(b.queue) == 0 {
		return false
	}
	full := b.queued > maxEntryBytes || b.qmsgs > maxEntryMsgs
	return b.running < maxInflight || full && b.running < maxInflightFull
}

// join lets producers that are ready to run queue before an entry is cut:
// it yields (no timed wait) until more producers joined the queue, or the
// queue did not grow over two yields, at most maxYields times. Whoever
// answered an entry wants its producers back (they usually produce again
// at once).
func (b *batcher) join(more int) {
	b.mu.Lock()
	n := len(b.queue)
	b.mu.Unlock()
	want := n + more
	still := 0
	for range maxYields {
		if n >= want || still == 2 {
			return
		}
		runtime.Gosched()
		b.mu.Lock()
		m := len(b.queue)
		b.mu.Unlock()
		if m == n {
			still++
		} else {
			still = 0
		}
		n = m
	}
}

// next takes a free slot and what is queued (up to an entry's limits), nil
// when either is missing (under mu).
func (b *batcher) next() *group {
	if !b.free() {
		return nil
	}
	b.running++
	k, size, count := 0, 0, 0
	for k < len(b.queue) {
		q := b.queue[k]
		if k > 0 && (size+q.size > maxEntryBytes || count+len(q.msgs) > maxEntryMsgs) {
			break
		}
		size += q.size
		count += len(q.msgs)
		k++
	}
	g := &group{members: append([]*pending(nil), b.queue[:k]...)}
	b.queue = append(b.queue[:0], b.queue[k:]...)
	b.queued -= size
	b.qmsgs -= count
	return g
}

// launch proposes g, then waits for it when me is one of its producers,
// else hands the wait to its first producer.
func (b *batcher) launch(g *group, me *pending) {
	e := &entry{Kind: kindProduce}
	if b.fenced {
		e.Kind, e.Term = kindFenced, b.term
	}
	if len(g.members) > 1 {
		e.Split = make([]int, len(g.members))
	}
	for i, r := range g.members {
		e.Msgs = append(e.Msgs, r.msgs...)
		if e.Split != nil {
			e.Split[i] = len(r.msgs)
		}
	}
	t0 := time.Now()
	for _, r := range g.members {
		b.stats.QueuedNanos.Add(uint64(t0.Sub(r.at)))
	}
	b.stats.Produces.Add(uint64(len(g.members)))
	g.p, g.err = b.n.propose(e)
	if slices.Contains(g.members, me) {
		b.complete(g, me)
		return
	}
	w := g.members[0]
	w.wait = g
	w.done <- struct{}{}
}

// complete waits for g's entry, answers its producers, and proposes what
// queued meanwhile in the slot it frees.
func (b *batcher) complete(g *group, me *pending) {
	var res applyResult
	err := g.err
	if err == nil {
		res, err = b.n.await(g.p)
		b.stats.RaftNanos.Add(uint64(time.Since(g.p.at)))
		b.stats.Entries.Add(1)
	}
	off, now := 0, time.Now()
	for i, r := range g.members {
		r.err = err
		if err == nil {
			r.out = res.msgs[off : off+len(r.msgs)]
			off += len(r.msgs)
			if i < len(res.rejected) && res.rejected[i] != nil {
				r.out, r.err = nil, res.rejected[i]
			}
		}
		r.answered = now
		r.done <- struct{}{}
	}
	b.join(len(g.members) - 1)
	b.mu.Lock()
	b.running--
	next := b.next()
	b.mu.Unlock()
	if next != nil {
		b.launch(next, me)
	}
}
