package pop

import (
	"fmt"
	"hash/maphash"
	"time"
)

// ack.go is the driver of Ack and ChangeInvisible, and the commits.
//
// Commits run outside gt.mu: an Offsets implementation may write and
// fsync a file. They are serialized per group@topic by gt.commitMu, taken
// before gt.mu (or tried while holding it: TryLock never waits), and each
// one commits the low-water mark as it is at its turn, so commits reach
// Offsets in order and never go backwards. An
// entry whose ack is committing is detached: no pop delivers it, no other
// handle settles it, and the low-water mark passes it; if the commit
// fails it is put back, so the ack is not applied and its handle stays
// live.
//
// The Service's own MemoryOffsets (s.commitLocked) never blocks: its
// commits run under gt.mu, which orders them, and need no gt.commitMu.

// lookup decodes a handle and finds its group@topic.
func (s *Service) lookup(op, str string) (handle, *groupTopic, error) {
	if s.isClosed() {
		return handle{}, nil, s.closedErr(op)
	}
	if h, gt, ok := s.ownHandle(str); ok {
		return h, gt, nil // made by this Service: no decoding, no MAC to check
	}
	var buf [192]byte
	var h handle
	mac, names, err := parseHandleIn(buf[:], str, &h)
	gt, cached := s.knownGT(names)
	known := cached
	if known {
		h.group, h.topic = gt.key.group, gt.key.topic
	} else {
		g, t := splitNames(names)
		h.group, h.topic = string(g), string(t)
		gt, known = s.gts.Load(gtKey{h.group, h.topic})
	}
	if err == nil {
		if known {
			err = s.badMACOf(gt, &h, mac)
		} else {
			err = s.badMAC(&h, mac, s.signer.tag(h.group, h.topic))
		}
	}
	if err != nil {
		s.st.badHandles.Add(1)
		s.log.Debug("pop: rejected bad handle", "op", op, "err", err)
		return h, nil, fmt.Errorf("%s: %w", op, err)
	}
	if h.nonce != s.nonce {
		return h, nil, s.stale(op, h, fmt.Errorf("handle of %s@%s queue %d offset %d: issued before a restart: %w", h.group, h.topic, h.queue, h.offset, ErrStaleHandle))
	}
	if !known {
		return h, nil, s.stale(op, h, fmt.Errorf("handle of %s@%s: unknown group@topic: %w", h.group, h.topic, ErrStaleHandle))
	}
	if !cached {
		s.remember(gt)
	}
	return h, gt, nil
}

// knownGT finds the group@topic of a parsed handle in the small cache
// s.recent, comparing its names without converting them to strings (no
// allocation per ack); a miss is looked up by name.
func (s *Service) knownGT(names []byte) (*groupTopic, bool) {
	if names == nil {
		return nil, false
	}
	gt := s.recent[maphash.Bytes(s.seed, names)%uint64(len(s.recent))].Load()
	if gt == nil || gt.names != string(names) {
		return nil, false
	}
	return gt, true
}

// remember puts gt in s.recent.
func (s *Service) remember(gt *groupTopic) {
	slot := &s.recent[maphash.String(s.seed, gt.names)%uint64(len(s.recent))]
	if slot.Load() != gt {
		slot.Store(gt)
	}
}

// badMACOf is badMAC for a handle of gt, whose MAC's first step is
// cached for the last (nonce, incarnation) acked: the acks of one queue
// state verify with one AES block instead of two.
func (s *Service) badMACOf(gt *groupTopic, h *handle, mac [handleMACLen]byte) error {
	f := gt.ackFirst.Load()
	if f == nil || f.nonce != h.nonce || f.inc != h.inc {
		f = &firstStep{nonce: h.nonce, inc: h.inc, x: s.signer.macFirst(h, gt.tag)}
		gt.ackFirst.Store(f)
	}
	if s.signer.verifyAfter(h, mac, f.x) {
		return nil
	}
	return fmt.Errorf("handle signature: %w", ErrBadHandle)
}

