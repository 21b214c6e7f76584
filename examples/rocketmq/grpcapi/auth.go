package grpcapi

// Access control of the gRPC listener (Options.ACL): every call is
// authenticated by its v5 signature (MQv2-HMAC-SHA1 over x-mq-date-time)
// and authorized per request before its handler runs, so a refused call
// changes nothing. Refusals answer in the response's Status, as the Apache
// proxy does: UNAUTHORIZED (40100) when the credentials do not prove who
// is calling, FORBIDDEN (40300) when the user may not do it. A refused
// receive answers a status-only frame; a refused Telemetry stream ends with
// the gRPC status Unauthenticated or PermissionDenied (the client's Start
// then fails).
//
// What each request needs (as Apache's DefaultAuthorizationContextBuilder):
// SendMessage, RecallMessage, EndTransaction: Pub on the topic. QueryRoute:
// Pub or Sub on the topic. ReceiveMessage, AckMessage,
// ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue,
// QueryAssignment, PullMessage, offsets: Sub on the group and on the topic.
// A consumer's Heartbeat and NotifyClientTermination: Sub on the group.
// Telemetry settings: Pub on each published topic, Sub on the group and
// each subscribed topic.

import (
	"context"
	"errors"
	"net"
	"net/netip"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/brokercore/brokercore/acl"
)

// aclServerOptions are the interceptors of Options.ACL (none when nil).
func (s *Server) aclServerOptions() []grpc.ServerOption {
	if s.opts.ACL == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.aclUnary), grpc.ChainStreamInterceptor(s.aclStream)}
}

// caller is who a call comes from, once its credentials verified.
type caller struct {
	user string
	ip   netip.Addr
}

// authenticate verifies the call's signature; a non-nil status refuses it.
func (s *Server) authenticate(ctx context.Context) (caller, *v2.Status) {
	var c caller
	if p, ok := peer.FromContext(ctx); ok {
		if ta, ok := remoteAddr(p.Addr).(*net.TCPAddr); ok {
			c.ip = ta.AddrPort().Addr().Unmap()
		}
	}
	if s.opts.ClientAddr != nil {
		ip, ok, err := s.opts.ClientAddr(ctx)
		if err != nil {
			s.log.Warn("grpcapi: call refused", "client", c.ip.String(), "err", err)
			return c, &v2.Status{Code: v2.Code_UNAUTHORIZED, Message: err.Error()}
		}
		if ok {
			c.ip = ip
		}
	}
	user, err := s.opts.ACL.AuthenticateV5(first(ctx, acl.V5AuthorizationHeader), first(ctx, acl.V5DateTimeHeader))
	if err != nil {
		s.log.Info("grpcapi: unauthenticated call", "user", user, "client", c.ip.String(), "err", err)
		return c, &v2.Status{Code: v2.Code_UNAUTHORIZED, Message: err.Error()}
	}
	c.user = user
	return c, nil
}

