package pop

import "sync/atomic"

// Stats is a snapshot of the Service's counters, for export as metrics.
// Counters are uint64 with snake_case json names.
type Stats struct {
	Pops               uint64 `json:"pops"`           // valid Pop calls
	Empty              uint64 `json:"empty"`          // pops answered with no message
	Delivered          uint64 `json:"delivered"`      // deliveries, first and repeated
	Redelivered        uint64 `json:"redelivered"`    // deliveries with Attempts > 1
	Filtered           uint64 `json:"filtered"`       // messages settled unseen: the group's filter rejected them
	FilterChanges      uint64 `json:"filter_changes"` // a group@topic's filter replaced by a different one
	Acks               uint64 `json:"acks"`
	Changes            uint64 `json:"changes"` // successful ChangeInvisible calls
	Commits            uint64 `json:"commits"` // offsets committed
	CommitErrors       uint64 `json:"commit_errors"`
	StaleHandles       uint64 `json:"stale_handles"`
	BadHandles         uint64 `json:"bad_handles"`
	Invalid            uint64 `json:"invalid"`        // rejected requests
	Clamped            uint64 `json:"clamped"`        // pops whose Invisible was clamped
	LockContended      uint64 `json:"lock_contended"` // pops that found the group@topic lock held
	LockWaits          uint64 `json:"lock_waits"`     // FIFO retries that queued for the lock
	LockTimeouts       uint64 `json:"lock_timeouts"`  // FIFO retries that gave up (ErrLockTimeout)
	LockEvictions      uint64 `json:"lock_evictions"` // abandoned holds taken away by the backstop
	DeadLettered       uint64 `json:"dead_lettered"`
	DeadLetterFailures uint64 `json:"dead_letter_failures"`
	// DeadLetterDropped counts messages whose DeadLetter call was refused
	// for good (ErrDeadLetterRefused or store.ErrInvalid): settled without a
	// dead letter, each logged at ERROR with its keys. The message itself
	// stays in its topic's log at its offset.
	DeadLetterDropped uint64 `json:"dead_letter_dropped"`
	Resets            uint64 `json:"resets"`           // queue states dropped for an offset reset
	TooManyWaiters    uint64 `json:"too_many_waiters"` // pops rejected with ErrTooManyWaiters
	Waiters           uint64 `json:"waiters"`          // long-polling pops and lock waiters right now
}

type counters struct {
	pops, empty, delivered, redelivered, filtered, filterChanges, acks, changes,
	commits, commitErrors, staleHandles, badHandles, invalid, clamped,
	lockContended, lockWaits, lockTimeouts, lockEvictions, deadLettered,
	deadLetterFailures, deadLetterDropped, resets, tooManyWaiters atomic.Uint64
}

// Stats returns a snapshot of the counters.
func (s *Service) Stats() Stats {
	c := &s.st
	return Stats{
		Pops: c.pops.Load(), Empty: c.empty.Load(), Delivered: c.delivered.Load(),
		Redelivered: c.redelivered.Load(), Filtered: c.filtered.Load(),
		FilterChanges: c.filterChanges.Load(), Acks: c.acks.Load(), Changes: c.changes.Load(),
		Commits: c.commits.Load(), CommitErrors: c.commitErrors.Load(),
		StaleHandles: c.staleHandles.Load(), BadHandles: c.badHandles.Load(),
		Invalid: c.invalid.Load(), Clamped: c.clamped.Load(),
		LockContended: c.lockContended.Load(), LockWaits: c.lockWaits.Load(),
		LockTimeouts: c.lockTimeouts.Load(), LockEvictions: c.lockEvictions.Load(),
		DeadLettered: c.deadLettered.Load(), DeadLetterFailures: c.deadLetterFailures.Load(), DeadLetterDropped: c.deadLetterDropped.Load(),
		Resets: c.resets.Load(), TooManyWaiters: c.tooManyWaiters.Load(),
		Waiters: uint64(max(s.waiters.Load(), 0)),
	}
}
