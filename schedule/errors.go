package schedule

import "errors"

// ErrInvalid reports bad input: a nil log or message, a level below 1, a
// malformed Options.Levels string, a negative Tick. Nothing was changed.
var ErrInvalid = errors.New("schedule: invalid argument")

// ErrCorrupt reports a progress file that is torn or corrupt. The scheduler
// refuses to guess: starting from zero would deliver every delayed message
// again, starting from the end would lose them.
var ErrCorrupt = errors.New("schedule: corrupt progress file")