// first is the first value of a metadata key, without copying the whole
// metadata as FromIncomingContext does.
func first(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// need is one authorization a request needs.
type need struct {
	res acl.Resource
	act acl.Action
}

// needs lists what req needs, appended to ns; ok false for a request that
// names no resource it must (an empty topic or group is then refused as
// FORBIDDEN: nothing can be allowed on no resource).
func needs(ns []need, req any) (_ []need, ok bool) {
	topic := func(r *v2.Resource, act acl.Action) {
		if r.GetName() == "" {
			ok = false
			return
		}
		ns = append(ns, need{acl.Topic(r.GetName()), act})
	}
	group := func(r *v2.Resource) {
		if r.GetName() == "" {
			ok = false
			return
		}
		ns = append(ns, need{acl.Group(r.GetName()), acl.Sub})
	}
	ok = true
	switch r := req.(type) {
	case *v2.QueryRouteRequest:
		topic(r.GetTopic(), acl.Pub|acl.Sub)
	case *v2.SendMessageRequest:
		if len(r.GetMessages()) == 0 {
			return nil, true // the handler refuses an empty send
		}
		for _, m := range r.GetMessages() {
			topic(m.GetTopic(), acl.Pub)
		}
	case *v2.RecallMessageRequest:
		topic(r.GetTopic(), acl.Pub)
	case *v2.EndTransactionRequest:
		topic(r.GetTopic(), acl.Pub)
	case *v2.HeartbeatRequest:
		if isConsumerType(r.GetClientType()) {
			group(r.GetGroup())
		}
	case *v2.NotifyClientTerminationRequest:
		if r.GetGroup().GetName() != "" {
			group(r.GetGroup())
		}
	case *v2.ReceiveMessageRequest:
		group(r.GetGroup())
		topic(r.GetMessageQueue().GetTopic(), acl.Sub)
	case *v2.PullMessageRequest:
		group(r.GetGroup())
		topic(r.GetMessageQueue().GetTopic(), acl.Sub)
	case *v2.UpdateOffsetRequest:
		group(r.GetGroup())
		topic(r.GetMessageQueue().GetTopic(), acl.Sub)
	case *v2.GetOffsetRequest:
		group(r.GetGroup())
		topic(r.GetMessageQueue().GetTopic(), acl.Sub)
	case *v2.QueryOffsetRequest:
		topic(r.GetMessageQueue().GetTopic(), acl.Sub)
	case *v2.AckMessageRequest:
		group(r.GetGroup())
		topic(r.GetTopic(), acl.Sub)
	case *v2.ChangeInvisibleDurationRequest:
		group(r.GetGroup())
		topic(r.GetTopic(), acl.Sub)
	case *v2.ForwardMessageToDeadLetterQueueRequest:
		group(r.GetGroup())
		topic(r.GetTopic(), acl.Sub)
	case *v2.QueryAssignmentRequest:
		group(r.GetGroup())
		topic(r.GetTopic(), acl.Sub)
	case *v2.SyncLiteSubscriptionRequest:
		group(r.GetGroup())
		topic(r.GetTopic(), acl.Sub)
	case *v2.TelemetryCommand:
		st := r.GetSettings()
		if st == nil {
			return nil, true
		}
		for _, t := range st.GetPublishing().GetTopics() {
			topic(t, acl.Pub)
		}
		if sub := st.GetSubscription(); sub != nil {
			group(sub.GetGroup())
			for _, e := range sub.GetSubscriptions() {
				topic(e.GetTopic(), acl.Sub)
			}
		}
	default:
		return nil, false // a request this file does not know: refused
	}
	return ns, ok
}

func isConsumerType(t v2.ClientType) bool {
	switch t {
	case v2.ClientType_PUSH_CONSUMER, v2.ClientType_SIMPLE_CONSUMER, v2.ClientType_PULL_CONSUMER,
		v2.ClientType_LITE_PUSH_CONSUMER:
		return true
	}
	return false
}

// authorize decides every need of req; a non-nil status refuses it.
func (s *Server) authorize(c caller, req any) *v2.Status {
	var buf [4]need // most requests name one or two resources
	ns, ok := needs(buf[:0], req)
	if !ok {
		s.log.Info("grpcapi: request refused: no resource named", "user", c.user, "request", requestName(req))
		return &v2.Status{Code: v2.Code_FORBIDDEN, Message: "acl: the request names no topic or group"}
	}
	for _, n := range ns {
		if _, err := s.opts.ACL.Authorize(c.user, n.res, n.act, c.ip); err != nil {
			s.log.Info("grpcapi: request denied", "user", c.user, "resource", n.res.String(), "action", n.act.String(),
				"client", c.ip.String(), "request", requestName(req))
			return &v2.Status{Code: v2.Code_FORBIDDEN, Message: err.Error()}
		}
	}
	return nil
}

func requestName(req any) string {
	if m, ok := req.(proto.Message); ok {
		return string(m.ProtoReflect().Descriptor().Name())
	}
	return "?"
}

func (s *Server) aclUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c, st := s.authenticate(ctx)
	if st == nil {
		st = s.authorize(c, req)
	}
	if st != nil {
		if resp := refusedResponse(req, st); resp != nil {
			return resp, nil
		}
		return nil, statusError(st)
	}
	return handler(withUser(ctx, c.user), req)
}