func (s *Service) badMAC(h *handle, mac [handleMACLen]byte, tag gtTag) error {
	if s.signer.verify(h, mac, tag) {
		return nil
	}
	return fmt.Errorf("handle signature: %w", ErrBadHandle)
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
	ep := gt.view.Epoch(h.queue)
	gt.mu.Lock()
	qs, e, err := gt.core.resolve(h, ep)
	if err != nil {
		gt.mu.Unlock()
		return s.stale("ack", h, err)
	}
	inBatch := qs.batch.id != 0 && e.batch == qs.batch.id
	before := qs.low()
	qs.detach(e)
	// Only an ack that moves the low-water mark itself commits (and waits
	// for the commits before it); one behind an unacked message does not.
	if after := qs.low(); !qs.mustSave && (after == before || after <= qs.committed) {
		s.settleAckLocked(gt, qs, e, inBatch)
		gt.mu.Unlock()
		return nil
	}
	if s.commitLocked {
		return s.commitInPlace(gt, qs, e, h, inBatch)
	}
	if gt.commitMu.TryLock() {
		// No commit is running: take the turn without letting go of mu
		// (TryLock cannot wait, so the lock order holds), as commitAck
		// would after taking commitMu and mu again.
		defer gt.commitMu.Unlock()
		return s.commitTurnLocked(gt, qs, h, inBatch)
	}
	gt.mu.Unlock()
	return s.commitAck(gt, qs, h, inBatch)
}

// acking finds again the detached entry of an ack in progress (a pop may
// have moved the slab meanwhile); gt.mu must be held.
func acking(qs *queueState, h handle) *entry {
	if e := qs.get(h.offset); e != nil && e.gen == h.gen && e.where == detached {
		return e
	}
	return nil
}

// commitAck commits the low-water mark an ack moved, then settles the
// entry, or puts it back if the commit failed.
func (s *Service) commitAck(gt *groupTopic, qs *queueState, h handle, inBatch bool) error {
	gt.commitMu.Lock()
	defer gt.commitMu.Unlock()
	gt.mu.Lock()
	return s.commitTurnLocked(gt, qs, h, inBatch)
}

// commitTurnLocked is commitAck's turn: called holding gt.commitMu and
// gt.mu (or gt.mu alone when s.commitLocked), it returns having released
// gt.mu.
func (s *Service) commitTurnLocked(gt *groupTopic, qs *queueState, h handle, inBatch bool) error {
	low, current := qs.low(), gt.core.queues[qs.queue] == qs
	if !current || (!qs.mustSave && low <= qs.committed) {
		if e := acking(qs, h); current && e != nil {
			s.settleAckLocked(gt, qs, e, inBatch)
		}
		gt.mu.Unlock()
		if !current {
			return s.stale("ack", h, fmt.Errorf("handle of %s@%s queue %d offset %d: offset reset during the ack: %w", h.group, h.topic, h.queue, h.offset, ErrStaleHandle))
		}
		return nil
	}
	err := s.commitOutside(gt, h.queue, low, qs.epoch)
	if err == nil {
		s.st.commits.Add(1)
		qs.committed, qs.mustSave = max(qs.committed, low), false
		if e := acking(qs, h); e != nil {
			s.settleAckLocked(gt, qs, e, inBatch)
		}
		gt.mu.Unlock()
		return nil
	}
	if e := acking(qs, h); e != nil {
		qs.hide(e, 0) // the ack is not applied: the handle stays live
	}
	gt.mu.Unlock()
	return s.commitFailed(gt, qs, h, low, err)
}

// commitInPlace is commitTurnLocked for s.commitLocked, called holding
// gt.mu straight after Ack detached e: nothing changed since, so neither
// qs nor e needs finding again. It returns having released gt.mu.
func (s *Service) commitInPlace(gt *groupTopic, qs *queueState, e *entry, h handle, inBatch bool) error {
	low := qs.low()
	err := s.offsets.CommitFenced(gt.key.group, gt.key.topic, qs.queue, low, qs.epoch)
	if err == nil {
		s.st.commits.Add(1)
		qs.committed, qs.mustSave = max(qs.committed, low), false
		s.settleAckLocked(gt, qs, e, inBatch)
		gt.mu.Unlock()
		return nil
	}
	qs.hide(e, 0) // the ack is not applied: the handle stays live
	gt.mu.Unlock()
	return s.commitFailed(gt, qs, h, low, err)
}

