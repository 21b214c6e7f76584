package pop

import (
	"errors"

	"github.com/brokercore/brokercore/internal/fence"
)

// Sentinel errors. Every error the package returns wraps one of these (or an
// error of the Source or Offsets) with %w, so errors.Is works.
var (
	// ErrClosed is returned by every call after Close of the Service, or
	// after its Source was closed (a Source with a Done channel, as
	// *store.Store, tells the Service so).
	ErrClosed = errors.New("pop: service closed")
	// ErrInvalid reports a bad request or argument; nothing was changed.
	ErrInvalid = errors.New("pop: invalid request")
	// ErrBadHandle reports a receipt handle that is malformed or was not
	// issued by this service (its signature does not verify); nothing was
	// changed.
	ErrBadHandle = errors.New("pop: bad receipt handle")
	// ErrStaleHandle reports a genuine handle whose delivery was superseded:
	// the message was acked, re-popped, redelivered, its invisible time was
	// changed through another handle, or the queue was reset (or the service
	// restarted) since. Nothing was changed.
	ErrStaleHandle = errors.New("pop: stale receipt handle")
	// ErrLockTimeout is returned by a FIFO pop with an attempt id whose wait
	// for the group@topic lock ran out (ctx, Request.Poll, or
	// Options.LockWait). It is an error and never an empty success, so the
	// client keeps its attempt id and retries.
	ErrLockTimeout = errors.New("pop: timed out waiting for the group@topic lock")
	// ErrTooManyWaiters is returned by a long-polling pop that would exceed
	// Options.MaxWaitersPerKey or Options.MaxWaiters.
	ErrTooManyWaiters = errors.New("pop: too many long-polling waiters")
	// ErrStaleEpoch is returned by MemoryOffsets.CommitFenced for a commit
	// made under an epoch that a Reset has since replaced. It is the same
	// value as offset.ErrStaleEpoch (internal/fence), so errors.Is matches
	// either.
	ErrStaleEpoch = fence.ErrStaleEpoch
	// ErrDeadLetterRefused, wrapped by an error of Options.DeadLetter, says
	// the dead letter can never be written (its log refuses it for good):
	// instead of offering it again every DeadLetterRetry forever, the
	// Service settles the message without a dead letter — it stays in its
	// topic's log at its offset — logs it at ERROR with its keys and counts
	// it in Stats.DeadLetterDropped. An error wrapping store.ErrInvalid (a
	// DeadLetter that appends to a *store.Store) is taken the same way.
	ErrDeadLetterRefused = errors.New("pop: dead letter refused for good")
)
