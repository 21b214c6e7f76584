package pop

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// pop.go is the driver of a Pop: validation, the group@topic lock, the
// rounds of lock → plan → unlock → read → lock → apply → unlock → commit,
// and the waits of a long poll. Every decision is the core's (core.go).

// maxFilterRounds bounds the reads of a Poll == 0 pop that find only
// messages its filter rejects; it answers empty after that many (the next
// pop reads on from there). A long poll reads on until its Poll ends.
const maxFilterRounds = 16

// popCall is one Pop in progress.
type popCall struct {
	ctx       context.Context
	req       Request
	pr        popReq
	gt        *groupTopic
	pollEnd   time.Time // waits are real time; visibility uses Options.Now
	lockEnd   time.Time
	fifoRetry bool // a FIFO pop with an attempt id: waits for the lock
	counted   bool // holds a waiter slot (see enterWaitLocked)
	rounds    int  // reads that only found messages the filter rejects
	one       [1]int
}

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
	if clamped {
		s.st.clamped.Add(1)
	}
	pc := s.newPopCall(ctx, req, filter, inv)
	defer func() {
		if pc.counted {
			s.uncountWaiter(pc.gt)
		}
	}()
	picks, err := s.popLoop(pc)
	if err != nil || len(picks) == 0 {
		return Result{}, err // the zero Result: nothing was made invisible
	}
	s.countDelivered(pc, picks)
	return Result{Messages: s.deliveries(pc.gt, picks), Invisible: inv, Clamped: clamped}, nil
}

// newPopCall starts the clocks of a validated pop: its Poll, and how long
// a FIFO retry waits for the group@topic lock.
func (s *Service) newPopCall(ctx context.Context, req Request, filter Filter, inv time.Duration) *popCall {
	start := time.Now()
	pc := &popCall{ctx: ctx, req: req, gt: s.groupTopic(req.Group, req.Topic), pollEnd: start.Add(req.Poll),
		pr:        popReq{fifo: req.FIFO, attempt: req.AttemptID, client: req.ClientID, max: req.Max, inv: inv, filter: filter},
		fifoRetry: req.FIFO && req.AttemptID != ""}
	pc.lockEnd = pc.pollEnd
	if req.Poll <= 0 {
		pc.lockEnd = start.Add(s.opts.LockWait)
	}
	return pc
}

// popLoop runs rounds until something is delivered, the poll ends or an
// error; between rounds it waits for a wake-up.
func (s *Service) popLoop(pc *popCall) ([]pick, error) {
	gt, req := pc.gt, pc.req
	for {
		if s.isClosed() {
			return nil, s.closedErr(fmt.Sprintf("pop %s@%s", req.Group, req.Topic))
		}
		if err := pc.ctx.Err(); err != nil {
			return nil, s.ctxErr(pc, err)
		}
		tok, ok, err := s.acquire(pc)
		if err != nil {
			return nil, err
		}
		if !ok {
			if !s.pollLeft(pc) {
				s.st.empty.Add(1)
				return nil, nil
			}
			continue // waited for the lock to be released
		}
		picks, seq, skipped, err := s.round(pc, tok)
		if err != nil || len(picks) > 0 {
			return picks, s.roundErr(pc, err)
		}
		if req.QueueID == AllQueues {
			gt.list.Store(nil) // nothing found: list the queues again next time
		}
		if skipped > 0 && s.readOn(pc) {
			pc.rounds++ // everything read was filtered out and settled: read on at once
			continue
		}
		if !s.pollLeft(pc) {
			s.st.empty.Add(1)
			return nil, nil
		}
		if err := s.waitForEvent(pc, seq); err != nil {
			return nil, err
		}
	}
}

// roundErr is a round's error as Pop answers it: ErrClosed first when
// the Source or the Service closed under it.
func (s *Service) roundErr(pc *popCall, err error) error {
	if err != nil && s.isClosed() {
		return fmt.Errorf("%w: %w", s.closedErr(fmt.Sprintf("pop %s@%s", pc.req.Group, pc.req.Topic)), err)
	}
	return err
}

