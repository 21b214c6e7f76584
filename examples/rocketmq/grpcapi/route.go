package grpcapi

import (
	"context"
	"net"
	"strconv"
	"strings"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/consumer"
)

// acceptAll is every message type a queue accepts: the producer refuses to
// send a type a route's queue does not list. PRIORITY (RocketMQ 5.4) and
// LITE (5.5) are not among them: see unsupportedType and
// SyncLiteSubscription.
var acceptAll = []v2.MessageType{v2.MessageType_NORMAL, v2.MessageType_FIFO, v2.MessageType_DELAY, v2.MessageType_TRANSACTION}

// typedAccept is the accepted types of a topic with a message.type.
var typedAccept = map[string][]v2.MessageType{
	"NORMAL": {v2.MessageType_NORMAL}, "FIFO": {v2.MessageType_FIFO},
	"DELAY": {v2.MessageType_DELAY}, "TRANSACTION": {v2.MessageType_TRANSACTION},
}

// acceptTypes is what a topic's queues accept: its message.type
// (Options.TopicMessageType), or every supported type.
func (s *Server) acceptTypes(topic string) []v2.MessageType {
	if s.opts.TopicMessageType != nil {
		if ts, ok := typedAccept[s.opts.TopicMessageType(topic)]; ok {
			return ts
		}
	}
	return acceptAll
}

// validGroup, validTopic, validReadTopic and validTopicName are the
// library's name rules: a group name (brokercore.CheckGroupName); a topic
// a client may send to — not one the core reserves for the scheduler,
// transactions, retries or dead letters (brokercore.CheckClientTopic); a
// topic a client may route or receive from — any valid name but the
// reserved ones other than retry and dead-letter topics, which consumers
// read; and any topic name, for a message already delivered
// (brokercore.CheckTopicName).
func validGroup(n string) bool     { return brokercore.CheckGroupName(n) == nil }
func validTopic(n string) bool     { return brokercore.CheckClientTopic(n) == nil }
func validTopicName(n string) bool { return brokercore.CheckTopicName(n) == nil }

func validReadTopic(n string) bool {
	if !validTopicName(n) {
		return false
	}
	readable := strings.HasPrefix(n, brokercore.RetryPrefix) || strings.HasPrefix(n, brokercore.DeadLetterPrefix)
	return readable || !brokercore.ReservedTopic(n)
}

// endpoints is the address clients are told to use for every later call:
// Options.Advertise, else the access point the client reached us by, else
// the first listener's address.
func (s *Server) endpoints(accessPoint *v2.Endpoints) *v2.Endpoints {
	if s.opts.Advertise != "" {
		if e := parseAdvertise(s.opts.Advertise); e != nil {
			return e
		}
	}
	if len(accessPoint.GetAddresses()) > 0 {
		return accessPoint
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lns {
		if e := parseEndpoints(l.Addr().String()); e != nil {
			return e
		}
	}
	return parseEndpoints("127.0.0.1:8081")
}

// parseAdvertise parses Options.Advertise: one address, or several
// separated by ";" (the nodes of a replicated cluster: the v5 client
// connects to one of them and, when it fails, to another), all IP
// literals or all one name.
func parseAdvertise(s string) *v2.Endpoints {
	var out *v2.Endpoints
	for _, a := range strings.Split(s, ";") {
		e := parseEndpoints(strings.TrimSpace(a))
		if e == nil {
			return nil
		}
		if out == nil {
			out = e
			continue
		}
		if e.Scheme != out.Scheme || e.Scheme == v2.AddressScheme_DOMAIN_NAME {
			return nil
		}
		out.Addresses = append(out.Addresses, e.Addresses...)
	}
	return out
}

func parseEndpoints(hostport string) *v2.Endpoints {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil
	}
	scheme := v2.AddressScheme_DOMAIN_NAME
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() {
			host, ip = "127.0.0.1", net.IPv4(127, 0, 0, 1)
		}
		scheme = v2.AddressScheme_IPv6
		if ip.To4() != nil {
			scheme = v2.AddressScheme_IPv4
		}
	}
	return &v2.Endpoints{Scheme: scheme, Addresses: []*v2.Address{{Host: host, Port: int32(port)}}}
}

// queues is a topic's route: Options.Queues readable and writable queues in
// a stable order (the client compares routes index by index and sends a
// FIFO message to queues[hash(group) mod n]).
func (s *Server) queues(topic *v2.Resource, n int, ep *v2.Endpoints) []*v2.MessageQueue {
	out := make([]*v2.MessageQueue, n)
	for i := range out {
		out[i] = s.queue(topic, int32(i), ep)
	}
	return out
}

func (s *Server) queue(topic *v2.Resource, id int32, ep *v2.Endpoints) *v2.MessageQueue {
	return &v2.MessageQueue{
		Topic:              &v2.Resource{Name: topic.GetName(), ResourceNamespace: topic.GetResourceNamespace()},
		Id:                 id,
		Permission:         v2.Permission_READ_WRITE,
		Broker:             &v2.Broker{Name: s.opts.BrokerName, Id: 0, Endpoints: ep},
		AcceptMessageTypes: s.acceptTypes(topic.GetName()),
	}
}

// queueCount is the topic's number of queues (Options.QueueCount or
// Options.Queues).
func (s *Server) queueCount(topic string) (int, *v2.Status) {
	if s.opts.QueueCount == nil {
		return s.opts.Queues, nil
	}
	n, err := s.opts.QueueCount(topic)
	if err != nil || n <= 0 {
		return 0, status(v2.Code_ILLEGAL_TOPIC, "topic %q: %v", topic, err)
	}
	return n, nil
}

