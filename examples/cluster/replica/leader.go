package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// DeadLetterPrefix is brokercore's: dead letters of group G go to "%DLQ%G".
const DeadLetterPrefix = brokercore.DeadLetterPrefix

// leaderTerm holds the services that run only while this node leads. They
// are built fresh for every term, over the replicated state as the new
// leader applied it (after a barrier), and torn down when the term ends:
// pop's in-memory view and the scheduler's generation never outlive the
// leadership they were built under.
//
// This is composed by hand rather than with brokercore.Open: Open wires the
// single-node way (offsets in a local file, the scheduler appending to the
// store directly, everything living as long as the process); here the
// scheduler's Log and pop's Offsets are raft-backed and their lifetime is
// a term.
type leaderTerm struct {
	raftTerm uint64 // the raft term these services were built in
	pop      *pop.Service
	offsets  *raftOffsets
	sched    *schedule.Scheduler
	slog     *schedLog
	txns     *txn.Manager // nil without Config.Transactions (txn.go)
}

// beginTerm starts the leader services for raftTerm (read before the
// barrier, so a later term is noticed by reconcile and rebuilt).
func (n *Node) beginTerm(raftTerm uint64) error {
	offs := newRaftOffsets(n)
	// pop subscribes to the store's arrivals itself (and answers ErrClosed
	// once the store closes).
	p := pop.New(n.st, pop.Options{
		Offsets:    offs,
		Now:        n.cfg.Now,
		Logger:     n.log,
		DeadLetter: n.deadLetter,
	})
	sl := newSchedLog(n)
	sched, err := n.newScheduler(sl)
	if err == nil {
		err = sched.Start()
	}
	if err != nil {
		_ = p.Close()
		offs.close(false)
		return fmt.Errorf("scheduler: %w", err)
	}
	tm, err := n.newTransactions(raftTerm)
	if err != nil {
		_ = sched.Close()
		_ = p.Close()
		offs.close(false)
		return fmt.Errorf("transactions: %w", err)
	}
	n.termMu.Lock()
	n.term = &leaderTerm{raftTerm: raftTerm, pop: p, offsets: offs, sched: sched, slog: sl, txns: tm}
	n.termMu.Unlock()
	n.log.Info("cluster: leading", "term", n.raft.CurrentTerm(), "applied_index", n.raft.AppliedIndex())
	return nil
}

// endTerm stops the leader services: the scheduler first (Stop waits for a
// delivery in flight; its raft entry either committed, and the progress
// with it, or it did not and the next leader delivers it), then pop.
func (n *Node) endTerm(reason string) {
	n.termMu.Lock()
	t := n.term
	n.term = nil
	n.termMu.Unlock()
	if t == nil {
		return
	}
	if t.txns != nil {
		// First: its appends in flight end (raft answers them), its
		// driver sends no check from now on.
		if err := t.txns.Close(); err != nil {
			n.log.Warn("cluster: transactions stop", "err", err)
		}
	}
	if err := t.sched.Close(); err != nil {
		n.log.Warn("cluster: scheduler stop", "err", err)
	}
	_ = t.pop.Close()
	t.offsets.close(reason == "close")
	n.log.Info("cluster: leader services stopped", "reason", reason)
}

// services returns the current term's services or ErrNotLeader.
func (n *Node) services() (*leaderTerm, error) {
	n.termMu.RLock()
	defer n.termMu.RUnlock()
	if n.term == nil {
		return nil, n.notLeader()
	}
	return n.term, nil
}

// newScheduler builds the term's scheduler over the raft-backed log. No
// ProgressPath: progress lives in the replicated state (ProgressLog), and
// the timer index is rebuilt from the log by New, as a new leader must.
func (n *Node) newScheduler(sl *schedLog) (*schedule.Scheduler, error) {
	return schedule.New(sl, schedule.Options{
		Levels: n.cfg.Levels,
		Now:    n.cfg.Now,
		Logger: n.log,
		Tick:   n.cfg.ScheduleTick,
	})
}

// deadLetter is pop's DeadLetter: the message goes through raft to the
// group's dead-letter topic, queue Config.DeadLetterQueue.
func (n *Node) deadLetter(group string, m *store.Message) error {
	d := &store.Message{
		Topic: DeadLetterPrefix + group, QueueID: n.cfg.DeadLetterQueue, Tags: m.Tags, Keys: m.Keys, Body: m.Body,
		Properties: m.Properties, BornAt: m.BornAt, ReconsumeTimes: m.ReconsumeTimes,
	}
	_, err := n.produce([]*store.Message{d})
	return err
}