// commitFailed is the error of an ack whose commit of low failed with err
// (its entry put back); called without gt.mu.
func (s *Service) commitFailed(gt *groupTopic, qs *queueState, h handle, low int64, err error) error {
	if s.isClosed() {
		// The host is closing (the Service first, then its Offsets): the
		// commit failed because of it, and the caller gets what every call
		// after Close gets.
		s.log.Debug("pop: ack not applied, closed during its commit", "group", h.group, "topic", h.topic, "queue", h.queue, "offset", h.offset, "err", err)
		return fmt.Errorf("ack %s@%s queue %d offset %d: commit %d: %w: %w", h.group, h.topic, h.queue, h.offset, low, s.closedErr("ack"), err)
	}
	if ep := gt.view.Epoch(h.queue); ep != qs.epoch {
		// A reset landed between resolve's epoch check and the commit: the
		// handle was popped before it, so it is stale.
		return s.stale("ack", h, fmt.Errorf("handle of %s@%s queue %d offset %d: offset reset during the ack (epoch %d, now %d): %w: %w",
			h.group, h.topic, h.queue, h.offset, qs.epoch, ep, ErrStaleHandle, err))
	}
	s.st.commitErrors.Add(1)
	s.log.Debug("pop: ack not applied, commit failed", "group", h.group, "topic", h.topic, "queue", h.queue, "offset", h.offset, "commit", low, "epoch", qs.epoch, "err", err)
	return fmt.Errorf("ack %s@%s queue %d offset %d: commit %d: %w", h.group, h.topic, h.queue, h.offset, low, err)
}

// settleAckLocked settles an acked entry and wakes the waiters if that
// unblocked a FIFO queue. The event is counted even when nobody waits
// yet: a pop whose round found the queue blocked and that has not taken
// its waiter slot compares the count in waitForEvent (under gt.mu, as
// here) and looks again instead of sleeping through the ack.
func (s *Service) settleAckLocked(gt *groupTopic, qs *queueState, e *entry, inBatch bool) {
	qs.settle(e)
	s.st.acks.Add(1)
	if qs.fifoUsed && ((inBatch && len(qs.fifoMembers()) == 0) || qs.pending() == 0) {
		gt.events.Add(1) // the FIFO queue is unblocked
		broadcast(gt)
	}
}

// commitAll commits the low-water marks of qss, outside gt.mu and in
// order. A failure is logged and counted: the next commit of the queue
// covers it.
func (s *Service) commitAll(gt *groupTopic, qss []*queueState) {
	for _, qs := range qss {
		s.commitQueue(gt, qs)
	}
}

func (s *Service) commitQueue(gt *groupTopic, qs *queueState) {
	gt.commitMu.Lock()
	defer gt.commitMu.Unlock()
	gt.mu.Lock()
	low := qs.low()
	if gt.core.queues[qs.queue] != qs || (!qs.mustSave && low <= qs.committed) {
		gt.mu.Unlock()
		return
	}
	g, t := gt.key.group, gt.key.topic
	if err := s.commitOutside(gt, qs.queue, low, qs.epoch); err != nil {
		gt.mu.Unlock()
		s.st.commitErrors.Add(1)
		s.log.Warn("pop: commit failed", "group", g, "topic", t, "queue", qs.queue, "offset", low, "epoch", qs.epoch, "err", err)
		return
	}
	s.st.commits.Add(1)
	qs.committed, qs.mustSave = max(qs.committed, low), false
	gt.mu.Unlock()
}

// commitOutside commits offset of queue, called and returning with gt.mu
// held: it lets go of gt.mu for the commit unless s.commitLocked.
func (s *Service) commitOutside(gt *groupTopic, queue int, offset int64, epoch uint64) error {
	if s.commitLocked {
		return s.offsets.CommitFenced(gt.key.group, gt.key.topic, queue, offset, epoch)
	}
	gt.mu.Unlock()
	defer gt.mu.Lock()
	return s.offsets.CommitFenced(gt.key.group, gt.key.topic, queue, offset, epoch)
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
	ep := gt.view.Epoch(h.queue)
	gt.mu.Lock()
	qs, e, err := gt.core.resolve(h, ep)
	if err != nil {
		gt.mu.Unlock()
		return "", s.stale("change invisible", h, err)
	}
	qs.change(e, s.nowNanos(), int64(d))
	h.gen = e.gen
	gt.mu.Unlock()
	s.st.changes.Add(1)
	return s.signer.encodeWith(h, gt.tag, gt.names), nil
}