// QueryRoute answers every topic with Options.Queues queues on this broker:
// a topic exists once something is sent to it.
func (s *Server) QueryRoute(ctx context.Context, req *v2.QueryRouteRequest) (*v2.QueryRouteResponse, error) {
	s.seen(ctx)
	name := req.GetTopic().GetName()
	if !validReadTopic(name) {
		return &v2.QueryRouteResponse{Status: s.reject(ctx, "QueryRoute", status(v2.Code_ILLEGAL_TOPIC, "illegal topic name %q", name), "topic", name)}, nil
	}
	n, st := s.queueCount(name)
	if st != nil {
		return &v2.QueryRouteResponse{Status: s.reject(ctx, "QueryRoute", st, "topic", name)}, nil
	}
	return &v2.QueryRouteResponse{Status: ok(), MessageQueues: s.queues(req.GetTopic(), n, s.endpoints(req.GetEndpoints()))}, nil
}

// QueryAssignment gives every push consumer the whole topic on this broker
// as one queue with id -1 (pop mode, as the Apache proxy does): its receive
// pops across all the topic's queues, so one receive loop is enough and no
// queue is left unassigned. It always answers OK with a non-empty list: a
// failed or empty answer makes the client drop its process queues.
func (s *Server) QueryAssignment(ctx context.Context, req *v2.QueryAssignmentRequest) (*v2.QueryAssignmentResponse, error) {
	s.seen(ctx)
	name, group := req.GetTopic().GetName(), req.GetGroup().GetName()
	if !validReadTopic(name) {
		return &v2.QueryAssignmentResponse{Status: s.reject(ctx, "QueryAssignment", status(v2.Code_ILLEGAL_TOPIC, "illegal topic name %q", name), "topic", name, "group", group)}, nil
	}
	if !validGroup(group) {
		return &v2.QueryAssignmentResponse{Status: s.reject(ctx, "QueryAssignment", status(v2.Code_ILLEGAL_CONSUMER_GROUP, "illegal consumer group %q", group), "topic", name, "group", group)}, nil
	}
	mq := s.queue(req.GetTopic(), -1, s.endpoints(req.GetEndpoints()))
	return &v2.QueryAssignmentResponse{Status: ok(), Assignments: []*v2.Assignment{{MessageQueue: mq}}}, nil
}

// Heartbeat keeps a client alive: consumers are registered with their group
// in the consumer registry, which forgets them when heartbeats stop.
func (s *Server) Heartbeat(ctx context.Context, req *v2.HeartbeatRequest) (*v2.HeartbeatResponse, error) {
	id := clientID(ctx)
	group := req.GetGroup().GetName()
	if st := s.claim(ctx, "Heartbeat", id); st != nil {
		return &v2.HeartbeatResponse{Status: st}, nil
	}
	s.clients.touch(id, s.opts.Now(), func(c *clientInfo) {
		if group != "" {
			c.group = group
		}
	})
	if req.GetClientType() == v2.ClientType_PRODUCER {
		return &v2.HeartbeatResponse{Status: ok()}, nil
	}
	if !validGroup(group) {
		return &v2.HeartbeatResponse{Status: s.reject(ctx, "Heartbeat", status(v2.Code_ILLEGAL_CONSUMER_GROUP, "illegal consumer group %q", group), "group", group)}, nil
	}
	if reg := s.b.Consumers(); reg != nil {
		if _, err := reg.RegisterWithoutSub(group, consumer.Client{ChannelID: id, ClientID: id, Language: language(ctx)}); err != nil {
			return &v2.HeartbeatResponse{Status: s.reject(ctx, "Heartbeat", status(v2.Code_BAD_REQUEST, "%v", err), "group", group)}, nil
		}
	}
	return &v2.HeartbeatResponse{Status: ok()}, nil
}

// NotifyClientTermination forgets the client at once (its in-flight
// messages come back through their invisible time); only the connection
// that registered it may (conns.go).
func (s *Server) NotifyClientTermination(ctx context.Context, req *v2.NotifyClientTerminationRequest) (*v2.NotifyClientTerminationResponse, error) {
	id := clientID(ctx)
	if held, ok := s.clients.forgetBy(id, connOf(ctx), userOf(ctx), s.opts.Now().Add(-s.opts.ClientExpiry)); !ok {
		return &v2.NotifyClientTerminationResponse{Status: s.refuseSpoof(ctx, "NotifyClientTermination", id, held)}, nil
	}
	if group := req.GetGroup().GetName(); group != "" {
		if reg := s.b.Consumers(); reg != nil {
			_ = reg.Unregister(group, consumer.Client{ChannelID: id, ClientID: id})
		}
	}
	return &v2.NotifyClientTerminationResponse{Status: ok()}, nil
}

// SyncLiteSubscription refuses lite-topic subscriptions (RocketMQ 5.5):
// NOT_IMPLEMENTED, the code Apache's proxy gives a request its broker does
// not support (REQUEST_CODE_NOT_SUPPORTED). The stock lite push consumer
// returns it from SubscribeLite.
func (s *Server) SyncLiteSubscription(ctx context.Context, req *v2.SyncLiteSubscriptionRequest) (*v2.SyncLiteSubscriptionResponse, error) {
	s.seen(ctx)
	st := status(v2.Code_NOT_IMPLEMENTED, "lite topics are not supported by this broker")
	return &v2.SyncLiteSubscriptionResponse{Status: s.reject(ctx, "SyncLiteSubscription", st, "topic", req.GetTopic().GetName(), "group", req.GetGroup().GetName())}, nil
}

// seen records that the caller is alive.
func (s *Server) seen(ctx context.Context) { s.clients.touch(clientID(ctx), s.opts.Now(), nil) }
