package schedule

import "errors"

// ErrInvalid reports bad input: a nil log or message, a level below 1, a
// malformed Options.Levels string, a negative Tick, a timer beyond
// Options.MaxTimerDelay, an empty key to Cancel. Nothing was changed.
var ErrInvalid = errors.New("schedule: invalid argument")

// ErrCorrupt reports a progress file (or stored progress record) that is
// torn or corrupt. The scheduler refuses to guess: starting from zero would
// deliver every delayed message again, starting from the end would lose
// them. (A damaged timer index is not this error: the index is derived
// state and is rebuilt from the log and the progress.)
var ErrCorrupt = errors.New("schedule: corrupt progress")

// ErrDelivered is Cancel's answer for a timer that was already delivered.
var ErrDelivered = errors.New("schedule: timer already delivered")

// ErrCancelled is Cancel's answer for a timer that was already cancelled.
var ErrCancelled = errors.New("schedule: timer already cancelled")

// ErrTimerNotFound is Cancel's answer for a key no timer in the log has (or
// one delivered more than KeepDelivered ago, or removed by retention).
var ErrTimerNotFound = errors.New("schedule: no timer with this key")

// ErrClosed is the answer of Start, Cancel, Delay and At after Close, or once the Log has
// been closed, for a Log with a Done() <-chan struct{} channel (as
// *store.Store has): a scheduler started over a closed log would run loops
// nobody stops.
var ErrClosed = errors.New("schedule: closed")
