package pop

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/store"
)

// Pop delivers up to req.Max messages. See the package doc for the
// semantics; errors wrap ErrInvalid, ErrClosed, ErrLockTimeout,
// ErrTooManyWaiters, a ctx error or a Source error.
func (s *Service) Pop(ctx context.Context, req Request) (Result, error) {
	if s.isClosed() {
		return Result{}, s.closedErr(fmt.Sprintf("pop %s@%s", req.Group, req.Topic))
	}
	filter, err := s.validate(&req)
	if err != nil {
		s.st.invalid.Add(1)
		s.log.Debug("pop: rejected request", "group", req.Group, "topic", req.Topic, "client", req.ClientID, "queue", req.QueueID, "err", err)
		return Result{}, err
	}
	s.st.pops.Add(1)
	inv, clamped := s.invisible(req.Invisible)
	res := Result{Invisible: inv, Clamped: clamped}
	if clamped {
		s.st.clamped.Add(1)
	}
	gt := s.groupTopic(req.Group, req.Topic)
	start := time.Now() // waits are real time; visibility uses Options.Now
	pollEnd := start.Add(req.Poll)
	lockEnd := pollEnd
	if req.Poll <= 0 {
		lockEnd = start.Add(s.opts.LockWait)
	}
	fifoRetry := req.FIFO && req.AttemptID != "" && !s.failFastFIFO
	counted := false // this pop holds a waiter slot (see enterWaitLocked)
	defer func() {
		if counted {
			s.uncountWaiter(gt)
		}
	}()
	rounds := 0 // reads that only found messages the filter rejected
	for {
		if s.isClosed() {
			return Result{}, s.closedErr(fmt.Sprintf("pop %s@%s", req.Group, req.Topic))
		}
		if err := ctx.Err(); err != nil {
			if fifoRetry {
				return Result{}, fmt.Errorf("pop %s@%s attempt %q: %w: %w", req.Group, req.Topic, req.AttemptID, ErrLockTimeout, err)
			}
			return Result{}, fmt.Errorf("pop %s@%s: %w", req.Group, req.Topic, err)
		}
		queues := []int{req.QueueID}
		if req.QueueID == AllQueues {
			queues = s.src.Queues(req.Topic)
		}
		gt.mu.Lock()
		now := s.nowNanos()
		s.sweepLocked(gt, now)
		tok, ok := gt.lock.tryAcquire(now, ctx.Done())
		if !ok {
			s.st.lockContended.Add(1)
			if fifoRetry {
				if err := s.enterWaitLocked(gt, req, &counted); err != nil {
					gt.mu.Unlock()
					return Result{}, err
				}
				t, err := s.waitLock(ctx, gt, req, lockEnd)
				if err != nil {
					return Result{}, err
				}
				tok = t
			} else {
				s.log.Debug("pop: group@topic lock busy, not waiting", "group", req.Group, "topic", req.Topic, "client", req.ClientID)
				if req.Poll <= 0 || !time.Now().Before(pollEnd) {
					gt.mu.Unlock()
					s.st.empty.Add(1)
					return Result{}, nil
				}
				if err := s.enterWaitLocked(gt, req, &counted); err != nil {
					gt.mu.Unlock()
					return Result{}, err
				}
				ch := lockFreeChLocked(gt)
				gt.mu.Unlock()
				s.wait(ctx, ch, pollEnd)
				continue
			}
		}
		picks, seq, skipped, err := s.popLocked(ctx, gt, tok, req, filter, inv, queues)
		if _, free := gt.lock.release(tok, s.nowNanos()); free {
			broadcastLockFreeLocked(gt)
		}
		if err != nil {
			gt.mu.Unlock()
			if s.isClosed() {
				return Result{}, fmt.Errorf("%w: %w", s.closedErr(fmt.Sprintf("pop %s@%s", req.Group, req.Topic)), err)
			}
			return Result{}, err
		}
		if len(picks) > 0 {
			gt.mu.Unlock()
			res.Messages = s.deliveries(gt, picks)
			s.countDelivered(picks)
			if s.log.Enabled(ctx, slog.LevelDebug) {
				for _, p := range picks {
					if p.att > 1 {
						s.log.Debug("pop: redelivered after its invisible time ended", "group", req.Group, "topic", req.Topic,
							"queue", p.qs.queue, "offset", p.off, "attempts", p.att, "client", req.ClientID)
					}
				}
			}
			return res, nil
		}
		if skipped > 0 && (req.Poll > 0 || rounds < maxFilterRounds) {
			// Everything read was filtered out and settled: read on at
			// once instead of answering empty or waiting for an arrival.
			rounds++
			gt.mu.Unlock()
			continue
		}
		if req.Poll <= 0 || !time.Now().Before(pollEnd) {
			gt.mu.Unlock()
			s.st.empty.Add(1)
			return Result{}, nil // the zero Result: nothing was made invisible
		}
		if err := s.enterWaitLocked(gt, req, &counted); err != nil {
			gt.mu.Unlock()
			return Result{}, err
		}
		if gt.events.Load() != seq { // something arrived while we read: look again
			gt.mu.Unlock()
			continue
		}
		ch := notifyChLocked(gt)
		gt.mu.Unlock()
		s.wait(ctx, ch, pollEnd)
	}
}

