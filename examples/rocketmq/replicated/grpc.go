package replicated

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// The gRPC endpoint (RocketMQ 5's clients) of a replicated node.
//
// Every node serves it. Routes and assignments name every node's gRPC
// address (Peer.GRPCAddr) as the one broker's endpoints: the v5 client
// keeps one connection to one of them, and when a call on it fails with
// UNAVAILABLE (the node died) it dials again and reaches another. A node
// that does not lead forwards the calls that need the leader — SendMessage,
// ReceiveMessage, AckMessage, ChangeInvisibleDuration,
// ForwardMessageToDeadLetterQueue — to the leader's gRPC endpoint, with the
// client's metadata and deadline, and relays the answer; receipt handles
// are the leader's, since pop's state lives there. While no leader is
// known it waits for one (at most DefaultForwardTimeout, within the
// call's deadline), then answers UNAVAILABLE, on which the client
// reconnects and retries. Routes, assignments, heartbeats and Telemetry
// are every node's own.

// forwardedMD marks a call forwarded to the leader: the leader serves it
// itself (two nodes that each think the other leads must not pass it on
// forever).
const forwardedMD = "x-brokercore-forwarded"

// leaderOnly are the calls a follower forwards.
const svc = "/apache.rocketmq.v2.MessagingService/"

var leaderOnly = map[string]bool{
	svc + "SendMessage": true, svc + "ReceiveMessage": true, svc + "AckMessage": true,
	svc + "ChangeInvisibleDuration": true, svc + "ForwardMessageToDeadLetterQueue": true,
	svc + "RecallMessage": true, svc + "EndTransaction": true,
}

// startGRPC starts the node's gRPC endpoint on the listener address
// s.grpcAddr was bound to.
func (s *Server) startGRPC() error {
	f := &gforward{n: s.node, self: s.cfg.ID, addrs: s.grpcAddrs(), conns: map[string]*grpc.ClientConn{},
		wait: DefaultForwardTimeout, log: s.log}
	s.gfwd = f
	var clientAddr func(context.Context) (netip.Addr, bool, error)
	if s.cfg.ACL != nil {
		f.key = replica.DeriveKey(s.cfg.ClusterSecret, grpcForwardPurpose)
		clientAddr = f.clientAddr
	}
	var advertise []string
	for _, a := range f.addrs {
		advertise = append(advertise, a)
	}
	slices.Sort(advertise)
	g, err := grpcapi.New(gcore{st: s.node.Store(), consumers: s.core.consumers, n: s.node}, grpcapi.Options{
		Advertise:          strings.Join(advertise, ";"),
		CertDir:            filepath.Join(s.cfg.Dir, "grpc"),
		Logger:             s.cfg.Logger.With("pkg", "grpc", "node", s.cfg.ID),
		QueueCount:         func(topic string) (int, error) { return s.topics.Ensure(topic, 0) },
		LongPolling:        s.cfg.GRPCLongPolling,
		GroupFIFO:          s.groups.Orderly,
		TopicMessageType:   s.topicConfigs.MessageType,
		Writer:             gwriter{s.node},
		ACL:                s.cfg.ACL, // every node checks every call; the leader again what is forwarded
		ClientAddr:         clientAddr,
		Pop:                gpop{s.node},
		Timers:             gtimers{s.node}, // RecallMessage (recall.go)
		UnaryInterceptors:  []grpc.UnaryServerInterceptor{f.unary},
		StreamInterceptors: []grpc.StreamServerInterceptor{f.stream},
	})
	if err != nil {
		return err
	}
	s.grpc = g
	s.checker.grpc.Store(g)
	s.relay.grpc.Store(g)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.relay.loop(s.stop) // this node's producer groups, to the leader (relay.go)
	}()
	f.longPolling = g.ClientLongPolling
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := g.Serve(s.grpcLn); err != nil && !errors.Is(err, grpcapi.ErrClosed) {
			s.log.Error("listener stopped", "addr", s.grpcAddr, "err", err)
		}
	}()
	return nil
}

// grpcAddrs maps every peer's raft id to its gRPC address (this node's
// own as bound).
func (s *Server) grpcAddrs() map[string]string {
	m := map[string]string{}
	for _, p := range s.cfg.Peers {
		if p.GRPCAddr != "" {
			m[p.ID] = p.GRPCAddr
		}
	}
	m[s.cfg.ID] = s.grpcAddr
	return m
}

