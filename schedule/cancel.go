package schedule

import (
	"fmt"
	"slices"
	"time"
)

// Cancel stops every pending timer whose UNIQ_KEY is uniqKey, durably: the
// cancel is part of the progress, so it survives a restart. A key whose
// timers were all delivered is ErrDelivered, one already cancelled
// ErrCancelled, one no timer has ErrTimerNotFound (also for a timer
// delivered more than KeepDelivered ago or removed by retention). If the
// progress write fails the error says so; the cancel then holds in this
// process and is stored with the next progress write.
//
// Cancel reads the index (24 bytes per indexed timer) and the records not
// indexed yet; it holds the timers' lane while it does, so timers are not
// delivered meanwhile. It may be called whether or not the Scheduler is
// started. CancelAt, given the timer's time, reads one slot instead.
func (s *Scheduler) Cancel(uniqKey string) error {
	return s.cancel(uniqKey, anyTime)
}

// CancelAt is Cancel of the timers whose UNIQ_KEY is uniqKey and whose time
// is t, the time given to At (or the PropTimerDeliverMS of a record
// appended by hand), to the millisecond: as RocketMQ's timer delete, which
// carries the timer's delivery time too. Knowing the time, it reads only
// the index slot of t (SlotWidth of due times) and the records not indexed
// yet, so its cost does not grow with the timers pending elsewhere. A timer
// with this key at another time is not touched: ErrTimerNotFound if there
// is none at t. For a t already passed, a timer is due when it was stored,
// so CancelAt then is Cancel.
func (s *Scheduler) CancelAt(uniqKey string, t time.Time) error {
	due := ceilMilli(t)
	if due <= s.now().UnixMilli() {
		return s.cancel(uniqKey, anyTime)
	}
	return s.cancel(uniqKey, due)
}

// anyTime is cancel's due for "whatever the timer's time".
const anyTime = int64(-1 << 63)

func (s *Scheduler) cancel(uniqKey string, due int64) error {
	if uniqKey == "" {
		s.log.Debug("schedule: cancel rejected", "reason", "empty key")
		return fmt.Errorf("cancel: empty key: %w", ErrInvalid)
	}
	if err := s.closedErr(); err != nil {
		s.log.Debug("schedule: cancel rejected", "key", uniqKey, "err", err)
		return fmt.Errorf("cancel %q: %w", uniqKey, err)
	}
	t := s.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.repair(); err != nil {
		return fmt.Errorf("cancel %q: %w", uniqKey, err)
	}
	pending, delivered, cancelled, err := t.find(uniqKey, due)
	if err != nil {
		s.log.Debug("schedule: cancel failed", "key", uniqKey, "err", err)
		return fmt.Errorf("cancel %q: %w", uniqKey, err)
	}
	if len(pending) == 0 {
		var why error
		switch {
		case delivered:
			why = ErrDelivered
		case cancelled:
			why = ErrCancelled
		default:
			why = ErrTimerNotFound
		}
		s.log.Debug("schedule: cancel refused", "key", uniqKey, "err", why)
		return fmt.Errorf("cancel %q: %w", uniqKey, why)
	}
	ts := t.persisted()
	for _, k := range pending {
		i, found := slices.BinarySearchFunc(ts.cancels, k, func(a, b timerKey) int { return compareEntries(entry{key: a}, entry{key: b}) })
		if !found {
			ts.cancels = slices.Insert(ts.cancels, i, k)
		}
	}
	_, err = s.commit(nil, nil, 0, &ts, func() {
		t.st.cancels = slices.Clone(ts.cancels)
		t.syncCancelled()
		t.cancels.Add(uint64(len(pending)))
		t.publish()
	})
	if err != nil {
		t.unsaved = true
		s.log.Debug("schedule: cancel not saved", "key", uniqKey, "err", err)
		return fmt.Errorf("cancel %q: recorded in memory, progress not saved: %w", uniqKey, err)
	}
	s.log.Info("schedule: timer cancelled", "key", uniqKey, "timers", len(pending))
	return nil
}

// find looks uniqKey up in the index (by hash, then confirmed from the log)
// and in the records not indexed yet: every timer with the key, or (due not
// anyTime) only the ones due at due, in one slot. Caller holds t.mu.
func (t *timerLane) find(uniqKey string, due int64) (pending []timerKey, delivered, cancelled bool, err error) {
	h := keyHash(uniqKey)
	at := func(k timerKey) bool { return due == anyTime || k.due == due }
	slots := t.idx.slots
	if due != anyTime {
		slots = nil
		if _, found := slices.BinarySearch(t.idx.slots, slotOf(due)); found {
			slots = []int64{slotOf(due)}
		}
	}
	var cands []entry
	for _, slot := range slots {
		err := t.idx.scan(slot, func(e entry) {
			// Entries at or beyond the ingest cursor were written ahead of
			// the progress; the scan of the records not indexed covers them.
			if e.hash == h && e.key.off < t.st.ingested && at(e.key) {
				cands = append(cands, e)
			}
		})
		if err != nil {
			t.broken = err
			return nil, false, false, err
		}
	}
	slices.SortFunc(cands, compareEntries)
	cands = slices.CompactFunc(cands, func(a, b entry) bool { return a.key == b.key })
	classify := func(k timerKey, late bool) {
		switch _, gone := t.cancelled[k.off]; {
		case gone:
			cancelled = true
		case !late && !t.st.done.less(k):
			delivered = true
		default:
			pending = append(pending, k)
		}
	}
	src := t.s.src
	for _, e := range cands {
		msgs, err := src.Read(TimerTopic, 0, e.key.off, 1)
		if err != nil || len(msgs) == 0 || msgs[0].Properties[PropUniqKey] != uniqKey {
			continue // a hash collision, or a record retention removed
		}
		classify(e.key, false)
	}
	for off, end := t.st.ingested, src.MaxOffset(TimerTopic, 0); off < end; {
		msgs, err := src.Read(TimerTopic, 0, off, t.s.opts.MaxBatch)
		if err != nil {
			return nil, false, false, err
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if m.Properties[PropUniqKey] == uniqKey {
				if k, ok := timerOf(m, t.s.opts.MaxTimerDelay); ok && at(k) {
					classify(k, true) // not indexed yet: never delivered
				}
			}
			off = m.QueueOffset + 1
		}
	}
	return pending, delivered, cancelled, nil
}
