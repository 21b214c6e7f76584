package replicated

import (
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// A deleted topic's data and a deleted group's committed offsets are
// replicated state, not tables: once the leader applied the logged change
// (DELETE_TOPIC_IN_BROKER, DELETE_SUBSCRIPTIONGROUP with cleanOffset) it
// releases them through raft (replica.Node.DeleteTopic, ForgetGroup), and
// every node drops the same messages and offsets at the same point of its
// log. The admin is answered once both are done. If the leader loses its
// leadership in between, the answer is SERVICE_NOT_AVAILABLE and the route
// is gone while the data stays: the delete repeated (both steps are
// idempotent) finishes it, as a single broker's delete after a kill. Each
// node's own offset table (the broker's views) is cleared as each applies
// the logged change.

// release does the replicated half of a delete the leader applied with
// resp; another change, or a refused one, is answered resp as it is.
func (t *tables) release(req, resp *wire.Command) *wire.Command {
	if resp.Code != wire.Success {
		return resp
	}
	var err error
	switch {
	case req.Code == broker.CodeDeleteTopicInBroker:
		err = t.n.DeleteTopic(req.ExtFields["topic"])
	case req.Code == broker.CodeDeleteSubscriptionGroup && req.ExtFields["cleanOffset"] == "true":
		err = t.n.ForgetGroup(req.ExtFields["groupName"])
	default:
		return resp
	}
	if err != nil {
		t.log.Warn("delete applied, its data not released: the delete repeated finishes it", "code", req.Code, "err", err)
		return wire.NewResponse(req, wire.ServiceNotAvailable, "deleted, data not released yet (repeat the delete): "+err.Error())
	}
	return resp
}