// GRPCAddr is the gRPC endpoint's address ("" when not served).
func (s *Server) GRPCAddr() string { return s.grpcAddr }

// gcore is what the gRPC server reads: the replica's store and the node's
// consumer registry. Its pop service and writes are the leader's (gpop,
// gwriter), and it has no scheduler of its own (DELAY messages go through
// the replicated one, which RecallMessage cancels: gtimers).
type gcore struct {
	st        *store.Store
	consumers *consumer.Registry
	n         *replica.Node // its transaction manager while it leads (txn.go)
}

func (c gcore) Store() *store.Store            { return c.st }
func (c gcore) Pop() *pop.Service              { return nil }
func (c gcore) Scheduler() *schedule.Scheduler { return nil }
func (c gcore) Consumers() *consumer.Registry  { return c.consumers }

// gwriter is the gRPC server's Writer on a replica.
type gwriter struct{ n *replica.Node }

func (w gwriter) Append(msgs []*store.Message) error {
	out, err := w.n.Produce(msgs...)
	if err != nil {
		return grpcErr(err)
	}
	for i, m := range out {
		msgs[i].LogOffset, msgs[i].QueueOffset = m.LogOffset, m.QueueOffset
	}
	return nil
}

func (w gwriter) AppendAt(m *store.Message, at time.Time) (*store.Message, error) {
	d, err := w.n.ProduceAt(m, at)
	return d, grpcErr(err)
}

// DeadLetter is a send-back straight to the dead letters (delay level -1).
func (w gwriter) DeadLetter(group string, m *store.Message) error {
	_, err := w.n.SendBack(m, group, -1, 0)
	return grpcErr(err)
}

// gpop is the leader's pop service.
type gpop struct{ n *replica.Node }

func (p gpop) Pop(ctx context.Context, req pop.Request) (pop.Result, error) {
	res, err := p.n.Pop(ctx, req)
	return res, grpcErr(err)
}

func (p gpop) Ack(handle string) error { return grpcErr(p.n.Ack(handle)) }

func (p gpop) ChangeInvisible(handle string, d time.Duration) (string, error) {
	h, err := p.n.ChangeInvisible(handle, d)
	return h, grpcErr(err)
}

// grpcErr maps a replica's error onto grpcapi's, as writeErr does for the
// remoting broker.
func grpcErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrNotCommitted), errors.Is(err, replica.ErrClosed):
		return fmt.Errorf("%w: %w", grpcapi.ErrNotWritable, err)
	case errors.Is(err, replica.ErrInvalid), errors.Is(err, replica.ErrRejected):
		return fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	return err
}

// gforward forwards the leader's calls from a follower (see above).
type gforward struct {
	n     *replica.Node
	self  string
	addrs map[string]string // raft id → gRPC address
	wait  time.Duration
	log   interface{ Info(string, ...any) }
	// longPolling is what a client's settings told this node (the gRPC
	// server's ClientLongPolling), set once the server exists.
	longPolling func(clientID string) time.Duration
	// key marks the forwarded calls with ACL on (acl.go), nil = "1".
	key []byte

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// waitUntil is how long a call waits for a leader to forward to: at most
// f.wait, and half the call's remaining time.
func (f *gforward) waitUntil(ctx context.Context) time.Time {
	wait := f.wait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	return time.Now().Add(wait)
}

// target is the leader's gRPC address for a call to forward, or "" to serve
// it here: this node leads, the call was forwarded already, or no leader
// became known by until (the local handler then answers UNAVAILABLE).
func (f *gforward) target(ctx context.Context, until time.Time) string {
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(forwardedMD)) > 0 {
		return ""
	}
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if f.n.IsLeader() {
			return ""
		}
		if id, _ := f.n.Leader(); id != "" && id != f.self && f.addrs[id] != "" {
			return f.addrs[id]
		}
		select {
		case <-ctx.Done():
			return ""
		case <-timer.C:
			return ""
		case <-tick.C:
		}
	}
}

