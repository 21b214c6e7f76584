package pop

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// longpoll.go is the thin driver around the core: waiters, wake-ups and the
// background loop. Wake-up sources, all of which broadcast to the
// group@topic's waiters:
//   - arrival: Arrived (wire store.Options.OnAppend to it);
//   - an ack that unblocks a FIFO queue;
//   - the group@topic lock becoming free (for the pops that found it held;
//     they wait on their own channel, so a release does not stir the pops
//     that wait for data);
//   - an invisible time (or FIFO block) ending: the loop checks every
//     Options.Tick with Options.Now;
//   - Close (waiters select on the service's done channel).
// A waiter only wakes up and pops again; every decision is the core's.

// broadcast wakes every waiter of gt that waits for a change of the queues
// (arrival, unblocking ack, expiry). It takes no lock: whoever swaps the
// channel out closes it. A caller bumps gt.events first, so a waiter that
// installed its channel after the swap sees the change (waitForEvent).
func broadcast(gt *groupTopic) {
	if ch := gt.notify.Swap(nil); ch != nil {
		close(*ch)
	}
}

// broadcastLockFreeLocked wakes the pops that found the group@topic lock
// held. Called with gt.mu held when the lock becomes free.
func broadcastLockFreeLocked(gt *groupTopic) {
	if gt.lockFree != nil {
		close(gt.lockFree)
		gt.lockFree = nil
	}
}

// notifyCh is the channel the next broadcast closes.
func notifyCh(gt *groupTopic) chan struct{} {
	for {
		if ch := gt.notify.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		if gt.notify.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

func lockFreeChLocked(gt *groupTopic) chan struct{} {
	if gt.lockFree == nil {
		gt.lockFree = make(chan struct{})
	}
	return gt.lockFree
}

// enterWaitLocked takes a waiter slot for a pop that is about to wait for
// the first time; the slot is kept until the pop returns, so a waiter
// that wakes and looks again is never turned away by the caps.
func (s *Service) enterWaitLocked(gt *groupTopic, req Request, counted *bool) error {
	if *counted {
		return nil
	}
	if gt.waiters.Load() >= int64(s.opts.MaxWaitersPerKey) {
		s.st.tooManyWaiters.Add(1)
		s.log.Debug("pop: rejected, too many waiters for the group@topic", "group", req.Group, "topic", req.Topic,
			"client", req.ClientID, "limit", s.opts.MaxWaitersPerKey)
		return fmt.Errorf("pop %s@%s: %d waiters (limit per group@topic): %w", req.Group, req.Topic, s.opts.MaxWaitersPerKey, ErrTooManyWaiters)
	}
	if s.waiters.Add(1) > int64(s.opts.MaxWaiters) {
		s.waiters.Add(-1)
		s.st.tooManyWaiters.Add(1)
		s.log.Debug("pop: rejected, too many waiters in total", "group", req.Group, "topic", req.Topic,
			"client", req.ClientID, "limit", s.opts.MaxWaiters)
		return fmt.Errorf("pop %s@%s: %d waiters (total limit): %w", req.Group, req.Topic, s.opts.MaxWaiters, ErrTooManyWaiters)
	}
	gt.waiters.Add(1) // before the caller re-reads gt.events: see Arrived
	*counted = true
	return nil
}

func (s *Service) uncountWaiter(gt *groupTopic) {
	gt.waiters.Add(-1)
	s.waiters.Add(-1)
}

// wait sleeps until ch is closed, the poll deadline, ctx or Close.
func (s *Service) wait(ctx context.Context, ch chan struct{}, until time.Time) {
	d := time.Until(until)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	case <-s.done:
	case <-s.sourceDone():
	}
}

// Arrived tells the service that (topic, queueID) has new messages; it
// wakes the long-polling pops of every group of the topic. New subscribes
// it to a Source that can Subscribe (as *store.Store); a host composing
// another Source calls it itself. It takes no lock a pop holds, so it
// never waits on a pop in progress, whatever that pop's Offsets or Source
// wait for (the appender calling it, say, under a lock of its own).
func (s *Service) Arrived(topic string, queueID int) {
	s.topicsMu.RLock()
	gts := s.topics[topic]
	s.topicsMu.RUnlock()
	for _, gt := range gts {
		if l := gt.list.Load(); l != nil {
			if _, ok := slices.BinarySearch(*l, queueID); !ok {
				gt.list.Store(nil) // a new queue: AllQueues lists again
			}
		}
		gt.events.Add(1) // before reading waiters: see waitForEvent
		if gt.waiters.Load() > 0 {
			broadcast(gt)
		}
	}
}

func (s *Service) loop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.tick()
		}
	}
}

// tick wakes the waiters of every group@topic where an invisible time or a
// FIFO block ended by Options.Now, and applies the lock expiry backstop.
func (s *Service) tick() {
	now := s.nowNanos()
	s.gts.Range(func(_ gtKey, gt *groupTopic) bool {
		gt.mu.Lock()
		s.sweepLocked(gt, now)
		if gt.waiters.Load() > 0 && gt.core.due(now) {
			gt.events.Add(1)
			broadcast(gt)
		}
		gt.mu.Unlock()
		return true
	})
}
