package store

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the store returns wraps one of them, so callers
// test with errors.Is.
var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("store: closed")
	// ErrInvalid is returned for bad input: an empty topic, a negative queue,
	// a nil or oversize message, max < 1. Nothing is written.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrOffsetTooSmall is returned by Read below MinOffset; the error is an
	// *OffsetError carrying the current minimum.
	ErrOffsetTooSmall = errors.New("store: offset below the oldest retained message")
	// ErrCorrupt reports data that fails its checksum or cannot be decoded
	// where it cannot be a torn tail (the middle of the log, an index entry).
	ErrCorrupt = errors.New("store: corrupt data")
	// ErrFailed is returned by every call after a write or fsync failed: the
	// Store stops instead of letting memory and disk disagree. Reopen it.
	ErrFailed = errors.New("store: failed")
)

// OffsetError is the error Read returns below MinOffset. It wraps
// ErrOffsetTooSmall and says where the queue starts now.
type OffsetError struct {
	Topic   string
	QueueID int
	Offset  int64 // the offset asked for
	Min     int64 // the oldest readable offset
}

// Error implements error.
func (e *OffsetError) Error() string {
	return fmt.Sprintf("%v: %s/%d offset %d, min %d", ErrOffsetTooSmall, e.Topic, e.QueueID, e.Offset, e.Min)
}

// Unwrap makes errors.Is(err, ErrOffsetTooSmall) true.
func (e *OffsetError) Unwrap() error { return ErrOffsetTooSmall }

// CorruptError says where the log is damaged in a way that is not a torn
// tail: a bad record with intact records after it, a segment cut short, a
// missing segment. It wraps ErrCorrupt. Repair cuts the log at Segment and
// Position and reports what that loses.
type CorruptError struct {
	Segment  string // path of the log segment (for a missing one, the path it would have)
	Position int64  // byte position of the first bad byte in Segment
	// From and To are the log offsets affected, [From, To): the records
	// that are damaged or missing, and those after them that a cut there
	// would lose (To is -1 when the end is unknown). When the framing
	// around a damaged record is intact, Repair replaces only that record
	// (From) with a tombstone instead of cutting (Reason says so).
	From, To int64
	Reason   string

	kind   damageKind // what Repair does about it
	recEnd int64      // damageRecord: just past the damaged wal entry
}

// damageKind is how Repair deals with a CorruptError.
type damageKind int

const (
	damageCut     damageKind = iota // cut the log at (Segment, Position)
	damageFront                     // segments missing at the front: the log starts later
	damageMissing                   // segments the checkpoint named are missing at the end
	damageRecord                    // one damaged record inside intact framing: replace it with a tombstone
)

// Error implements error.
func (e *CorruptError) Error() string {
	to := "the end of the log"
	if e.To >= 0 {
		to = fmt.Sprint(e.To - 1)
	}
	return fmt.Sprintf("%v: log segment %s position %d: %s; log offsets %d to %s affected (store.Repair cuts there and quarantines the rest)",
		ErrCorrupt, e.Segment, e.Position, e.Reason, e.From, to)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
