package grpcapi_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

// faultProxy sits between a stock v5 client and the broker and forwards
// every call. It plays the network and the fixed client of the first field
// report: the first ReceiveMessage that carries messages is withheld until
// the client's deadline (the answer is lost), and the next receive is sent
// with that lost receive's attempt id, as the Java client does (v5.1.4
// puts a fresh id on every request).
type faultProxy struct {
	v2.UnimplementedMessagingServiceServer
	up   v2.MessagingServiceClient
	gs   *grpc.Server
	addr string

	mu        sync.Mutex
	lostID    string // attempt id of the withheld answer
	lost      []*v2.Message
	retried   bool
	retry     []*v2.Message
	retryCode v2.Code
	retryTook time.Duration
	retryDone chan struct{}
	lostCh    chan struct{} // closed when the first batch was withheld
}

func startFaultProxy(t *testing.T, b *broker) *faultProxy {
	t.Helper()
	cc, err := grpc.NewClient(b.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	cert, err := tls.LoadX509KeyPair(filepath.Join(b.dir, grpcapi.CertFile), filepath.Join(b.dir, grpcapi.KeyFile))
	require.NoError(t, err)
	p := &faultProxy{up: v2.NewMessagingServiceClient(cc), retryDone: make(chan struct{}), lostCh: make(chan struct{})}
	p.gs = grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})))
	v2.RegisterMessagingServiceServer(p.gs, p)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	go func() { _ = p.gs.Serve(ln) }()
	t.Cleanup(func() { p.gs.Stop(); _ = cc.Close() })
	return p
}

func fwd(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	return metadata.NewOutgoingContext(ctx, md)
}

func (p *faultProxy) QueryRoute(ctx context.Context, r *v2.QueryRouteRequest) (*v2.QueryRouteResponse, error) {
	return p.up.QueryRoute(fwd(ctx), r)
}
func (p *faultProxy) Heartbeat(ctx context.Context, r *v2.HeartbeatRequest) (*v2.HeartbeatResponse, error) {
	return p.up.Heartbeat(fwd(ctx), r)
}
func (p *faultProxy) SendMessage(ctx context.Context, r *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
	return p.up.SendMessage(fwd(ctx), r)
}
func (p *faultProxy) QueryAssignment(ctx context.Context, r *v2.QueryAssignmentRequest) (*v2.QueryAssignmentResponse, error) {
	return p.up.QueryAssignment(fwd(ctx), r)
}
func (p *faultProxy) AckMessage(ctx context.Context, r *v2.AckMessageRequest) (*v2.AckMessageResponse, error) {
	return p.up.AckMessage(fwd(ctx), r)
}
func (p *faultProxy) ChangeInvisibleDuration(ctx context.Context, r *v2.ChangeInvisibleDurationRequest) (*v2.ChangeInvisibleDurationResponse, error) {
	return p.up.ChangeInvisibleDuration(fwd(ctx), r)
}
func (p *faultProxy) ForwardMessageToDeadLetterQueue(ctx context.Context, r *v2.ForwardMessageToDeadLetterQueueRequest) (*v2.ForwardMessageToDeadLetterQueueResponse, error) {
	return p.up.ForwardMessageToDeadLetterQueue(fwd(ctx), r)
}
func (p *faultProxy) NotifyClientTermination(ctx context.Context, r *v2.NotifyClientTerminationRequest) (*v2.NotifyClientTerminationResponse, error) {
	return p.up.NotifyClientTermination(fwd(ctx), r)
}

func (p *faultProxy) Telemetry(down grpc.BidiStreamingServer[v2.TelemetryCommand, v2.TelemetryCommand]) error {
	ctx, cancel := context.WithCancel(fwd(down.Context()))
	defer cancel()
	up, err := p.up.Telemetry(ctx)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := down.Recv()
			if err != nil {
				cancel()
				return
			}
			if up.Send(c) != nil {
				return
			}
		}
	}()
	for {
		c, err := up.Recv()
		if err != nil {
			return nil
		}
		if err := down.Send(c); err != nil {
			return err
		}
	}
}

func (p *faultProxy) ReceiveMessage(r *v2.ReceiveMessageRequest, down grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	ctx := down.Context()
	p.mu.Lock()
	phase := 0 // 0: withhold the first batch, 1: the retry, 2: pass through
	switch {
	case p.lostID != "" && !p.retried:
		phase = 1
		p.retried = true
		r.AttemptId = &p.lostID
	case p.lostID != "":
		phase = 2
	}
	p.mu.Unlock()
	start := time.Now()
	up, err := p.up.ReceiveMessage(fwd(ctx), r)
	if err != nil {
		return err
	}
	var frames []*v2.ReceiveMessageResponse
	var msgs []*v2.Message
	code := v2.Code_CODE_UNSPECIFIED
	for {
		f, err := up.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		frames = append(frames, f)
		if m := f.GetMessage(); m != nil {
			msgs = append(msgs, m)
		}
		if st := f.GetStatus(); st != nil {
			code = st.GetCode()
		}
	}
	switch phase {
	case 0:
		if len(msgs) > 0 {
			p.mu.Lock()
			p.lostID, p.lost = r.GetAttemptId(), msgs
			p.mu.Unlock()
			close(p.lostCh)
			<-ctx.Done() // the answer is lost: the client's deadline passes
			return ctx.Err()
		}
	case 1:
		p.mu.Lock()
		p.retry, p.retryCode, p.retryTook = msgs, code, time.Since(start)
		p.mu.Unlock()
		close(p.retryDone)
	}
	for _, f := range frames {
		if err := down.Send(f); err != nil {
			return err
		}
	}
	return nil
}
