package grpcapi_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// recWriter is a Writer that records what the server hands it and stores
// plain batches in the core's store (as a replica does once they commit).
type recWriter struct {
	st   *store.Store
	mu   sync.Mutex
	at   []time.Time
	dead []string
	err  error
}

func (w *recWriter) Append(msgs []*store.Message) error {
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return w.st.Append(msgs...)
}

func (w *recWriter) AppendAt(m *store.Message, at time.Time) (*store.Message, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = append(w.at, at)
	return &store.Message{Topic: m.Topic, QueueOffset: 41}, nil
}

func (w *recWriter) DeadLetter(group string, m *store.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead = append(w.dead, group+"/"+string(m.Body))
	return nil
}

// gatedPop is the core's pop service, refusing with ErrNotWritable while
// closed (a replica that lost the lead).
type gatedPop struct {
	*pop.Service
	mu     sync.Mutex
	closed bool
}

func (p *gatedPop) refuse() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.Join(grpcapi.ErrNotWritable, errors.New("leader is n2"))
	}
	return nil
}

func (p *gatedPop) Ack(h string) error {
	if err := p.refuse(); err != nil {
		return err
	}
	return p.Service.Ack(h)
}

// With a Writer the server stores nothing itself: sends go to Append, a
// DELAY message unrewritten to AppendAt, a forwarded dead letter to
// DeadLetter; the Writer's and the Popper's ErrNotWritable is gRPC's
// UNAVAILABLE (the v5 client reconnects and resends), interceptors run
// first, and several advertised addresses make one route's endpoints.
func TestWriterAndPopperTakeTheWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openCore(t, dir, 16)
	w := &recWriter{st: c.Store()}
	gp := &gatedPop{Service: c.Pop()}
	var intercepted sync.Map
	srv, err := grpcapi.New(c, grpcapi.Options{CertDir: dir, Writer: w, Pop: gp, Advertise: "127.0.0.1:1;127.0.0.1:2",
		UnaryInterceptors: []grpc.UnaryServerInterceptor{func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			intercepted.Store(info.FullMethod, true)
			return h(ctx, req)
		}}})
	require.NoError(t, err)
	addr, err := srv.Listen("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	rc := rawClient(t, addr.String())
	ctx, cancel := context.WithTimeout(withClientID(context.Background(), "writer-test"), 20*time.Second)
	defer cancel()

	rr, err := rc.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "orders"}})
	require.NoError(t, err)
	require.Len(t, rr.GetMessageQueues()[0].GetBroker().GetEndpoints().GetAddresses(), 2)
	_, ok := intercepted.Load("/apache.rocketmq.v2.MessagingService/QueryRoute")
	require.True(t, ok, "the interceptor saw the call")

	resp, err := rc.SendMessage(ctx, sendReq("orders"))
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	require.Equal(t, uint64(1), c.Store().Stats().Messages, "stored by the Writer")

	due := time.Now().Add(time.Hour)
	dreq := sendReq("orders")
	dreq.Messages[0].SystemProperties.MessageType = v2.MessageType_DELAY
	dreq.Messages[0].SystemProperties.DeliveryTimestamp = timestamppb.New(due)
	resp, err = rc.SendMessage(ctx, dreq)
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	require.Equal(t, []time.Time{time.UnixMilli(due.UnixMilli())}, w.at, "a DELAY message goes to AppendAt")
	require.Equal(t, int64(41), resp.GetEntries()[0].GetOffset())
	require.Equal(t, uint64(1), c.Store().Stats().Messages, "nothing for the scheduler in the store")

	msgs, code, err := rawReceive(ctx, rc, "g", "orders", "", 1, time.Second)
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, code)
	require.Len(t, msgs, 1)
	fwd, err := rc.ForwardMessageToDeadLetterQueue(ctx, &v2.ForwardMessageToDeadLetterQueueRequest{Group: &v2.Resource{Name: "g"},
		Topic: msgs[0].GetTopic(), ReceiptHandle: msgs[0].GetSystemProperties().GetReceiptHandle(), MessageId: msgs[0].GetSystemProperties().GetMessageId()})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, fwd.GetStatus().GetCode(), fwd.GetStatus().GetMessage())
	require.Equal(t, []string{"g/" + string(sendReq("orders").Messages[0].Body)}, w.dead)
	require.Zero(t, c.Store().MaxOffset(brokercore.DeadLetterTopic("g"), 0), "the dead letter went to the Writer")

	w.mu.Lock()
	w.err = errors.Join(grpcapi.ErrNotWritable, errors.New("leader is n2"))
	w.mu.Unlock()
	_, err = rc.SendMessage(ctx, sendReq("orders"))
	require.Equal(t, codes.Unavailable, grpcstatus.Code(err), "%v", err)

	gp.mu.Lock()
	gp.closed = true
	gp.mu.Unlock()
	_, err = rc.AckMessage(ctx, &v2.AckMessageRequest{Group: &v2.Resource{Name: "g"}, Topic: msgs[0].GetTopic(),
		Entries: []*v2.AckMessageEntry{{MessageId: msgs[0].GetSystemProperties().GetMessageId(), ReceiptHandle: msgs[0].GetSystemProperties().GetReceiptHandle()}}})
	require.Equal(t, codes.Unavailable, grpcstatus.Code(err), "%v", err)
}

