package broker

import (
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// TableChange reports whether code is an admin request that changes the
// broker's tables: UPDATE_AND_CREATE_TOPIC and DELETE_TOPIC_IN_BROKER (the
// topic table and the topic configuration),
// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP and DELETE_SUBSCRIPTIONGROUP (the
// subscription groups). A replicated host puts these in its log and has
// every node apply them, in log order, with ApplyTableChange.
func TableChange(code int16) bool {
	switch code {
	case CodeUpdateAndCreateTopic, CodeDeleteTopicInBroker, CodeUpdateAndCreateSubscriptionGroup, CodeDeleteSubscriptionGroup:
		return true
	}
	return false
}

// ApplyTableChange serves one table change outside any connection (a
// replicated host's log applying it) and answers as Serve would; the same
// request on the same tables gets the same answer and the same change on
// every node. Another request is REQUEST_CODE_NOT_SUPPORTED.
func (b *Broker) ApplyTableChange(req *wire.Command) *wire.Command {
	if !TableChange(req.Code) {
		return wire.NewResponse(req, wire.RequestCodeNotSupported, "not a table change")
	}
	return b.admin(nil, req) // none of the four reads the connection
}
