package pop

import (
	"errors"
	"fmt"
	"slices"

	"github.com/brokercore/brokercore/store"
)

// round.go is one round of a pop while it holds the group@topic lock:
// lock → plan → unlock → read → lock → apply → unlock → commit. A
// dead-letter round (the plan offers parked messages to DeadLetter) is
// followed by a delivery round.

// round runs one pop round holding the group@topic lock tok and releases
// the lock at the end (also if the Source or DeadLetter panics). seq is
// the event count before the round: a waiter compares it to see whether
// something happened meanwhile.
func (s *Service) round(pc *popCall, tok uint64) (picks []pick, seq uint64, skipped int, err error) {
	gt := pc.gt
	defer s.releaseHold(pc, tok)
	seq = gt.events.Load()
	queues := s.queueList(pc)
	gt.mu.Lock()
	rot := gt.core.rotation(len(queues))
	gt.mu.Unlock()
	for {
		gt.mu.Lock()
		p := gt.core.plan(s.nowNanos(), pc.pr, gt.view, queues, rot)
		gt.mu.Unlock()
		s.read(gt, p)
		if p.deadLetters {
			ok := s.offerDeadLetters(gt, p)
			gt.mu.Lock()
			gt.core.settleGone(p)
			gt.core.settleDeadLetters(p, ok)
			commits := needCommits(p, nil)
			gt.mu.Unlock()
			s.commitAll(gt, commits)
			continue
		}
		if err := pc.ctx.Err(); err != nil {
			return nil, seq, 0, s.ctxErr(pc, err)
		}
		gt.mu.Lock()
		if !gt.lock.owns(tok) {
			gt.mu.Unlock()
			return nil, seq, 0, fmt.Errorf("pop %s@%s: group@topic lock was taken away during the read: %w", gt.key.group, gt.key.topic, ErrLockTimeout)
		}
		lost := gt.core.settleGone(p)
		picks, skipped, err = gt.core.apply(p)
		commits := needCommits(p, nil)
		gt.mu.Unlock()
		if skipped > 0 {
			s.st.filtered.Add(uint64(skipped))
		}
		s.commitAll(gt, commits)
		return picks, seq, skipped + lost, err
	}
}

// queueList is the queues a pop covers: its queue, or for AllQueues the
// Source's queues of the topic, listed once and cached until an arrival
// on an unknown queue or a pop that found nothing.
func (s *Service) queueList(pc *popCall) []int {
	if pc.req.QueueID != AllQueues {
		pc.one[0] = pc.req.QueueID
		return pc.one[:]
	}
	if l := pc.gt.list.Load(); l != nil {
		return *l
	}
	l := slices.Clone(s.src.Queues(pc.req.Topic))
	l = slices.DeleteFunc(l, func(q int) bool { return q < 0 })
	slices.Sort(l)
	pc.gt.list.Store(&l)
	return l
}

// needCommits lists the planned queues whose low-water mark moved past
// their committed offset. Called with gt.mu held.
func needCommits(p *popPlan, out []*queueState) []*queueState {
	for i := range p.queues {
		if qs := p.queues[i].qs; qs.mustSave || qs.low() > qs.committed {
			out = append(out, qs)
		}
	}
	return out
}

// read fills the plan's messages from the Source, without any lock but
// the group@topic's.
func (s *Service) read(gt *groupTopic, p *popPlan) {
	t := gt.key.topic
	for i := range p.queues {
		qp := &p.queues[i]
		q := qp.qs.queue
		if len(qp.again) > 0 {
			s.readAgain(t, qp)
		}
		if qp.n > 0 {
			msgs, err := s.src.Read(t, q, qp.from, qp.n)
			if err != nil {
				if min := s.src.MinOffset(t, q); min > qp.from {
					gt.events.Add(1) // retention moved the log on: the next round skips ahead
				} else if qp.err == nil {
					qp.err = err
				}
				s.log.Debug("pop: read failed", "group", gt.key.group, "topic", t, "queue", q, "offset", qp.from, "err", err)
			}
			qp.fresh = msgs
		}
	}
}

// readAgain reads the messages of re-delivered offsets, one Source read
// per run of consecutive offsets. An offset below the log's MinOffset
// after the read is gone (read, nil message).
func (s *Service) readAgain(topic string, qp *queuePlan) {
	n := len(qp.again)
	qp.got, qp.read = make([]*store.Message, n), make([]bool, n)
	missing := false
	for j := 0; j < n; {
		k := j
		for k+1 < n && qp.again[k+1] == qp.again[k]+1 {
			k++
		}
		missing = s.readRun(topic, qp, j, k) || missing
		j = k + 1
	}
	if !missing {
		return
	}
	min := s.src.MinOffset(topic, qp.qs.queue)
	for x, off := range qp.again {
		if !qp.read[x] && off < min {
			qp.read[x] = true // gone: retention removed it (settleGone)
		}
	}
	if qp.err != nil && min > qp.again[0] {
		qp.err = nil
	}
}

// readRun reads again[j..k] (consecutive offsets) in one Source read and
// reports whether some are missing.
func (s *Service) readRun(topic string, qp *queuePlan, j, k int) (missing bool) {
	msgs, err := s.src.Read(topic, qp.qs.queue, qp.again[j], k-j+1)
	if err != nil && qp.err == nil {
		qp.err = err
	}
	for _, m := range msgs {
		if x := int(m.QueueOffset-qp.again[j]) + j; x >= j && x <= k && qp.again[x] == m.QueueOffset {
			qp.got[x], qp.read[x] = m, true
		}
	}
	return len(msgs) < k-j+1
}

// offerDeadLetters calls DeadLetter for every parked message of a
// dead-letter round, outside gt.mu; ok[i][j] reports success for
// p.queues[i].again[j] (a message gone from the log counts as settled).
func (s *Service) offerDeadLetters(gt *groupTopic, p *popPlan) [][]dlOutcome {
	ok := make([][]dlOutcome, len(p.queues))
	for i := range p.queues {
		qp := &p.queues[i]
		ok[i] = make([]dlOutcome, len(qp.again))
		for j, off := range qp.again {
			m, read := qp.lookup(off)
			switch {
			case !read:
				continue // read failed: retried after DeadLetterRetry
			case m == nil:
				ok[i][j] = dlGone
				continue
			}
			err := s.opts.DeadLetter(gt.key.group, m)
			switch {
			case err == nil:
				ok[i][j] = dlDone
			case errors.Is(err, ErrDeadLetterRefused) || errors.Is(err, store.ErrInvalid):
				// Retrying can never work: settle it, loudly. It is
				// still in its topic's log at this offset.
				s.st.deadLetterDropped.Add(1)
				s.log.Error("pop: dead letter refused for good, message settled without one", "group", gt.key.group,
					"topic", gt.key.topic, "queue", qp.qs.queue, "offset", off, "uniq_key", m.Properties["UNIQ_KEY"], "err", err)
				ok[i][j] = dlDropped
			default:
				s.st.deadLetterFailures.Add(1)
				s.log.Warn("pop: dead letter failed, will retry", "group", gt.key.group, "topic", gt.key.topic,
					"queue", qp.qs.queue, "offset", off, "err", err)
			}
		}
	}
	return ok
}
