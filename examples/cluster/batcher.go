package main

import (
	"sync"

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
}

const (
	maxInflight   = 4
	maxEntryBytes = 4 << 20
	maxEntryMsgs  = 4096
)

type pending struct { // one producer's batch waiting for its entry
	msgs []*store.Message
	out  []*store.Message
	err  error
	done chan struct{}
}

func (b *batcher) produce(msgs []*store.Message) ([]*store.Message, error) {
	r := &pending{msgs: msgs, done: make(chan struct{})}
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
	res, err := b.n.apply(e)
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
