package replica

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// raftOffsets is pop's Offsets on the leader. Epochs and committed offsets
// are read from the replicated state; commits are collected and proposed
// as one raft entry every Config.CommitEvery (offsets move on every ack, a
// raft round trip per ack would cap consumption at the commit latency).
//
// The bound this buys: after a leader dies, a new leader resumes from the
// last committed entry, so the acks of at most the last CommitEvery (plus
// one entry in flight) are delivered again. Nothing acked before that
// comes back. Unacked messages come back anyway (at-least-once).
type raftOffsets struct {
	n *Node

	mu      sync.Mutex
	pending map[offsetKey]commitItem // acked, not yet proposed
	flushMu sync.Mutex               // one flush at a time, in order

	stop chan struct{}
	wg   sync.WaitGroup
}

func newRaftOffsets(n *Node) *raftOffsets {
	o := &raftOffsets{n: n, pending: map[offsetKey]commitItem{}, stop: make(chan struct{})}
	o.wg.Add(1)
	go o.loop(n.cfg.CommitEvery)
	return o
}

// Committed implements pop.Offsets: a pending commit of this term wins over
// the replicated one (it is newer).
func (o *raftOffsets) Committed(group, topic string, queueID int) (int64, bool) {
	k := offsetKey{group, topic, queueID}
	o.mu.Lock()
	c, ok := o.pending[k]
	o.mu.Unlock()
	if ok {
		return c.Offset, true
	}
	s := o.n.fsm.committed(k)
	return s.offset, s.committed
}

// Epoch implements pop.Offsets.
func (o *raftOffsets) Epoch(group, topic string, queueID int) uint64 {
	return o.n.fsm.committed(offsetKey{group, topic, queueID}).epoch
}

// CommitFenced implements pop.Offsets: refused at once under a stale epoch,
// otherwise queued for the next commit entry (which the FSM fences again).
func (o *raftOffsets) CommitFenced(group, topic string, queueID int, offset int64, epoch uint64) error {
	if err := offsetRule(commitItem{Group: group, Topic: topic, Queue: queueID, Offset: offset}); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	k := offsetKey{group, topic, queueID}
	if cur := o.n.fsm.committed(k).epoch; cur != epoch {
		return fmt.Errorf("commit %s@%s/%d offset %d epoch %d (current %d): %w", group, topic, queueID, offset, epoch, cur, ErrStaleEpoch)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if c, ok := o.pending[k]; ok && c.Epoch == epoch && c.Offset > offset {
		return nil
	}
	o.pending[k] = commitItem{Group: group, Topic: topic, Queue: queueID, Offset: offset, Epoch: epoch}
	return nil
}

func (o *raftOffsets) loop(every time.Duration) {
	defer o.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-t.C:
			if err := o.flush(); err != nil {
				o.n.log.Warn("cluster: offsets not committed", "err", err)
			}
		}
	}
}

// flush proposes every pending commit as one entry. On failure the commits
// go back to pending unless a newer one arrived meanwhile.
func (o *raftOffsets) flush() error {
	o.flushMu.Lock()
	defer o.flushMu.Unlock()
	o.mu.Lock()
	batch := make([]commitItem, 0, len(o.pending))
	for _, c := range o.pending {
		batch = append(batch, c)
	}
	clear(o.pending)
	o.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	sort.Slice(batch, func(i, j int) bool { // same bytes for the same commits
		a, b := batch[i], batch[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Queue < b.Queue
	})
	_, err := o.n.apply(&entry{Kind: kindCommit, Commits: batch})
	if err != nil && !errors.Is(err, ErrStaleEpoch) && !errors.Is(err, ErrRejected) {
		// Not applied (not committed, not the leader, closed): retried.
		// Applied with some commits refused (a stale epoch: the offset was
		// reset meanwhile) is final.
		o.mu.Lock()
		for _, c := range batch {
			k := offsetKey{c.Group, c.Topic, c.Queue}
			if _, newer := o.pending[k]; !newer {
				o.pending[k] = c
			}
		}
		o.mu.Unlock()
	}
	return err
}

// close stops the flusher; with final it flushes what is pending first
// (graceful shutdown of a leader).
func (o *raftOffsets) close(final bool) {
	close(o.stop)
	o.wg.Wait()
	if final {
		if err := o.flush(); err != nil {
			o.n.log.Warn("cluster: final offset commit failed", "err", err)
		}
	}
}
