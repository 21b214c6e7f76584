package grpcapi

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/brokercore/brokercore/store"
)

// Limits of a sent message's parts.
const (
	maxMessageIDLen = 128
	maxGroupLen     = 255
	maxTagLen       = 255
	maxKeyLen       = 255
	maxPropsBytes   = 16 << 10
)

// timer is the scheduler's timer capability (schedule.Scheduler.At): the
// rewritten message is appended and delivered to its topic at t.
type timer interface {
	At(m *store.Message, t time.Time) (*store.Message, error)
}

// SendMessage stores the request's messages as one atomic batch: every
// message valid, or nothing stored and the first problem answered with its
// code. Each stored message gets an OK entry with the id the client sent.
func (s *Server) SendMessage(ctx context.Context, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
	s.seen(ctx)
	if len(req.GetMessages()) == 0 {
		return &v2.SendMessageResponse{Status: s.reject(ctx, "SendMessage", status(v2.Code_MESSAGE_CORRUPTED, "no message to send"))}, nil
	}
	msgs := make([]*store.Message, 0, len(req.GetMessages()))
	first := req.GetMessages()[0].GetTopic()
	for _, pm := range req.GetMessages() {
		if pm.GetTopic().GetName() != first.GetName() || pm.GetTopic().GetResourceNamespace() != first.GetResourceNamespace() {
			return &v2.SendMessageResponse{Status: s.reject(ctx, "SendMessage", status(v2.Code_MESSAGE_CORRUPTED, "topic in message is not same"), "topic", first.GetName())}, nil
		}
		m, st := s.fromProto(pm)
		if st != nil {
			return &v2.SendMessageResponse{Status: s.reject(ctx, "SendMessage", st, "topic", pm.GetTopic().GetName())}, nil
		}
		msgs = append(msgs, m)
	}
	if resp, err := s.sendHalf(ctx, req, msgs); resp != nil || err != nil { // transaction.go
		return resp, err
	}
	if s.opts.Writer != nil {
		return s.write(ctx, req, msgs) // writer.go
	}
	if err := s.b.Store().Append(msgs...); err != nil {
		code := v2.Code_INTERNAL_ERROR
		if errors.Is(err, store.ErrInvalid) {
			code = v2.Code_BAD_REQUEST
		}
		s.log.Warn("grpcapi: append failed", "client", clientID(ctx), "topic", msgs[0].Topic, "err", err)
		return &v2.SendMessageResponse{Status: status(code, "storing failed: %v", err)}, nil
	}
	entries := make([]*v2.SendResultEntry, len(msgs))
	for i, m := range msgs {
		pm := req.GetMessages()[i]
		id := pm.GetSystemProperties().GetMessageId()
		entries[i] = &v2.SendResultEntry{Status: ok(), MessageId: id, Offset: m.QueueOffset, RecallHandle: s.recallHandleFor(pm.GetTopic().GetName(), id, m)}
	}
	return &v2.SendMessageResponse{Status: ok(), Entries: entries}, nil
}

