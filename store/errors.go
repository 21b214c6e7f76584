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