// waitLock queues a FIFO retry for the group@topic lock and sleeps until
// the holder hands it over, the wait runs out, or the service closes. It is
// called with gt.mu held (and the pop's waiter slot taken) and returns with
// it held on success, released on error.
func (s *Service) waitLock(ctx context.Context, gt *groupTopic, req Request, until time.Time) (uint64, error) {
	w := gt.lock.enqueue(ctx.Done())
	s.st.lockWaits.Add(1)
	s.log.Info("pop: FIFO retry waits for the group@topic lock", "group", req.Group, "topic", req.Topic,
		"client", req.ClientID, "attempt", req.AttemptID, "holder_token", gt.lock.token)
	gt.mu.Unlock()
	t := time.NewTimer(time.Until(until))
	select {
	case <-w.ch:
	case <-t.C:
	case <-ctx.Done():
	case <-s.done:
	case <-s.sourceDone():
	}
	t.Stop()
	gt.mu.Lock()
	if w.granted && ctx.Err() == nil && !s.isClosed() && time.Now().Before(until) {
		return w.token, nil
	}
	if gt.lock.cancel(w, s.nowNanos()) {
		broadcastLockFreeLocked(gt)
	}
	gt.mu.Unlock()
	if s.isClosed() {
		return 0, s.closedErr(fmt.Sprintf("pop %s@%s", req.Group, req.Topic))
	}
	s.st.lockTimeouts.Add(1)
	s.log.Debug("pop: FIFO retry gave up waiting for the group@topic lock", "group", req.Group, "topic", req.Topic,
		"client", req.ClientID, "attempt", req.AttemptID)
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("pop %s@%s attempt %q: %w: %w", req.Group, req.Topic, req.AttemptID, ErrLockTimeout, err)
	}
	return 0, fmt.Errorf("pop %s@%s attempt %q: %w", req.Group, req.Topic, req.AttemptID, ErrLockTimeout)
}

// sweepLocked applies the lock's expiry backstop.
func (s *Service) sweepLocked(gt *groupTopic, now int64) {
	if tok, ok := gt.lock.evictAbandoned(now, int64(s.opts.LockExpiry)); ok {
		s.st.lockEvictions.Add(1)
		s.log.Warn("pop: evicted an abandoned group@topic lock hold", "group", gt.key.group, "topic", gt.key.topic, "token", tok)
		if gt.lock.handOff(now) {
			broadcastLockFreeLocked(gt)
		}
	}
}

type readPlan struct {
	qs    *queueState
	from  int64
	n     int
	msgs  []*store.Message
	err   error
	queue int
}