// refusedResponse is req's response type carrying only st.
func refusedResponse(req any, st *v2.Status) any {
	switch req.(type) {
	case *v2.QueryRouteRequest:
		return &v2.QueryRouteResponse{Status: st}
	case *v2.HeartbeatRequest:
		return &v2.HeartbeatResponse{Status: st}
	case *v2.SendMessageRequest:
		return &v2.SendMessageResponse{Status: st}
	case *v2.QueryAssignmentRequest:
		return &v2.QueryAssignmentResponse{Status: st}
	case *v2.AckMessageRequest:
		return &v2.AckMessageResponse{Status: st}
	case *v2.ForwardMessageToDeadLetterQueueRequest:
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: st}
	case *v2.UpdateOffsetRequest:
		return &v2.UpdateOffsetResponse{Status: st}
	case *v2.GetOffsetRequest:
		return &v2.GetOffsetResponse{Status: st}
	case *v2.QueryOffsetRequest:
		return &v2.QueryOffsetResponse{Status: st}
	case *v2.EndTransactionRequest:
		return &v2.EndTransactionResponse{Status: st}
	case *v2.NotifyClientTerminationRequest:
		return &v2.NotifyClientTerminationResponse{Status: st}
	case *v2.ChangeInvisibleDurationRequest:
		return &v2.ChangeInvisibleDurationResponse{Status: st}
	case *v2.RecallMessageRequest:
		return &v2.RecallMessageResponse{Status: st}
	case *v2.SyncLiteSubscriptionRequest:
		return &v2.SyncLiteSubscriptionResponse{Status: st}
	}
	return nil
}

// statusError is st as a gRPC error, for the streams that have no status
// field to carry it.
func statusError(st *v2.Status) error {
	code := codes.PermissionDenied
	if st.GetCode() == v2.Code_UNAUTHORIZED {
		code = codes.Unauthenticated
	}
	return grpcstatus.Error(code, st.GetCode().String()+": "+st.GetMessage())
}

// aclStream authenticates a stream once, when it opens. A server stream
// (ReceiveMessage, PullMessage) has exactly one request: it is read and
// decided here, a refusal answers a status frame, and the handler reads
// the request it would have read. A bidirectional stream (Telemetry) has
// every command decided as the handler reads it.
func (s *Server) aclStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c, st := s.authenticate(ss.Context())
	if info.IsClientStream {
		if st != nil {
			return statusError(st)
		}
		return handler(srv, &aclBidi{ServerStream: ss, s: s, c: c, ctx: withUser(ss.Context(), c.user)})
	}
	var req proto.Message
	switch info.FullMethod {
	case v2.MessagingService_ReceiveMessage_FullMethodName:
		req = new(v2.ReceiveMessageRequest)
	case v2.MessagingService_PullMessage_FullMethodName:
		req = new(v2.PullMessageRequest)
	default:
		return grpcstatus.Error(codes.PermissionDenied, "acl: stream not known to the access control")
	}
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	if st == nil {
		st = s.authorize(c, req)
	}
	if st != nil {
		switch req.(type) {
		case *v2.ReceiveMessageRequest:
			return ss.SendMsg(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: st}})
		default:
			return ss.SendMsg(&v2.PullMessageResponse{Content: &v2.PullMessageResponse_Status{Status: st}})
		}
	}
	return handler(srv, &aclRead{ServerStream: ss, req: req})
}

// aclRead hands the handler the request the interceptor already read.
type aclRead struct {
	grpc.ServerStream
	req proto.Message
}

func (a *aclRead) RecvMsg(m any) error {
	if a.req == nil {
		return errors.New("grpcapi: a server stream has one request")
	}
	proto.Merge(m.(proto.Message), a.req)
	a.req = nil
	return nil
}

// aclBidi decides every command of a bidirectional stream as it is read.
type aclBidi struct {
	grpc.ServerStream
	s   *Server
	c   caller
	ctx context.Context // the stream's, with the caller's access key
}

func (a *aclBidi) Context() context.Context { return a.ctx }

func (a *aclBidi) RecvMsg(m any) error {
	if err := a.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if st := a.s.authorize(a.c, m); st != nil {
		return statusError(st)
	}
	return nil
}
