package pop

import "sync/atomic"

// Stats is a snapshot of the Service's counters, for export as metrics.
type Stats struct {
	Pops               int64 // valid Pop calls
	Empty              int64 // pops answered with no message
	Delivered          int64 // deliveries, first and repeated
	Redelivered        int64 // deliveries with Attempts > 1
	Acks               int64
	Changes            int64 // successful ChangeInvisible calls
	Commits            int64 // offsets committed
	CommitErrors       int64
	StaleHandles       int64
	BadHandles         int64
	Invalid            int64 // rejected requests
	Clamped            int64 // pops whose Invisible was clamped
	LockContended      int64 // pops that found the group@topic lock held
	LockWaits          int64 // FIFO retries that queued for the lock
	LockTimeouts       int64 // FIFO retries that gave up (ErrLockTimeout)
	LockEvictions      int64 // abandoned holds taken away by the backstop
	DeadLettered       int64
	DeadLetterFailures int64
	Resets             int64 // queue states dropped for an offset reset
	TooManyWaiters     int64 // pops rejected with ErrTooManyWaiters
	Waiters            int64 // long-polling pops and lock waiters right now
}

type counters struct {
	pops, empty, delivered, redelivered, acks, changes, commits, commitErrors,
	staleHandles, badHandles, invalid, clamped, lockContended, lockWaits,
	lockTimeouts, lockEvictions, deadLettered, deadLetterFailures, resets,
	tooManyWaiters atomic.Int64
}

// Stats returns a snapshot of the counters.
func (s *Service) Stats() Stats {
	c := &s.st
	return Stats{
		Pops: c.pops.Load(), Empty: c.empty.Load(), Delivered: c.delivered.Load(),
		Redelivered: c.redelivered.Load(), Acks: c.acks.Load(), Changes: c.changes.Load(),
		Commits: c.commits.Load(), CommitErrors: c.commitErrors.Load(),
		StaleHandles: c.staleHandles.Load(), BadHandles: c.badHandles.Load(),
		Invalid: c.invalid.Load(), Clamped: c.clamped.Load(),
		LockContended: c.lockContended.Load(), LockWaits: c.lockWaits.Load(),
		LockTimeouts: c.lockTimeouts.Load(), LockEvictions: c.lockEvictions.Load(),
		DeadLettered: c.deadLettered.Load(), DeadLetterFailures: c.deadLetterFailures.Load(),
		Resets: c.resets.Load(), TooManyWaiters: c.tooManyWaiters.Load(),
		Waiters: s.waiters.Load(),
	}
}