// popLocked runs one pop while holding the group@topic lock tok. It is
// called and returns with gt.mu held, but releases it around the Source
// reads and DeadLetter calls. It decides everything with Options.Now read
// after the reads, and changes nothing if the lock was lost or ctx ended.
func (s *Service) popLocked(ctx context.Context, gt *groupTopic, tok uint64, req Request, f tagFilter, inv time.Duration, queues []int) ([]pick, uint64, int, error) {
	seq := gt.events.Load()
	if !gt.subscribed || f.expr != gt.filter.expr {
		if gt.subscribed {
			s.st.filterChanges.Add(1)
			s.log.Info("pop: subscription filter replaced", "group", req.Group, "topic", req.Topic, "client", req.ClientID,
				"old_filter", gt.filter.String(), "filter", f.String())
		}
		gt.filter, gt.subscribed = f, true
	}
	now := s.nowNanos()
	g, t := gt.key.group, gt.key.topic
	if len(queues) > 1 {
		r := gt.rr % len(queues)
		gt.rr++
		rot := make([]int, 0, len(queues))
		queues = append(append(rot, queues[r:]...), queues[:r]...)
	}
	// A Source or DeadLetter panic must never leave the lock held.
	unlocked := false
	defer func() {
		if unlocked {
			gt.mu.Lock()
			if _, free := gt.lock.release(tok, s.nowNanos()); free {
				broadcastLockFreeLocked(gt)
			}
			gt.mu.Unlock()
		}
	}()

	states := make([]*queueState, 0, len(queues))
	var dls []pick
	for _, q := range queues {
		if q < 0 {
			continue
		}
		qs := s.stateLocked(gt, q)
		if s.opts.DeadLetter != nil {
			dls = qs.deadLetterDue(now, s.opts.MaxAttempts, s.opts.DeadLetterRetry, dls)
		}
		states = append(states, qs)
	}
	if len(dls) > 0 {
		// Dead letters first, so that what they settle is settled before
		// this pop plans its reads (a FIFO queue may be unblocked by them).
		unlocked = true
		gt.mu.Unlock()
		dlOK := make([]bool, len(dls))
		for i, d := range dls {
			if err := s.opts.DeadLetter(g, d.msg); err != nil {
				s.st.deadLetterFailures.Add(1)
				s.log.Warn("pop: dead letter failed, will retry", "group", g, "topic", t, "queue", d.qs.queue, "offset", d.off, "attempts", d.att, "err", err)
				continue
			}
			dlOK[i] = true
		}
		gt.mu.Lock()
		unlocked = false
		for i, d := range dls {
			if !dlOK[i] || gt.queues[d.qs.queue] != d.qs {
				continue
			}
			if e := d.qs.entry(d.off); e != nil && !e.done && e.gen == d.gen {
				s.st.deadLettered.Add(1)
				s.log.Info("pop: message dead-lettered", "group", g, "topic", t, "queue", d.qs.queue, "offset", d.off, "attempts", d.att)
				d.qs.markDone(e)
				d.qs.trim()
				s.commitLocked(gt, d.qs)
			}
		}
		now = s.nowNanos()
	}

	plans := make([]readPlan, 0, len(states))
	owned := false
	for _, qs := range states {
		if gt.queues[qs.queue] != qs { // dropped while we were out
			continue
		}
		if req.FIFO && qs.fifoOwns(req.AttemptID) {
			owned = true
		}
		plans = append(plans, readPlan{qs: qs, queue: qs.queue, from: qs.next()})
	}
	if !owned {
		remaining := req.Max
		for i := range plans {
			if remaining <= 0 {
				break
			}
			p := &plans[i]
			if req.FIFO {
				p.n = p.qs.fifoFreshWanted(now, req.AttemptID, remaining)
			} else {
				rev := p.qs.revivable(now, remaining)
				remaining -= rev
				p.n = remaining
			}
			if p.n > 0 {
				if min := s.src.MinOffset(t, p.queue); min > p.from {
					s.log.Warn("pop: log no longer holds the next offset (retention), skipping ahead", "group", g, "topic", t, "queue", p.queue, "from", p.from, "min", min)
					p.qs.skipTo(min)
					p.from = p.qs.next()
				}
				if avail := s.src.MaxOffset(t, p.queue) - p.from; avail < int64(p.n) {
					p.n = int(max(avail, 0))
				}
			}
			remaining -= p.n
			if !f.all() && p.n > 0 {
				// Read ahead: some of what is read may be filtered out.
				p.n = int(min(int64(MaxBatch), max(s.src.MaxOffset(t, p.queue)-p.from, 0)))
			}
		}
	}
	reads := false
	for i := range plans {
		reads = reads || plans[i].n > 0
	}
	if reads {
		unlocked = true
		gt.mu.Unlock()
		for i := range plans {
			p := &plans[i]
			if p.n > 0 {
				p.msgs, p.err = s.src.Read(t, p.queue, p.from, p.n)
			}
		}
		gt.mu.Lock()
		unlocked = false
	}

	if err := ctx.Err(); err != nil {
		if req.FIFO && req.AttemptID != "" {
			return nil, seq, 0, fmt.Errorf("pop %s@%s attempt %q: %w: %w", g, t, req.AttemptID, ErrLockTimeout, err)
		}
		return nil, seq, 0, fmt.Errorf("pop %s@%s: %w", g, t, err)
	}
	if !gt.lock.owns(tok) {
		return nil, seq, 0, fmt.Errorf("pop %s@%s: group@topic lock was taken away during the read: %w", g, t, ErrLockTimeout)
	}
	now = s.nowNanos()
	out := make([]pick, 0, req.Max)
	var firstErr error
	skipped := 0
	for i := range plans {
		p := &plans[i]
		if len(out) >= req.Max {
			break
		}
		if gt.queues[p.queue] != p.qs || p.qs.next() != p.from {
			continue
		}
		if p.err != nil {
			if min := s.src.MinOffset(t, p.queue); min > p.from {
				s.log.Warn("pop: log no longer holds the next offset, skipping ahead", "group", g, "topic", t, "queue", p.queue, "from", p.from, "min", min, "err", p.err)
				p.qs.skipTo(min)
				gt.events.Add(1) // look again at once
			} else if firstErr == nil {
				firstErr = fmt.Errorf("pop %s@%s queue %d read at %d: %w", g, t, p.queue, p.from, p.err)
				s.log.Warn("pop: read failed", "group", g, "topic", t, "queue", p.queue, "offset", p.from, "err", p.err)
			}
			p.msgs = nil
		}
		if req.FIFO {
			if owned && !p.qs.fifoOwns(req.AttemptID) {
				continue
			}
			var blocked bool
			var sk int
			out, blocked, sk = p.qs.popFIFO(now, req.AttemptID, inv, req.Max-len(out), p.msgs, f, s.newBatchID, out)
			if sk > 0 {
				skipped += sk
				s.commitLocked(gt, p.qs)
			}
			if blocked {
				s.log.Debug("pop: FIFO queue blocked by another attempt's batch", "group", g, "topic", t, "queue", p.queue,
					"attempt", req.AttemptID, "batch_attempt", p.qs.batch.attempt)
			}
			continue
		}
		out = p.qs.popRevived(now, inv, req.Max-len(out), out)
		var sk int
		out, sk = p.qs.popFresh(p.msgs, f, now, inv, req.Max-len(out), 0, out)
		if sk > 0 {
			skipped += sk
			s.commitLocked(gt, p.qs)
		}
	}
	if skipped > 0 {
		s.st.filtered.Add(uint64(skipped))
	}
	if len(out) == 0 && firstErr != nil {
		return nil, seq, skipped, firstErr
	}
	return out, seq, skipped, nil
}

// maxFilterRounds bounds the reads of a Poll == 0 pop that find only
// messages its filter rejects; it answers empty after that many (the next
// pop reads on from there). A long poll reads on until its Poll ends.
const maxFilterRounds = 16

func (s *Service) newBatchID() uint64 { return s.batchSeq.Add(1) }

func (s *Service) countDelivered(picks []pick) {
	s.st.delivered.Add(uint64(len(picks)))
	var re uint64
	for _, p := range picks {
		if p.att > 1 {
			re++
		}
	}
	if re > 0 {
		s.st.redelivered.Add(re)
	}
}
