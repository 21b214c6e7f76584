package main

import (
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
// messages. Up to maxInflight entries are proposed at a time (raft
// pipelines them); whoever finds a free slot proposes everything queued.
type batcher struct {
	n *Node

	mu      sync.Mutex
	queue   []*pending
	bytes   int
	running int

	stats batchStats
}

// batchStats splits a produce's latency (benchmarks report it): the time
// producers waited for their entry to be proposed, and the time raft took
// from proposal to the entry applied here.
type batchStats struct {
	Produces    atomic.Uint64
	QueuedNanos atomic.Uint64 // summed over produces
	Entries     atomic.Uint64
	RaftNanos   atomic.Uint64 // summed over entries
}

const (
	maxInflight   = 4
	maxEntryBytes = 4 << 20
	maxEntryMsgs  = 4096
)

type pending struct { // one producer's batch waiting for its entry
	at   time.Time
	msgs []*store.Message
	out  []*store.Message
	err  error
	done chan struct{}
}

func (b *batcher) produce(msgs []*store.Message) ([]*store.Message, error) {
	r := &pending{at: time.Now(), msgs: msgs, done: make(chan struct{})}
	size := 0
	for _, m := range msgs {
		size += msgSize(m)
	}
	b.mu.Lock()
	b.queue = append(b.queue, r)
	b.bytes += size
	lead := b.running < maxInflight
	if lead {
		b.running++
	}
	b.mu.Unlock()
	if lead {
		b.propose()
	}
	<-r.done
	return r.out, r.err
}

// propose proposes what is queued, again and again while more arrived,
// then gives its slot back.
func (b *batcher) propose() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running--
			b.mu.Unlock()
			return
		}
		k, size, count := 0, 0, 0
		for k < len(b.queue) {
			s := 0
			for _, m := range b.queue[k].msgs {
				s += msgSize(m)
			}
			if k > 0 && (size+s > maxEntryBytes || count+len(b.queue[k].msgs) > maxEntryMsgs) {
				break
			}
			size += s
			count += len(b.queue[k].msgs)
			k++
		}
		group := append([]*pending(nil), b.queue[:k]...)
		b.queue = append(b.queue[:0], b.queue[k:]...)
		b.bytes -= size
		b.mu.Unlock()
		b.send(group)
	}
}

func (b *batcher) send(group []*pending) {
	e := &entry{Kind: kindProduce}
	if len(group) > 1 {
		e.Split = make([]int, len(group))
	}
	for i, r := range group {
		e.Msgs = append(e.Msgs, r.msgs...)
		if e.Split != nil {
			e.Split[i] = len(r.msgs)
		}
	}
	t0 := time.Now()
	for _, r := range group {
		b.stats.QueuedNanos.Add(uint64(t0.Sub(r.at)))
	}
	b.stats.Produces.Add(uint64(len(group)))
	res, err := b.n.apply(e)
	b.stats.RaftNanos.Add(uint64(time.Since(t0)))
	b.stats.Entries.Add(1)
	off := 0
	for _, r := range group {
		if err == nil {
			r.out = res.msgs[off : off+len(r.msgs)]
			off += len(r.msgs)
		}
		r.err = err
		close(r.done)
	}
}