// Pop pops on the leader (pop.Service.Pop).
func (n *Node) Pop(ctx context.Context, req pop.Request) (pop.Result, error) {
	if err := offsetRule(commitItem{Group: req.Group, Topic: req.Topic}); err != nil {
		return pop.Result{}, fmt.Errorf("pop: %w", err)
	}
	t, err := n.services()
	if err != nil {
		return pop.Result{}, err
	}
	res, err := t.pop.Pop(ctx, req)
	if errors.Is(err, pop.ErrClosed) {
		return res, n.notLeader()
	}
	return res, err
}

// Ack acks on the leader; the offset it advances is committed through raft
// within Config.CommitEvery.
func (n *Node) Ack(handle string) error {
	t, err := n.services()
	if err != nil {
		return err
	}
	return t.pop.Ack(handle)
}

// ChangeInvisible changes a popped message's invisible time on the leader.
func (n *Node) ChangeInvisible(handle string, d time.Duration) (string, error) {
	t, err := n.services()
	if err != nil {
		return "", err
	}
	return t.pop.ChangeInvisible(handle, d)
}

// ProduceDelayed appends m to wait for delay level through raft; the
// leader's scheduler delivers it to its topic when due.
func (n *Node) ProduceDelayed(m *store.Message, level int) (*store.Message, error) {
	t, err := n.services()
	if err != nil {
		return nil, err
	}
	if err := brokercore.CheckProduce(m, store.DefaultMaxMessageSize); err != nil {
		return nil, fmt.Errorf("produce: %w: %w", ErrInvalid, err)
	}
	d, err := t.sched.Delay(m, level)
	if err != nil {
		return nil, fmt.Errorf("produce delayed: %v: %w", err, ErrInvalid)
	}
	out, err := n.produce([]*store.Message{d})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// ProduceAt appends m as a timer through raft; the leader's scheduler
// delivers it to its topic at t (never before).
func (n *Node) ProduceAt(m *store.Message, at time.Time) (*store.Message, error) {
	t, err := n.services()
	if err != nil {
		return nil, err
	}
	if err := brokercore.CheckProduce(m, store.DefaultMaxMessageSize); err != nil {
		return nil, fmt.Errorf("produce: %w: %w", ErrInvalid, err)
	}
	d, err := t.sched.At(m, at)
	if err != nil {
		return nil, fmt.Errorf("produce at: %v: %w", err, ErrInvalid)
	}
	out, err := n.produce([]*store.Message{d})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// CancelTimer cancels a pending timer by its UNIQ_KEY; the cancel is part
// of the replicated scheduler progress.
func (n *Node) CancelTimer(uniqKey string) error {
	t, err := n.services()
	if err != nil {
		return err
	}
	return t.sched.Cancel(uniqKey)
}

// CancelTimerAt cancels the pending timer of uniqKey due at at
// (schedule.Scheduler.CancelAt: RocketMQ's recall, which names the time).
func (n *Node) CancelTimerAt(uniqKey string, at time.Time) error {
	t, err := n.services()
	if err != nil {
		return err
	}
	return t.sched.CancelAt(uniqKey, at)
}

// FlushOffsets commits the acknowledged offsets now (a graceful handover).
func (n *Node) FlushOffsets() error {
	t, err := n.services()
	if err != nil {
		return err
	}
	return t.offsets.flush()
}

// ResetOffset moves a group's committed offset through raft and bumps its
// epoch; pop sees the reset on its next pop of the queue.
func (n *Node) ResetOffset(group, topic string, queueID int, offset int64) error {
	if err := offsetRule(commitItem{Group: group, Topic: topic, Queue: queueID, Offset: offset}); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	_, err := n.apply(&entry{Kind: kindReset, Commits: []commitItem{{Group: group, Topic: topic, Queue: queueID, Offset: offset}}})
	return err
}

// ResetOffsets is ResetOffset of several queues of a topic in one raft
// entry: every queue moves, or (an error) none does.
func (n *Node) ResetOffsets(group, topic string, offsets map[int]int64) error {
	items := make([]commitItem, 0, len(offsets))
	for q, off := range offsets {
		c := commitItem{Group: group, Topic: topic, Queue: q, Offset: off}
		if err := offsetRule(c); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
		items = append(items, c)
	}
	if len(items) == 0 {
		return nil
	}
	slices.SortFunc(items, func(a, b commitItem) int { return a.Queue - b.Queue }) // same bytes for the same reset
	_, err := n.apply(&entry{Kind: kindReset, Commits: items})
	return err
}

// Committed is the replicated committed offset of a group's queue (any node).
func (n *Node) Committed(group, topic string, queueID int) (int64, bool) {
	s := n.fsm.committed(offsetKey{group, topic, queueID})
	return s.offset, s.committed
}