// ClientLongPolling is what a SimpleConsumer's settings told the server.
func TestClientLongPollingFromSettings(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{SettingsHold: -1})
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(withClientID(context.Background(), "lp-client"), 10*time.Second)
	defer cancel()
	require.Zero(t, b.srv.ClientLongPolling("lp-client"))
	s, err := c.Telemetry(ctx)
	require.NoError(t, err)
	simple := v2.ClientType_SIMPLE_CONSUMER
	require.NoError(t, s.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{ClientType: &simple,
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "g"},
			LongPollingTimeout: durationpb.New(7 * time.Second)}}}}}))
	_, err = s.Recv()
	require.NoError(t, err)
	require.Equal(t, 7*time.Second, b.srv.ClientLongPolling("lp-client"))
}

// timerWriter stores a DELAY message as a scheduler would (in TimerTopic,
// its time in PropTimerDeliverMS); cancels records the Timers' cancels.
type timerWriter struct {
	recWriter
	cancels []string
	err     error
}

func (w *timerWriter) AppendAt(m *store.Message, at time.Time) (*store.Message, error) {
	return &store.Message{Topic: schedule.TimerTopic, QueueOffset: 7,
		Properties: map[string]string{schedule.PropTimerDeliverMS: strconv.FormatInt(at.UnixMilli(), 10)}}, nil
}

func (w *timerWriter) CancelAt(key string, at time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.cancels = append(w.cancels, key+"@"+strconv.FormatInt(at.UnixMilli(), 10))
	return nil
}

// With a Writer and Options.Timers a DELAY message's send answers a recall
// handle, and RecallMessage cancels through the Timers (a replicated
// core's leader scheduler); its ErrNotWritable is UNAVAILABLE. Without
// Timers a Writer's sends answer none (RecallMessage is UNSUPPORTED).
func TestWriterTimersServeRecallMessage(t *testing.T) {
	t.Parallel()
	for _, withTimers := range []bool{true, false} {
		dir := t.TempDir()
		c := openCore(t, dir, 16)
		w := &timerWriter{recWriter: recWriter{st: c.Store()}}
		opts := grpcapi.Options{CertDir: dir, Writer: w, BrokerName: "broker-a"}
		if withTimers {
			opts.Timers = w
		}
		srv, err := grpcapi.New(c, opts)
		require.NoError(t, err)
		addr, err := srv.Listen("127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		rc := rawClient(t, addr.String())
		ctx, cancel := context.WithTimeout(withClientID(context.Background(), "recall-test"), 20*time.Second)
		defer cancel()

		due := time.Now().Add(time.Hour)
		dreq := sendReq("orders")
		dreq.Messages[0].SystemProperties.MessageType = v2.MessageType_DELAY
		dreq.Messages[0].SystemProperties.DeliveryTimestamp = timestamppb.New(due)
		resp, err := rc.SendMessage(ctx, dreq)
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
		h := resp.GetEntries()[0].GetRecallHandle()
		if !withTimers {
			require.Empty(t, h, "no handle where RecallMessage cannot use it")
			continue
		}
		require.NotEmpty(t, h)
		rr, err := rc.RecallMessage(ctx, &v2.RecallMessageRequest{Topic: &v2.Resource{Name: "orders"}, RecallHandle: h})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, rr.GetStatus().GetCode(), rr.GetStatus().GetMessage())
		id := dreq.Messages[0].SystemProperties.MessageId
		require.Equal(t, []string{id + "@" + strconv.FormatInt(due.UnixMilli(), 10)}, w.cancels)

		w.mu.Lock()
		w.err = errors.Join(grpcapi.ErrNotWritable, errors.New("leader is n2"))
		w.mu.Unlock()
		_, err = rc.RecallMessage(ctx, &v2.RecallMessageRequest{Topic: &v2.Resource{Name: "orders"}, RecallHandle: h})
		require.Equal(t, codes.Unavailable, grpcstatus.Code(err), "%v", err)
		w.mu.Lock()
		w.err = schedule.ErrTimerNotFound
		w.mu.Unlock()
		rr, err = rc.RecallMessage(ctx, &v2.RecallMessageRequest{Topic: &v2.Resource{Name: "orders"}, RecallHandle: h})
		require.NoError(t, err)
		require.Equal(t, v2.Code_NOT_FOUND, rr.GetStatus().GetCode(), rr.GetStatus().GetMessage())
	}
}
