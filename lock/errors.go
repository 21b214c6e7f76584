package lock

import "errors"

// ErrInvalid reports bad input: an empty group or client ID, a negative
// queue ID, a nil Locker or a non-positive renewal period. Nothing was
// changed.
var ErrInvalid = errors.New("lock: invalid argument")

// ErrRenewTooSlow reports a Keeper renewal period longer than a third of
// the table's MaxLiveTime (the 1:3 rule): with such a period a single late
// renewal lets the lease expire under a live consumer.
var ErrRenewTooSlow = errors.New("lock: renewal period longer than a third of the max live time")

// ErrClosed reports a call on a Keeper after Close.
var ErrClosed = errors.New("lock: keeper closed")