// again reports whether a forward that failed with err is tried again:
// UNAVAILABLE (the leader died or stepped down; its successor may be
// known in a moment) while there is time left. A unary call that failed
// so may have reached the old leader; the client's own resend would be
// just as ambiguous (deduplicate by message key).
func (f *gforward) again(ctx context.Context, err error, until time.Time) bool {
	if grpcstatus.Code(err) != codes.Unavailable || !time.Now().Before(until) {
		return false
	}
	f.log.Info("forward to the leader failed; trying again", "err", err)
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// client is a MessagingService client of addr (plaintext; one connection
// per address, kept until Close).
func (f *gforward) client(addr string) (v2.MessagingServiceClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errForwarderClosed
	}
	cc := f.conns[addr]
	if cc == nil {
		var err error
		if cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return nil, err
		}
		f.conns[addr] = cc
	}
	return v2.NewMessagingServiceClient(cc), nil
}

// outgoing carries the client's metadata (its id, language, signature)
// and the forwarded mark to the leader; the deadline comes with ctx.
func outgoing(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	out := metadata.MD{}
	for k, v := range in {
		if strings.HasPrefix(k, "x-mq-") || k == "authorization" {
			out[k] = v
		}
	}
	out.Set(forwardedMD, "1")
	return metadata.NewOutgoingContext(ctx, out)
}

func (f *gforward) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !leaderOnly[info.FullMethod] {
		return handler(ctx, req)
	}
	until := f.waitUntil(ctx)
	for {
		addr := f.target(ctx, until)
		if addr == "" {
			return handler(ctx, req)
		}
		c, err := f.client(addr)
		if err != nil {
			return handler(ctx, req)
		}
		resp, err := forwardUnary(f.outgoing(ctx), c, req)
		if errors.Is(err, errNotForwarded) {
			return handler(ctx, req)
		}
		if err == nil || !f.again(ctx, err, until) {
			return resp, err
		}
	}
}

var errNotForwarded = errors.New("not a forwarded call")

func forwardUnary(ctx context.Context, c v2.MessagingServiceClient, req any) (any, error) {
	switch r := req.(type) {
	case *v2.SendMessageRequest:
		return c.SendMessage(ctx, r)
	case *v2.AckMessageRequest:
		return c.AckMessage(ctx, r)
	case *v2.ChangeInvisibleDurationRequest:
		return c.ChangeInvisibleDuration(ctx, r)
	case *v2.ForwardMessageToDeadLetterQueueRequest:
		return c.ForwardMessageToDeadLetterQueue(ctx, r)
	case *v2.RecallMessageRequest:
		return c.RecallMessage(ctx, r)
	case *v2.EndTransactionRequest:
		return c.EndTransaction(ctx, r)
	}
	return nil, errNotForwarded
}

// stream forwards ReceiveMessage: the request is read here, the leader's
// frames relayed as they come, and its ending (status or error) passed on.
// A receive that failed UNAVAILABLE before its first frame is tried again.
func (f *gforward) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != svc+"ReceiveMessage" {
		return handler(srv, ss)
	}
	ctx := ss.Context()
	until := f.waitUntil(ctx)
	addr := f.target(ctx, until)
	if addr == "" {
		return handler(srv, ss)
	}
	req := new(v2.ReceiveMessageRequest)
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	if req.LongPollingTimeout == nil {
		// A SimpleConsumer tells its long-polling time only in its
		// settings, which reached this node, not the leader.
		if v := metadata.ValueFromIncomingContext(ctx, "x-mq-client-id"); len(v) > 0 {
			if d := f.longPolling(v[0]); d > 0 {
				req.LongPollingTimeout = durationpb.New(d)
			}
		}
	}
	for {
		relayed, err := f.relay(ctx, addr, req, ss)
		if relayed || err == nil || !f.again(ctx, err, until) {
			return err
		}
		if addr = f.target(ctx, until); addr == "" {
			return err // the local handler cannot be given the request read already
		}
	}
}

// relay runs one ReceiveMessage on the leader and relays its frames; it
// reports whether any frame was relayed.
func (f *gforward) relay(ctx context.Context, addr string, req *v2.ReceiveMessageRequest, ss grpc.ServerStream) (bool, error) {
	c, err := f.client(addr)
	if err != nil {
		return false, err
	}
	cs, err := c.ReceiveMessage(f.outgoing(ctx), req)
	if err != nil {
		return false, err
	}
	relayed := false
	for {
		resp, err := cs.Recv()
		if errors.Is(err, io.EOF) {
			return relayed, nil
		}
		if err != nil {
			return relayed, err
		}
		if err := ss.SendMsg(resp); err != nil {
			return true, err
		}
		relayed = true
	}
}

func (f *gforward) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, cc := range f.conns {
		_ = cc.Close()
	}
	f.conns = nil
}
