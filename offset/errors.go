package offset

import "errors"

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
	// committer has not seen a reset (or carries one from before a Remove).
	// Nothing is changed.
	ErrStaleEpoch = errors.New("offset: stale epoch")

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
