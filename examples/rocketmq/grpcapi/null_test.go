package grpcapi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/pop"
)

// nullServer is the floor of the gRPC benchmarks: the program's real
// grpcapi.Server — QueryRoute, Heartbeat, Telemetry and its settings, TLS
// with ALPN h2 and the plaintext sniff, the same gRPC server options — with
// the three calls the benchmarks time answered without broker work:
// SendMessage answers OK with the ids the client sent at once (nothing
// validated or stored), ReceiveMessage answers the same prebuilt batch
// (frames rendered by the real code from one real pop of 32 messages),
// AckMessage answers OK at once. Whatever the client and grpc-go cost is
// still paid; no broker code runs in those calls.
type nullServer struct {
	*grpcapi.Server
	frames atomic.Pointer[[]*v2.ReceiveMessageResponse]
	sent   atomic.Int64
	acks   atomic.Int64
}

var nullOK = &v2.Status{Code: v2.Code_OK, Message: "OK"}

func (n *nullServer) SendMessage(_ context.Context, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
	entries := make([]*v2.SendResultEntry, len(req.GetMessages()))
	for i, m := range req.GetMessages() {
		entries[i] = &v2.SendResultEntry{Status: nullOK, MessageId: m.GetSystemProperties().GetMessageId(), Offset: n.sent.Add(1)}
	}
	return &v2.SendMessageResponse{Status: nullOK, Entries: entries}, nil
}

func (n *nullServer) ReceiveMessage(_ *v2.ReceiveMessageRequest, stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	if f := n.frames.Load(); f != nil {
		for _, resp := range *f {
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
		return stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: nullOK}})
	}
	return stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{
		Status: &v2.Status{Code: v2.Code_MESSAGE_NOT_FOUND, Message: "no batch prepared"}}})
}

func (n *nullServer) AckMessage(_ context.Context, req *v2.AckMessageRequest) (*v2.AckMessageResponse, error) {
	out := make([]*v2.AckMessageResultEntry, len(req.GetEntries()))
	for i, e := range req.GetEntries() {
		out[i] = &v2.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: nullOK}
	}
	n.acks.Add(int64(len(out)))
	return &v2.AckMessageResponse{Status: nullOK, Entries: out}, nil
}

// nullService is the program's gRPC listener serving a nullServer.
type nullService struct {
	endpoint string
	stop     func()
	srv      *grpcapi.Server
}

func (s *nullService) Addr() string { return s.endpoint }

func (s *nullService) Close() error {
	s.stop()
	return s.srv.Close()
}

// startNull starts the program as rmqtest does (brokercore.Open, the
// remoting listeners, the gRPC server with rmqtest's options) but serves
// gRPC through a nullServer; br.GRPC is its endpoint. It is closed when the
// test ends.
func startNull(t testing.TB) (*rmqtest.Broker, *nullServer) {
	t.Helper()
	br, null, err := newNullProgram(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = br.Close() })
	return br, null
}

// newNullProgram is startNull outside a test (the benchmarks' child
// process): data in dir, Close stops it.
func newNullProgram(dir string) (*rmqtest.Broker, *nullServer, error) {
	var null *nullServer
	br, err := rmqtest.New(server.Config{Dir: dir, Flush: "async",
		GRPC: func(s *server.Server, _ string) (server.Service, error) {
			g, err := grpcapi.New(s.Core(), grpcapi.Options{
				CertDir:    filepath.Join(dir, "grpc"),
				Logger:     s.Logger().With("pkg", "grpc"),
				QueueCount: func(topic string) (int, error) { return s.Topics().Ensure(topic, 0) },
			})
			if err != nil {
				return nil, err
			}
			null = &nullServer{Server: g}
			ep, stop, err := g.ServeOther(null)
			if err != nil {
				_ = g.Close()
				return nil, err
			}
			return &nullService{endpoint: ep, stop: stop, srv: g}, nil
		}})
	return br, null, err
}

// prepareBatch pops 32 real messages of topic from the program's core once
// and keeps their rendered frames as the null server's answer to every
// receive.
func (n *nullServer) prepareBatch(t testing.TB, br *rmqtest.Broker, topic string) {
	t.Helper()
	require.NoError(t, n.prepare(br, topic))
}

func (n *nullServer) prepare(br *rmqtest.Broker, topic string) error {
	if err := fill(br, topic, 32); err != nil {
		return err
	}
	res, err := br.Server.Core().Pop().Pop(context.Background(), pop.Request{Group: "null-prep", Topic: topic, ClientID: "null-prep",
		QueueID: pop.AllQueues, Max: 32, Invisible: time.Hour})
	if err != nil {
		return err
	}
	if len(res.Messages) != 32 {
		return fmt.Errorf("prepared %d messages, want 32", len(res.Messages))
	}
	frames := grpcapi.Frames(res.Messages, 30*time.Second)
	n.frames.Store(&frames)
	return nil
}

// TestNullServerServesTheStockClients: the floor's fake is a server the
// stock producer and simple consumer work against (so the floor
// benchmarks measure sends, receives and acks, not errors): sends are
// acknowledged with their ids, a receive gets the prepared 32 messages,
// and every ack reaches it and is answered OK.
func TestNullServerServesTheStockClients(t *testing.T) {
	br, null := startNull(t)
	topic := "null-t"
	p := newProducer(t, br.GRPC, topic)
	for i := range 10 {
		r, err := p.Send(context.Background(), textMessage(topic, fmt.Sprint("m", i)))
		require.NoError(t, err)
		require.Len(t, r, 1)
		require.NotEmpty(t, r[0].MessageID)
	}
	require.EqualValues(t, 10, null.sent.Load())
	null.prepareBatch(t, br, topic)
	c := newSimpleConsumer(t, br.GRPC, "null-g", topic, time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mvs, err := receive(ctx, c, 32, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, mvs, 32)
	for _, mv := range mvs {
		require.Equal(t, topic, mv.GetTopic())
		require.Len(t, mv.GetBody(), 1024)
		require.NoError(t, c.Ack(ctx, mv))
	}
	require.EqualValues(t, 32, null.acks.Load())
}
