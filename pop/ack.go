package pop

import (
	"fmt"
	"time"
)

// resolveLocked finds the live entry a handle refers to; gt.mu must be
// held. Every failure wraps ErrStaleHandle.
func (s *Service) resolveLocked(gt *groupTopic, h handle) (*queueState, *entry, error) {
	qs := gt.queues[h.queue]
	if qs == nil || qs.inc != h.inc {
		return nil, nil, fmt.Errorf("handle of %s@%s queue %d offset %d: queue state rebuilt since: %w", h.group, h.topic, h.queue, h.offset, ErrStaleHandle)
	}
	if ep := s.offsets.Epoch(h.group, h.topic, h.queue); ep != qs.epoch {
		return nil, nil, fmt.Errorf("handle of %s@%s queue %d offset %d: popped before an offset reset (epoch %d, now %d): %w",
			h.group, h.topic, h.queue, h.offset, qs.epoch, ep, ErrStaleHandle)
	}
	e := qs.entry(h.offset)
	if e == nil || e.done || e.gen != h.gen {
		return nil, nil, fmt.Errorf("handle of %s@%s queue %d offset %d: delivery superseded or acked: %w", h.group, h.topic, h.queue, h.offset, ErrStaleHandle)
	}
	return qs, e, nil
}

// lookup decodes a handle and finds its group@topic.
func (s *Service) lookup(op, str string) (handle, *groupTopic, error) {
	if s.isClosed() {
		return handle{}, nil, s.closedErr(op)
	}
	h, err := s.signer.decode(str)
	if err != nil {
		s.st.badHandles.Add(1)
		s.log.Debug("pop: rejected bad handle", "op", op, "err", err)
		return h, nil, fmt.Errorf("%s: %w", op, err)
	}
	if h.nonce != s.nonce {
		return h, nil, s.stale(op, h, fmt.Errorf("handle of %s@%s queue %d offset %d: issued before a restart: %w", h.group, h.topic, h.queue, h.offset, ErrStaleHandle))
	}
	gt, ok := s.gts.Load(gtKey{h.group, h.topic})
	if !ok {
		return h, nil, s.stale(op, h, fmt.Errorf("handle of %s@%s: unknown group@topic: %w", h.group, h.topic, ErrStaleHandle))
	}
	return h, gt, nil
}

func (s *Service) stale(op string, h handle, err error) error {
	s.st.staleHandles.Add(1)
	s.log.Debug("pop: rejected stale handle", "op", op, "group", h.group, "topic", h.topic, "queue", h.queue, "offset", h.offset, "err", err)
	return fmt.Errorf("%s: %w", op, err)
}

// Ack marks the delivery of handle as done. If that advances the queue's
// lowest unacked offset, the new offset is committed (fenced with the epoch
// the message was popped under) before Ack returns; if the commit fails the
// ack is not applied and the error is returned. Errors wrap ErrBadHandle,
// ErrStaleHandle, ErrClosed or the Offsets error.
func (s *Service) Ack(handleStr string) error {
	h, gt, err := s.lookup("ack", handleStr)
	if err != nil {
		return err
	}
	gt.mu.Lock()
	defer gt.mu.Unlock()
	qs, e, err := s.resolveLocked(gt, h)
	if err != nil {
		return s.stale("ack", h, err)
	}
	if low := qs.lowIfDone(h.offset); low > qs.committed {
		if err := s.offsets.CommitFenced(h.group, h.topic, h.queue, low, qs.epoch); err != nil {
			if ep := s.offsets.Epoch(h.group, h.topic, h.queue); ep != qs.epoch {
				// A reset landed between resolveLocked's epoch check and the
				// commit: the handle was popped before it, so it is stale.
				return s.stale("ack", h, fmt.Errorf("handle of %s@%s queue %d offset %d: offset reset during the ack (epoch %d, now %d): %w: %w",
					h.group, h.topic, h.queue, h.offset, qs.epoch, ep, ErrStaleHandle, err))
			}
			s.st.commitErrors.Add(1)
			s.log.Debug("pop: ack not applied, commit failed", "group", h.group, "topic", h.topic, "queue", h.queue, "offset", h.offset, "commit", low, "epoch", qs.epoch, "err", err)
			return fmt.Errorf("ack %s@%s queue %d offset %d: commit %d: %w", h.group, h.topic, h.queue, h.offset, low, err)
		}
		s.st.commits.Add(1)
		qs.committed = low
	}
	inBatch := qs.batch.id != 0 && e.batch == qs.batch.id
	qs.markDone(e)
	qs.trim()
	s.st.acks.Add(1)
	if qs.fifoUsed && gt.waiters.Load() > 0 {
		var buf [32]int64
		if (inBatch && len(qs.fifoMembers(buf[:0])) == 0) || qs.pending == 0 {
			gt.events.Add(1) // the FIFO queue is unblocked
			broadcastLocked(gt)
		}
	}
	return nil
}

// ChangeInvisible makes the delivery of handle invisible for d from now
// (clamped into [Options.MinInvisible, Options.MaxInvisible]) and returns
// a new handle; the old one becomes stale. On a FIFO delivery it extends
// the queue's block. d < 0 → ErrInvalid.
func (s *Service) ChangeInvisible(handleStr string, d time.Duration) (string, error) {
	if d < 0 {
		s.st.invalid.Add(1)
		s.log.Debug("pop: rejected change-invisible with negative duration", "duration", d)
		return "", fmt.Errorf("change invisible by %v: negative duration: %w", d, ErrInvalid)
	}
	h, gt, err := s.lookup("change invisible", handleStr)
	if err != nil {
		return "", err
	}
	d, _ = s.clamp(d)
	gt.mu.Lock()
	qs, e, err := s.resolveLocked(gt, h)
	if err != nil {
		gt.mu.Unlock()
		return "", s.stale("change invisible", h, err)
	}
	e.gen++
	e.visibleAt = s.nowNanos() + int64(d)
	if e.visibleAt < qs.earliest {
		qs.earliest = e.visibleAt
	}
	h.gen = e.gen
	gt.mu.Unlock()
	s.st.changes.Add(1)
	return s.signer.encode(h), nil
}
