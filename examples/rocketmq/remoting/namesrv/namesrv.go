package namesrv

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Permission bits of a route's queue data.
const (
	PermRead  = 4
	PermWrite = 2
)

// Topics is the topic table the name server reads routes from and creates
// topics in (the broker package's *Topics).
type Topics interface {
	// Queues returns the topic's queue count and whether it exists.
	Queues(topic string) (int, bool)
	// Ensure creates topic with n queues (the default when n <= 0) unless
	// it exists, and returns its queue count.
	Ensure(topic string, n int) (int, error)
}

// NameServer answers route lookups for the one broker.
type NameServer struct {
	topics Topics
	opts   NameServerOptions
	log    *slog.Logger
}

// NewNameServer returns the name server handler over the topic table.
func NewNameServer(topics Topics, opts NameServerOptions) *NameServer {
	opts = opts.withDefaults()
	return &NameServer{topics: topics, opts: opts, log: opts.Logger.With("server", "namesrv")}
}

type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSysFlag   int    `json:"topicSysFlag"`
}

type brokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}

type routeData struct {
	OrderTopicConf string       `json:"orderTopicConf"`
	QueueDatas     []queueData  `json:"queueDatas"`
	BrokerDatas    []brokerData `json:"brokerDatas"`
}

// Route returns the compact route JSON of a topic with n queues. The client
// parses brokerAddrs by hand: it must hold no spaces.
func (ns *NameServer) Route(n int) []byte {
	return ns.route(n, n, PermRead|PermWrite)
}

// route is the route of a topic with read and write queue numbers and a
// permission: the broker (the leader's address when one is known) and the
// write-only brokers beside it, when the permission lets writes in.
func (ns *NameServer) route(read, write, perm int) []byte {
	addr := ns.opts.BrokerAddr
	if f := ns.opts.LeaderAddr; f != nil {
		if a := f(); a != "" {
			addr = a
		}
	}
	rd := routeData{
		QueueDatas: []queueData{{BrokerName: ns.opts.BrokerName, ReadQueueNums: read, WriteQueueNums: write, Perm: perm}},
		BrokerDatas: []brokerData{{Cluster: ns.opts.Cluster, BrokerName: ns.opts.BrokerName,
			BrokerAddrs: map[string]string{"0": addr}}},
	}
	if f := ns.opts.WriteOnly; f != nil && perm&PermWrite != 0 {
		wo := f()
		for _, name := range slices.Sorted(maps.Keys(wo)) {
			if name == ns.opts.BrokerName || wo[name] == "" {
				continue
			}
			rd.QueueDatas = append(rd.QueueDatas, queueData{BrokerName: name, ReadQueueNums: read, WriteQueueNums: write, Perm: PermWrite})
			rd.BrokerDatas = append(rd.BrokerDatas, brokerData{Cluster: ns.opts.Cluster, BrokerName: name,
				BrokerAddrs: map[string]string{"0": wo[name]}})
		}
	}
	b, _ := json.Marshal(rd)
	return b
}

// Serve implements transport.Handler.
func (ns *NameServer) Serve(_ context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	switch req.Code {
	case wire.CodeGetRouteInfoByTopic:
		topic := req.ExtFields["topic"]
		if err := brokercore.CheckTopicName(topic); err != nil {
			ns.log.Info("rejected request", "code", req.Code, "client", c.RemoteAddr().String(), "topic", topic, "err", err)
			return wire.NewResponse(req, wire.SystemError, err.Error())
		}
		n, ok := ns.topics.Queues(topic)
		if !ok && !ns.opts.NoAutoCreate {
			q := 0
			if strings.HasPrefix(topic, brokercore.RetryPrefix) || strings.HasPrefix(topic, brokercore.DeadLetterPrefix) {
				q = 1
			}
			var err error
			if n, err = ns.topics.Ensure(topic, q); err != nil {
				return wire.NewResponse(req, wire.SystemError, err.Error())
			}
			ok = true
		}
		if !ok {
			return wire.NewResponse(req, wire.TopicNotExist, "No topic route info in name server for the topic: "+topic)
		}
		resp := wire.NewResponse(req, wire.Success, "")
		resp.Body = ns.routeFor(topic, n) // admin.go
		return resp
	default:
		if resp := ns.admin(req); resp != nil { // admin.go
			return resp
		}
		ns.log.Info("rejected request", "code", req.Code, "client", c.RemoteAddr().String(), "err", "request code not supported")
		return wire.NewResponse(req, wire.RequestCodeNotSupported, "request code "+strconv.Itoa(int(req.Code))+" not supported")
	}
}
