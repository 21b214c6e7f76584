package offset

import (
	"errors"
	"fmt"

	"github.com/brokercore/brokercore/internal/fence"
)

// Sentinel errors. Every error returned by this package wraps one of them
// (with fmt.Errorf and %w), so callers test with errors.Is.
var (
	// ErrClosed is returned by calls on a Manager after Close.
	ErrClosed = errors.New("offset: manager closed")

	// ErrInvalid is returned for bad input: an empty group or topic, a
	// negative queue ID or offset, a nil TimeIndex, a Clone onto itself.
	// Nothing is changed.
	ErrInvalid = errors.New("offset: invalid argument")

	// ErrStaleEpoch is returned by CommitFenced when the commit carries an
	// epoch other than the current one of its (group, topic, queue): the
	// committer has not seen a reset (or a plain Commit that fenced it, or
	// carries an epoch from before a Remove). Nothing is changed. It is the
	// same value as pop.ErrStaleEpoch (internal/fence), so errors.Is matches
	// either name.
	ErrStaleEpoch = fence.ErrStaleEpoch

	// ErrBeyondEnd is returned by Commit, CommitFenced and Reset for an
	// offset past the queue's end (its MaxOffset, the next offset to be
	// assigned) when Options.Bounds is set. Nothing is changed. The error
	// is an *EndError carrying the queue's end.
	ErrBeyondEnd = errors.New("offset: offset beyond the queue's end")

	// ErrCorrupt is returned by Open when the offset file (or, with
	// FallbackToBackup, also its backup) is torn, truncated, checksum-failing
	// or otherwise undecodable. The manager never silently starts from zero.
	ErrCorrupt = errors.New("offset: corrupt offset file")

	// ErrVersion is returned by Open for an offset file written by an
	// unknown (newer) format version.
	ErrVersion = errors.New("offset: unsupported offset file version")

	// ErrDropped is returned by ProcessQueue.Deliver and ProcessQueue.Commit
	// once the process queue was dropped (by a reset, a revoke or a
	// re-assignment). The pull it answers must not be re-issued.
	ErrDropped = errors.New("offset: process queue dropped")

	// ErrBackpressure is returned by ProcessQueue.Deliver when the batch
	// would take a non-empty buffer past TableOptions.MaxBuffered or
	// MaxBufferedBytes. Nothing is buffered; the puller should retry the same
	// batch later (after the consumer has taken some messages).
	ErrBackpressure = errors.New("offset: process queue buffer full")
)

// EndError is the error an offset past the queue's end gets. It wraps
// ErrBeyondEnd and says where the queue ends now.
type EndError struct {
	Op           string // "commit", "fenced commit", "reset"
	Group, Topic string // the key's group and topic
	QueueID      int    // the key's queue
	Offset       int64  // the offset asked for
	Max          int64  // the queue's end (Bounds.MaxOffset)
}

// Error implements error.
func (e *EndError) Error() string {
	return fmt.Sprintf("offset: %s %s/%s/%d at %d: the queue ends at %d: %v",
		e.Op, e.Group, e.Topic, e.QueueID, e.Offset, e.Max, ErrBeyondEnd)
}

// Unwrap makes errors.Is(err, ErrBeyondEnd) true.
func (e *EndError) Unwrap() error { return ErrBeyondEnd }
