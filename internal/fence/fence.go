// Package fence holds the one sentinel of epoch fencing that offset and pop
// both answer, so errors.Is matches either package's name for it.
package fence

import "errors"

// ErrStaleEpoch: a commit carried an epoch other than the queue's current
// one (an offset reset happened since the committer read its state).
// offset.ErrStaleEpoch and pop.ErrStaleEpoch are this same value.
var ErrStaleEpoch = errors.New("stale epoch: the queue's offset was reset")