// readOn reports whether a round that found only rejected messages reads
// on at once: a long poll while its Poll lasts (a flood it cannot keep up
// with must not hold it past Poll), a Poll 0 pop for maxFilterRounds reads.
func (s *Service) readOn(pc *popCall) bool {
	if pc.req.Poll > 0 {
		return s.pollLeft(pc)
	}
	return pc.rounds < maxFilterRounds
}

func (s *Service) pollLeft(pc *popCall) bool {
	return pc.req.Poll > 0 && time.Now().Before(pc.pollEnd)
}

func (s *Service) ctxErr(pc *popCall, err error) error {
	if pc.fifoRetry {
		return fmt.Errorf("pop %s@%s attempt %q: %w: %w", pc.req.Group, pc.req.Topic, pc.req.AttemptID, ErrLockTimeout, err)
	}
	return fmt.Errorf("pop %s@%s: %w", pc.req.Group, pc.req.Topic, err)
}

// acquire takes the group@topic lock. A contended FIFO retry queues for it
// and sleeps until it is handed over; any other contended pop returns
// ok == false at once, after waiting (while its Poll lasts) for the lock to
// be released.
func (s *Service) acquire(pc *popCall) (tok uint64, ok bool, err error) {
	gt := pc.gt
	gt.mu.Lock()
	now := s.nowNanos()
	s.sweepLocked(gt, now)
	if tok, ok := gt.lock.tryAcquire(now); ok {
		s.holdLocked(pc, tok)
		gt.mu.Unlock()
		return tok, true, nil
	}
	s.st.lockContended.Add(1)
	if pc.fifoRetry {
		if err := s.enterWaitLocked(gt, pc.req, &pc.counted); err != nil {
			gt.mu.Unlock()
			return 0, false, err
		}
		tok, err := s.waitLock(pc) // unlocks gt.mu
		return tok, err == nil, err
	}
	s.log.Debug("pop: group@topic lock busy, not waiting", "group", pc.req.Group, "topic", pc.req.Topic, "client", pc.req.ClientID)
	if !s.pollLeft(pc) {
		gt.mu.Unlock()
		return 0, false, nil
	}
	if err := s.enterWaitLocked(gt, pc.req, &pc.counted); err != nil {
		gt.mu.Unlock()
		return 0, false, err
	}
	ch := lockFreeChLocked(gt)
	gt.mu.Unlock()
	s.wait(pc.ctx, ch, pc.pollEnd)
	return 0, false, nil
}

// waitForEvent sleeps until a wake-up source fires after seq, the poll
// ends, ctx or Close.
func (s *Service) waitForEvent(pc *popCall, seq uint64) error {
	gt := pc.gt
	gt.mu.Lock()
	if err := s.enterWaitLocked(gt, pc.req, &pc.counted); err != nil {
		gt.mu.Unlock()
		return err
	}
	if gt.events.Load() != seq { // something arrived while we read: look again
		gt.mu.Unlock()
		return nil
	}
	ch := notifyCh(gt)
	gt.mu.Unlock()
	// Arrived broadcasts without gt.mu: one that swapped the channel out
	// before ours was installed bumped events before it, so look again.
	if gt.events.Load() != seq {
		return nil
	}
	s.wait(pc.ctx, ch, pc.pollEnd)
	return nil
}

func (s *Service) countDelivered(pc *popCall, picks []pick) {
	s.st.delivered.Add(uint64(len(picks)))
	var re uint64
	debug := s.log.Enabled(pc.ctx, slog.LevelDebug)
	for _, p := range picks {
		if p.att > 1 {
			re++
			if debug {
				s.log.Debug("pop: redelivered after its invisible time ended", "group", pc.req.Group, "topic", pc.req.Topic,
					"queue", p.qs.queue, "offset", p.off, "attempts", p.att, "client", pc.req.ClientID)
			}
		}
	}
	if re > 0 {
		s.st.redelivered.Add(re)
	}
}