// fromProto validates a sent message and builds what is appended (for a
// DELAY message, the scheduler's rewrite). A non-nil status says why not.
func (s *Server) fromProto(pm *v2.Message) (*store.Message, *v2.Status) {
	topic := pm.GetTopic().GetName()
	sp := pm.GetSystemProperties()
	switch {
	case !validTopic(topic):
		return nil, status(v2.Code_ILLEGAL_TOPIC, "illegal topic name %q", topic)
	case sp == nil:
		return nil, status(v2.Code_BAD_REQUEST, "message without system properties")
	case sp.GetMessageId() == "" || len(sp.GetMessageId()) > maxMessageIDLen:
		return nil, status(v2.Code_ILLEGAL_MESSAGE_ID, "message id must be 1..%d characters", maxMessageIDLen)
	case len(pm.GetBody()) == 0:
		return nil, status(v2.Code_MESSAGE_BODY_EMPTY, "message %s has an empty body", sp.GetMessageId())
	case len(pm.GetBody()) > s.opts.MaxBodySize:
		return nil, status(v2.Code_MESSAGE_BODY_TOO_LARGE, "message body of %d bytes is over %d", len(pm.GetBody()), s.opts.MaxBodySize)
	case sp.GetBodyEncoding() == v2.Encoding_GZIP:
		return nil, status(v2.Code_UNSUPPORTED, "GZIP bodies are not supported")
	}
	if sp.Tag != nil {
		t := sp.GetTag()
		if strings.TrimSpace(t) == "" || strings.Contains(t, "|") || len(t) > maxTagLen {
			return nil, status(v2.Code_ILLEGAL_MESSAGE_TAG, "illegal tag %q", t)
		}
	}
	for _, k := range sp.GetKeys() {
		if strings.TrimSpace(k) == "" || len(k) > maxKeyLen {
			return nil, status(v2.Code_ILLEGAL_MESSAGE_KEY, "illegal key %q", k)
		}
	}
	props := make(map[string]string, len(pm.GetUserProperties())+4)
	size := 0
	for k, v := range pm.GetUserProperties() {
		if k == "" || systemProps[k] {
			return nil, status(v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "property key %q is reserved", k)
		}
		size += len(k) + len(v)
		props[k] = v
	}
	if size > maxPropsBytes {
		return nil, status(v2.Code_MESSAGE_PROPERTIES_TOO_LARGE, "properties of %d bytes are over %d", size, maxPropsBytes)
	}
	props[PropUniqKey] = sp.GetMessageId()
	props[PropCluster] = s.opts.Cluster
	// The tag and keys are RocketMQ properties too, as Apache's proxy
	// stores them: remoting consumers read (and filter by) these.
	if sp.Tag != nil {
		props[PropTags] = sp.GetTag()
	}
	if len(sp.GetKeys()) > 0 {
		props[PropKeys] = strings.Join(sp.GetKeys(), " ")
	}
	if sp.GetBornHost() != "" {
		props[PropBornHost] = sp.GetBornHost()
	}
	m := &store.Message{
		Topic:      topic,
		Tags:       sp.GetTag(),
		Keys:       sp.GetKeys(),
		Body:       pm.GetBody(),
		Properties: props,
		BornAt:     sp.GetBornTimestamp().AsTime(),
	}
	if sp.BornTimestamp == nil {
		m.BornAt = s.opts.Now()
	}

	queues, st := s.queueCount(topic)
	if st != nil {
		return nil, st
	}
	if st := unsupportedType(sp); st != nil {
		return nil, st
	}
	typ := sp.GetMessageType()
	if typ == v2.MessageType_MESSAGE_TYPE_UNSPECIFIED {
		switch {
		case sp.MessageGroup != nil:
			typ = v2.MessageType_FIFO
		case sp.DeliveryTimestamp != nil:
			typ = v2.MessageType_DELAY
		default:
			typ = v2.MessageType_NORMAL
		}
	}
	if want := s.acceptTypes(topic); len(want) == 1 && want[0] != typ {
		return nil, status(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "TopicMessageType validate failed, the expected type is %s, but actual type is %s", want[0], typ)
	}
	switch typ {
	case v2.MessageType_NORMAL:
		if sp.MessageGroup != nil || sp.DeliveryTimestamp != nil {
			return nil, status(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a NORMAL message has no message group or delivery time")
		}
		m.QueueID = int(s.rr.Add(1) % uint64(queues))
		return m, nil
	case v2.MessageType_FIFO:
		g := sp.GetMessageGroup()
		if strings.TrimSpace(g) == "" || len(g) > maxGroupLen {
			return nil, status(v2.Code_ILLEGAL_MESSAGE_GROUP, "illegal message group %q", g)
		}
		if sp.DeliveryTimestamp != nil {
			return nil, status(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a FIFO message has no delivery time")
		}
		props[PropMessageGroup] = g
		m.QueueID = groupQueue(g, queues)
		return m, nil
	case v2.MessageType_DELAY:
		if sp.DeliveryTimestamp == nil || !sp.GetDeliveryTimestamp().IsValid() {
			return nil, status(v2.Code_ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery time")
		}
		if sp.MessageGroup != nil {
			return nil, status(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a DELAY message has no message group")
		}
		m.QueueID = int(s.rr.Add(1) % uint64(queues))
		return s.delay(m, sp.GetDeliveryTimestamp().AsTime())
	case v2.MessageType_TRANSACTION:
		return s.asTransactional(m, sp, queues) // transaction.go
	default:
		return nil, status(v2.Code_BAD_REQUEST, "unknown message type %v", typ)
	}
}

// unsupportedType refuses RocketMQ 5.4's priority and 5.5's lite-topic
// messages, by their type or by their field alone (a message of another
// type carrying one would lose it silently otherwise). The code is the
// one Apache's proxy answers a message type its topic does not accept
// (TopicMessageTypeValidator): no topic here accepts these types, and no
// route lists them (acceptAll).
func unsupportedType(sp *v2.SystemProperties) *v2.Status {
	switch {
	case sp.GetMessageType() == v2.MessageType_PRIORITY || sp.Priority != nil:
		return status(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "priority messages are not supported by this broker: its topics accept NORMAL, FIFO, DELAY and TRANSACTION messages")
	case sp.GetMessageType() == v2.MessageType_LITE || sp.LiteTopic != nil:
		return status(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "lite-topic messages are not supported by this broker: its topics accept NORMAL, FIFO, DELAY and TRANSACTION messages")
	}
	return nil
}

// delay hands m to the scheduler's timers; a time already passed is a
// normal message stored at once.
func (s *Server) delay(m *store.Message, at time.Time) (*store.Message, *v2.Status) {
	m.Properties[PropDeliveryTime] = strconv.FormatInt(at.UnixMilli(), 10)
	if !at.After(s.opts.Now()) || s.opts.Writer != nil {
		return m, nil // a Writer stores it through its own scheduler
	}
	var sched any = s.b.Scheduler()
	tm, okTimer := sched.(timer)
	if s.b.Scheduler() == nil || !okTimer {
		return nil, status(v2.Code_UNSUPPORTED, "delivery times are not supported: the broker has no timer scheduler")
	}
	out, err := tm.At(m, at)
	if err != nil {
		return nil, status(v2.Code_ILLEGAL_DELIVERY_TIME, "delivery time %s: %v", at.UTC().Format(time.RFC3339Nano), err)
	}
	return out, nil
}

// GroupQueue is the queue a FIFO message group's messages go to: a stable
// hash, so all of a group's messages share one queue and keep their order
// (and groups on different queues never wait for each other).
func (s *Server) GroupQueue(topic, group string) (int, error) {
	n, st := s.queueCount(topic)
	if st != nil {
		return 0, errors.New(st.GetMessage())
	}
	return groupQueue(group, n), nil
}

func groupQueue(group string, queues int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	return int(h.Sum32() % uint32(queues))
}
