package replicated

import (
	"time"

	"github.com/brokercore/brokercore/examples/cluster/replica"
)

// gtimers is the gRPC server's Timers (RecallMessage): the leader's
// replicated scheduler cancels the timer, and the cancel is part of the
// scheduler's replicated progress, so a later leader keeps it. A follower
// never gets here with a recall: it forwards the call to the leader
// (grpc.go's leaderOnly); a node that stopped leading answers UNAVAILABLE
// and the client retries.
type gtimers struct{ n *replica.Node }

func (g gtimers) CancelAt(uniqKey string, at time.Time) error {
	return grpcErr(g.n.CancelTimerAt(uniqKey, at))
}
