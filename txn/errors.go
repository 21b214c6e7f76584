package txn

import (
	"errors"
	"fmt"
)

// ErrInvalid reports bad input: a nil message, an empty group, an empty or
// transactional system topic, a negative option. Nothing was changed.
var ErrInvalid = errors.New("txn: invalid argument")

// ErrDelayNotSupported reports a transactional message with a delay level or
// a timer property: RocketMQ does not deliver transactional messages late.
// It wraps ErrInvalid.
var ErrDelayNotSupported = fmt.Errorf("%w: transactional messages cannot be delayed or timed", ErrInvalid)

// ErrNotFound reports an ID that names no transaction the Manager knows: not
// a half message, removed by retention, or closed longer ago than
// Options.Remember transactions.
var ErrNotFound = errors.New("txn: no such transaction")

// ErrAlreadyResolved reports a commit of a rolled-back transaction or a
// rollback of a committed one. Nothing was changed.
var ErrAlreadyResolved = errors.New("txn: transaction already resolved the other way")

// ErrUncertain reports a transaction whose last append failed in a way that
// may or may not have landed, while the log still fails. The Manager never
// guesses: it settles such a transaction as soon as an append of its own (a
// probe record, on the next End of it or at the driver's next tick)
// succeeds and the log read after it says whether the records landed. A
// *store.Store that failed keeps failing until it is reopened, so there it
// lasts until a restart.
var ErrUncertain = errors.New("txn: outcome of an earlier append unknown while the log fails")

// ErrClosed is the answer of every call after Close.
var ErrClosed = errors.New("txn: closed")

// ErrCorrupt reports a damaged progress file; New then reads the log from
// its oldest record instead (it is only logged, never returned by New).
var ErrCorrupt = errors.New("txn: corrupt progress")
