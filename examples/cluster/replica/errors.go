package replica

import (
	"errors"
	"fmt"

	"github.com/brokercore/brokercore/pop"
)

// Errors a node returns, wrapped with %w and the details.
var (
	// ErrNotLeader: the operation needs the leader and this node is not
	// it; nothing was proposed. The error is a *NotLeaderError naming the
	// leader when one is known (errors.As), for the host to redirect.
	ErrNotLeader = errors.New("not the leader")
	// ErrNotCommitted: raft did not commit the entry (leadership lost,
	// timeout, shutdown). A produce that got it was not acknowledged; it
	// may still show up if a new leader committed it (at-least-once).
	ErrNotCommitted = errors.New("not committed")
	// ErrInvalid: bad input; nothing was proposed.
	ErrInvalid = errors.New("invalid argument")
	// ErrRejected: the replicated state machine refused a committed
	// entry (the store would not take its messages). The decision follows
	// from the entry's bytes, so every node makes the same one and goes
	// on applying; nothing of the refused batch was stored.
	ErrRejected = errors.New("entry rejected by the state machine")
	// ErrDuplicateMember: a membership change names a node id or address
	// that is already a member; the configuration is unchanged.
	ErrDuplicateMember = errors.New("duplicate member")
	// ErrUnreachable: the node to add did not answer; the configuration is
	// unchanged.
	ErrUnreachable = errors.New("member unreachable")
	// ErrUnknownMember: a removal names no member.
	ErrUnknownMember = errors.New("unknown member")
	// ErrLastVoter: removing the only voter would leave no cluster.
	ErrLastVoter = errors.New("last voter")
	// ErrForeignDataDir: the data directory belongs to another node or
	// cluster; the node refuses to start on it.
	ErrForeignDataDir = errors.New("data directory belongs to another node or cluster")
	// ErrDiverged: the local store and the replicated log disagree; the
	// node stops applying rather than serve different data.
	ErrDiverged = errors.New("local store diverged from the log")
	// ErrStaleProgress: a scheduler delivery did not start from the
	// replicated progress (another delivery got there first); nothing of
	// it was applied, and the leader restarts its scheduler from the
	// replicated progress.
	ErrStaleProgress = errors.New("scheduler delivery from stale progress")
	// ErrStaleTerm: a fenced entry (a transaction's records, txn.go) was
	// committed in another raft term than the leader term that proposed
	// it; nothing of it was applied, on any node.
	ErrStaleTerm = errors.New("entry proposed for another leader term")
	// ErrSnapshotTooLarge: the replicated small state (mostly consumer
	// offsets) is over DefaultMaxSnapshotState; no snapshot is taken (raft
	// keeps its log and tries again), every node keeps running.
	ErrSnapshotTooLarge = errors.New("snapshot state too large")
	// ErrClosed: the node was closed.
	ErrClosed = errors.New("node closed")
	// ErrStaleEpoch is pop's and offset's one fencing error.
	ErrStaleEpoch = pop.ErrStaleEpoch
)

// NotLeaderError is the error of an operation that needs the leader on a
// node that is not it. errors.Is(err, ErrNotLeader) holds.
type NotLeaderError struct {
	Node           string // the node that refused
	LeaderID       string // the leader's raft id, "" when none is known
	LeaderRaftAddr string // its raft address
	LeaderAddr     string // its client address (Config.Addr), "" when unknown
	Group          int    // the raft group refused in (Groups), 0 for a Node of its own
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return fmt.Sprintf("node %s: no leader known: %v", e.Node, ErrNotLeader)
	}
	return fmt.Sprintf("node %s: leader is %s at %s (addr %q): %v", e.Node, e.LeaderID, e.LeaderRaftAddr, e.LeaderAddr, ErrNotLeader)
}

// Is makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
