package namesrv

import (
	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/meta"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Admin request codes (Apache RocketMQ's RequestCode) the name server
// serves.
const (
	CodeGetBrokerClusterInfo          int16 = 106
	CodeGetAllTopicListFromNameServer int16 = 206
	CodeDeleteTopicInNamesrv          int16 = 216
	codeInvalidParameter              int16 = 29
)

// Lister and Remover are the optional capabilities of Topics the admin
// requests use (the broker package's *Topics has both).
type (
	Lister  interface{ List() []string }
	Remover interface{ Remove(topic string) error }
)

// admin serves the name server's admin requests; nil means req is not one.
func (ns *NameServer) admin(req *wire.Command) *wire.Command {
	switch req.Code {
	case CodeGetAllTopicListFromNameServer:
		l, ok := ns.topics.(Lister)
		if !ok {
			return nil
		}
		resp := wire.NewResponse(req, wire.Success, "")
		resp.Body = meta.TopicListBody(l.List())
		return resp
	case CodeDeleteTopicInNamesrv:
		r, ok := ns.topics.(Remover)
		if !ok {
			return nil
		}
		topic := req.ExtFields["topic"]
		if err := brokercore.CheckTopicName(topic); err != nil {
			return wire.NewResponse(req, codeInvalidParameter, err.Error())
		}
		if err := r.Remove(topic); err != nil {
			return wire.NewResponse(req, wire.SystemError, err.Error())
		}
		ns.log.Info("topic deleted", "topic", topic)
		return wire.NewResponse(req, wire.Success, "")
	case CodeGetBrokerClusterInfo:
		resp := wire.NewResponse(req, wire.Success, "")
		resp.Body = meta.ClusterInfoBody(ns.opts.Cluster, ns.opts.BrokerName, ns.opts.BrokerAddr)
		return resp
	}
	return nil
}

// routeFor is the route of topic with n queues: the read and write queue
// numbers and permission an admin set (Options.TopicConfig), else n and
// read-write.
func (ns *NameServer) routeFor(topic string, n int) []byte {
	if ns.opts.TopicConfig != nil {
		if read, write, perm, ok := ns.opts.TopicConfig(topic); ok {
			return ns.route(read, write, perm)
		}
	}
	return ns.Route(n)
}
