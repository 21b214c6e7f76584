package replicated

import (
	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

// A deleted topic's data and a deleted group's committed offsets are
// replicated state, not tables: the leader logs a DELETE_TOPIC_IN_BROKER
// (a DELETE_SUBSCRIPTIONGROUP with cleanOffset) in the raft entry that
// releases the topic's messages and every group's offsets of it
// (replica.Node.DeleteTopic; drops the group's offsets:
// replica.Node.ForgetGroup), so the delete is never logged without the
// release nor the release without it, and every node drops the same
// messages and offsets at the same point of its log. The logged change
// is then applied to every node's tables as any other (tables.go), each
// node's own offset table (the broker's views) cleared with it.
//
// The release happens whatever the broker answers the logged change, so
// it is used only for a change the broker accepts by its name rules
// (broker.CheckDeleteTopic, brokercore.CheckGroupName); another is logged
// alone, and refused alike on every node.

// logChange logs one table change (its frame in m) through raft: with the
// release its delete makes, or alone.
func (t *tables) logChange(req *wire.Command, m *store.Message) ([]*store.Message, error) {
	switch topic, group := req.ExtFields["topic"], req.ExtFields["groupName"]; {
	case req.Code == broker.CodeDeleteTopicInBroker && broker.CheckDeleteTopic(topic) == nil:
		return t.n.DeleteTopic(topic, m)
	case req.Code == broker.CodeDeleteSubscriptionGroup && req.ExtFields["cleanOffset"] == "true" &&
		brokercore.CheckGroupName(group) == nil:
		return t.n.ForgetGroup(group, m)
	}
	return t.n.ProduceSystem(m)
}
