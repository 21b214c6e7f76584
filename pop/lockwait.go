package pop

import (
	"fmt"
	"time"
)

// lockwait.go is the driver around the group@topic lock (grouplock.go):
// the channels FIFO retries sleep on, and the holder's ctx.Done that tells
// the lock when a hold is abandoned.

// holdLocked starts pc's hold of tok: the driver keeps the request's
// ctx.Done beside the lock, so that the sweep can tell the lock when the
// holder's caller has gone. Called with gt.mu held.
func (s *Service) holdLocked(pc *popCall, tok uint64) {
	pc.gt.holderDone, pc.gt.holderTok = pc.ctx.Done(), tok
}

// releaseHold ends pc's hold of tok and wakes whoever the lock went to.
func (s *Service) releaseHold(pc *popCall, tok uint64) {
	gt := pc.gt
	gt.mu.Lock()
	if gt.holderTok == tok {
		gt.holderDone, gt.holderTok = nil, 0
	}
	if _, free, to := gt.lock.release(tok, s.nowNanos()); free {
		broadcastLockFreeLocked(gt)
	} else {
		wakeLocked(gt, to)
	}
	gt.mu.Unlock()
}

// wakeLocked wakes the FIFO retry the lock was handed to (nil: none).
func wakeLocked(gt *groupTopic, to *lockWaiter) {
	if to == nil {
		return
	}
	if ch := gt.lockWake[to]; ch != nil {
		close(ch)
		delete(gt.lockWake, to)
	}
}

// sweepLocked applies the lock's expiry backstop.
func (s *Service) sweepLocked(gt *groupTopic, now int64) {
	if isDone(gt.holderDone) {
		gt.lock.abandon(gt.holderTok)
	}
	if tok, ok := gt.lock.evictAbandoned(now, int64(s.opts.LockExpiry)); ok {
		s.st.lockEvictions.Add(1)
		s.log.Warn("pop: evicted an abandoned group@topic lock hold", "group", gt.key.group, "topic", gt.key.topic, "token", tok)
		if free, to := gt.lock.handOff(now); free {
			broadcastLockFreeLocked(gt)
		} else {
			wakeLocked(gt, to)
		}
	}
}

// waitLock queues a FIFO retry for the group@topic lock and sleeps until
// the holder hands it over, the wait runs out, or the service closes. It is
// called with gt.mu held (and the pop's waiter slot taken) and returns with
// it released.
func (s *Service) waitLock(pc *popCall) (uint64, error) {
	gt, req := pc.gt, pc.req
	w := gt.lock.enqueue()
	ch := make(chan struct{})
	if gt.lockWake == nil {
		gt.lockWake = make(map[*lockWaiter]chan struct{})
	}
	gt.lockWake[w] = ch
	s.st.lockWaits.Add(1)
	s.log.Info("pop: FIFO retry waits for the group@topic lock", "group", req.Group, "topic", req.Topic,
		"client", req.ClientID, "attempt", req.AttemptID, "token", gt.lock.token)
	gt.mu.Unlock()
	t := time.NewTimer(time.Until(pc.lockEnd))
	select {
	case <-ch:
	case <-t.C:
	case <-pc.ctx.Done():
	case <-s.done:
	case <-s.sourceDone():
	}
	t.Stop()
	gt.mu.Lock()
	delete(gt.lockWake, w)
	if w.granted && pc.ctx.Err() == nil && !s.isClosed() && time.Now().Before(pc.lockEnd) {
		s.holdLocked(pc, w.token)
		gt.mu.Unlock()
		return w.token, nil
	}
	if free, to := gt.lock.cancel(w, s.nowNanos()); free {
		broadcastLockFreeLocked(gt)
	} else {
		wakeLocked(gt, to)
	}
	gt.mu.Unlock()
	return 0, s.lockWaitErr(pc)
}

func (s *Service) lockWaitErr(pc *popCall) error {
	req := pc.req
	if s.isClosed() {
		return s.closedErr(fmt.Sprintf("pop %s@%s", req.Group, req.Topic))
	}
	s.st.lockTimeouts.Add(1)
	s.log.Debug("pop: FIFO retry gave up waiting for the group@topic lock", "group", req.Group, "topic", req.Topic,
		"client", req.ClientID, "attempt", req.AttemptID)
	if err := pc.ctx.Err(); err != nil {
		return fmt.Errorf("pop %s@%s attempt %q: %w: %w", req.Group, req.Topic, req.AttemptID, ErrLockTimeout, err)
	}
	return fmt.Errorf("pop %s@%s attempt %q: %w", req.Group, req.Topic, req.AttemptID, ErrLockTimeout)
}
