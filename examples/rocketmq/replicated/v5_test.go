package replicated

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	grpcinsecure "google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The official v5 client (github.com/apache/rocketmq-clients/golang/v5)
// against a replicated cluster's gRPC endpoints.

const (
	v5Topic, v5FIFOTopic = "v5-orders", "v5-fifo"
	v5Group, v5FIFOGroup = "v5-g", "v5-g-fifo" // "-fifo": grpcapi's FIFO groups
)

var v5Creds = credentials.SessionCredentials{}

func v5Config(endpoints []string, group string) *rmq.Config {
	return &rmq.Config{Endpoint: strings.Join(endpoints, ";"), ConsumerGroup: group, Credentials: &v5Creds}
}

// starter starts v5 clients together: each Start waits for the server's
// settings answer (grpcapi's SettingsHold, about 1.5 s), so in parallel.
type starter struct {
	starts []func() error
	after  []func()
}

// add registers a client's Start and what runs once every client started.
func (st *starter) add(start func() error, after func()) {
	st.starts = append(st.starts, start)
	if after != nil {
		st.after = append(st.after, after)
	}
}

func (st *starter) run(t *testing.T) {
	t.Helper()
	done := make(chan error, len(st.starts))
	for _, start := range st.starts {
		go func() { done <- start() }()
	}
	timeout := time.After(30 * time.Second)
	for range st.starts {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-timeout:
			t.Fatal("v5 client Start did not return: settings never answered")
		}
	}
	for _, f := range st.after {
		f()
	}
}

func newV5Producer(t *testing.T, st *starter, endpoints []string) rmq.Producer {
	t.Helper()
	p, err := rmq.NewProducer(v5Config(endpoints, ""), rmq.WithTopics(v5Topic, v5FIFOTopic))
	require.NoError(t, err)
	st.add(p.Start, nil)
	t.Cleanup(func() { _ = p.GracefulStop() })
	return p
}

// v5Send sends one message with key until it is acknowledged (the client
// resends within one Send; the application retries after that).
func v5Send(p rmq.Producer, topic, key, group string, at time.Time, until time.Time) error {
	var last error
	for time.Now().Before(until) {
		m := &rmq.Message{Topic: topic, Body: []byte("body-" + key)}
		m.SetKeys(key)
		if group != "" {
			m.SetMessageGroup(group)
		}
		if !at.IsZero() {
			m.SetDelayTimestamp(at)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := p.Send(ctx, m)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not acknowledged: %w", last)
}

// v5Counter is a SimpleConsumer loop that acks everything it receives and
// counts deliveries by key.
type v5Counter struct {
	mu     sync.Mutex
	seen   map[string]int
	order  map[string][]string // FIFO: keys by message group, in delivery order
	cancel context.CancelFunc
	done   chan struct{}
}

func startV5Consumer(t *testing.T, st *starter, endpoints []string, group, topic string) *v5Counter {
	t.Helper()
	c, err := rmq.NewSimpleConsumer(v5Config(endpoints, group), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	vc := &v5Counter{seen: map[string]int{}, order: map[string][]string{}, cancel: cancel, done: make(chan struct{})}
	loop := func() {
		defer close(vc.done)
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			mvs, err := c.Receive(rctx, 16, 20*time.Second)
			rcancel()
			if err != nil {
				var rs *rmq.ErrRpcStatus
				if !errors.As(err, &rs) || rs.Code != int32(v2.Code_MESSAGE_NOT_FOUND) {
					time.Sleep(50 * time.Millisecond)
				}
				continue
			}
			for _, mv := range mvs {
				vc.mu.Lock()
				k := strings.Join(mv.GetKeys(), " ")
				vc.seen[k]++
				if g := mv.GetMessageGroup(); g != nil {
					vc.order[*g] = append(vc.order[*g], k)
				}
				vc.mu.Unlock()
				_ = c.Ack(ctx, mv)
			}
		}
	}
	started := false
	st.add(c.Start, func() { started = true; go loop() })
	t.Cleanup(func() {
		vc.cancel()
		if started {
			<-vc.done
		}
		_ = c.GracefulStop()
	})
	return vc
}

// startV5Push starts the v5 PushConsumer of group on topic, acking
// everything and counting deliveries by key.
func startV5Push(t *testing.T, st *starter, endpoints []string, group, topic string) *v5Counter {
	t.Helper()
	vc := &v5Counter{seen: map[string]int{}, order: map[string][]string{}}
	c, err := rmq.NewPushConsumer(v5Config(endpoints, group),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}),
		rmq.WithPushConsumptionThreadCount(4),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: func(mv *rmq.MessageView) rmq.ConsumerResult {
			vc.mu.Lock()
			defer vc.mu.Unlock()
			vc.seen[strings.Join(mv.GetKeys(), " ")]++
			return rmq.SUCCESS
		}}))
	require.NoError(t, err)
	st.add(c.Start, nil)
	t.Cleanup(func() { _ = c.GracefulStop() }) // waits the long poll (2 s) + 3 s
	return vc
}

// waitAll waits until every key was received; it reports the redeliveries.
func (vc *v5Counter) waitAll(t *testing.T, what string, keys []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		vc.mu.Lock()
		var missing []string
		redelivered := 0
		for _, k := range keys {
			if vc.seen[k] == 0 {
				missing = append(missing, k)
			}
		}
		for _, n := range vc.seen {
			redelivered += n - 1
		}
		vc.mu.Unlock()
		if len(missing) == 0 {
			t.Logf("%s: %d acknowledged sends all received, %d redeliveries", what, len(keys), redelivered)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d acknowledged sends not received: %v", what, len(missing), len(keys), missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// inOrder checks that each FIFO message group's first deliveries came in
// the order sent (a redelivery may repeat a key; the first sight counts).
func (vc *v5Counter) inOrder(t *testing.T, sent map[string][]string) {
	t.Helper()
	vc.mu.Lock()
	defer vc.mu.Unlock()
	for g, want := range sent {
		var first []string
		for _, k := range vc.order[g] {
			if !slices.Contains(first, k) {
				first = append(first, k)
			}
		}
		require.Equal(t, want, first, "message group %s in order", g)
	}
}

// v5Traffic sends normal, FIFO and delayed messages under the prefix and
// returns the keys sent per kind (delayed ones are due 1 s later).
type v5Sent struct {
	normal, fifo []string
	groups       map[string][]string
}

func (s *v5Sent) send(t *testing.T, p rmq.Producer, prefix string, n int) {
	t.Helper()
	if s.groups == nil {
		s.groups = map[string][]string{}
	}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("%s-n%03d", prefix, i)
		require.NoError(t, v5Send(p, v5Topic, k, "", time.Time{}, time.Now().Add(30*time.Second)))
		s.normal = append(s.normal, k)
		if i%5 == 0 {
			k := fmt.Sprintf("%s-d%03d", prefix, i)
			require.NoError(t, v5Send(p, v5Topic, k, "", time.Now().Add(time.Second), time.Now().Add(30*time.Second)))
			s.normal = append(s.normal, k)
		}
		g := fmt.Sprintf("mg%d", i%3)
		k = fmt.Sprintf("%s-f%03d", prefix, i)
		require.NoError(t, v5Send(p, v5FIFOTopic, k, g, time.Time{}, time.Now().Add(30*time.Second)))
		s.fifo = append(s.fifo, k)
		s.groups[g] = append(s.groups[g], k)
	}
}

// A follower forwards the v5 client's sends, receives and acks to the
// leader, and every node's routes name every node's gRPC endpoint.
func TestV5ClientThroughAFollower(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	ep := []string{f.GRPCAddr()}

	conn, err := grpc.NewClient(f.GRPCAddr(), grpc.WithTransportCredentials(grpcinsecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rr, err := v2.NewMessagingServiceClient(conn).QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: v5Topic}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, rr.GetStatus().GetCode(), rr.GetStatus().GetMessage())
	var addrs []string
	for _, a := range rr.GetMessageQueues()[0].GetBroker().GetEndpoints().GetAddresses() {
		addrs = append(addrs, fmt.Sprintf("%s:%d", a.GetHost(), a.GetPort()))
	}
	var want []string
	for _, s := range c.nodes {
		want = append(want, s.GRPCAddr())
	}
	require.ElementsMatch(t, want, addrs, "the route names every node")

	var st starter
	p := newV5Producer(t, &st, ep)
	normal := startV5Consumer(t, &st, ep, v5Group, v5Topic)
	fifo := startV5Consumer(t, &st, ep, v5FIFOGroup, v5FIFOTopic)
	st.run(t)
	var sent v5Sent
	sent.send(t, p, "a", 10)
	normal.waitAll(t, "normal and delayed", sent.normal, 30*time.Second)
	fifo.waitAll(t, "FIFO", sent.fifo, 30*time.Second)
	fifo.inOrder(t, sent.groups)
	require.Eventually(t, func() bool {
		return f.Node().Store().Stats().LogNext == c.nodes[l].Node().Store().Stats().LogNext
	}, 30*time.Second, 10*time.Millisecond, "the follower holds what the leader stored")
}

// The unchanged v5 Producer, SimpleConsumers (normal, FIFO, delayed
// messages) and PushConsumer across kill -9 of the leader's process: sends
// resume within 10 s, and every acknowledged send is received.
func TestV5LeaderKill9(t *testing.T) {
	ps := startProcs(t, 3)
	var ep []string
	for _, p := range ps {
		ep = append(ep, p.cfg.GRPCAddr)
	}
	first := agreedLeader(t, ps, 30*time.Second)
	var st starter
	p := newV5Producer(t, &st, ep)
	normal := startV5Consumer(t, &st, ep, v5Group, v5Topic)
	fifo := startV5Consumer(t, &st, ep, v5FIFOGroup, v5FIFOTopic)
	push := startV5Push(t, &st, ep, "v5-push", v5Topic)
	st.run(t)
	var sent v5Sent
	rounds := 1
	if os.Getenv("BROKERCORE_LONG") == "1" {
		rounds = 5
	}
	var resumes []time.Duration
	for r := 0; r < rounds; r++ {
		sent.send(t, p, fmt.Sprintf("r%d-before", r), 15)
		l := first
		if r > 0 {
			l = agreedLeader(t, ps, 30*time.Second)
		}
		killed := time.Now()
		l.kill()
		k := fmt.Sprintf("r%d-resume", r)
		require.NoError(t, v5Send(p, v5Topic, k, "", time.Time{}, time.Now().Add(60*time.Second)))
		resumes = append(resumes, time.Since(killed))
		sent.normal = append(sent.normal, k)
		sent.send(t, p, fmt.Sprintf("r%d-after", r), 15)
		if r+1 < rounds {
			l.start(t)
		}
	}
	slices.Sort(resumes)
	t.Logf("%d rounds: kill -9 of the leader to the next acknowledged v5 send: median %v, range %v–%v", rounds,
		resumes[len(resumes)/2].Round(time.Millisecond), resumes[0].Round(time.Millisecond), resumes[len(resumes)-1].Round(time.Millisecond))
	require.Less(t, resumes[len(resumes)-1], 10*time.Second, "sends resumed within 10 s")
	normal.waitAll(t, "normal and delayed", sent.normal, 60*time.Second)
	fifo.waitAll(t, "FIFO", sent.fifo, 60*time.Second)
	fifo.inOrder(t, sent.groups)
	push.waitAll(t, "push consumer", sent.normal, 60*time.Second)
}

// A SimpleConsumer tells its long-polling time only in its settings, which
// reach the node it is connected to: a follower passes it on with the
// receives it forwards, or the leader would poll for its own default.
func TestV5ForwardedReceiveKeepsTheClientsLongPolling(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) { cfg.GRPCLongPolling = 10 * time.Minute })
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	conn, err := grpc.NewClient(f.GRPCAddr(), grpc.WithTransportCredentials(grpcinsecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := v2.NewMessagingServiceClient(conn)
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "lp@1"), 10*time.Minute)
	defer cancel()
	tel, err := client.Telemetry(ctx)
	require.NoError(t, err)
	simple := v2.ClientType_SIMPLE_CONSUMER
	require.NoError(t, tel.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{ClientType: &simple,
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: v5Group},
			LongPollingTimeout: durationpb.New(time.Second)}}}}}))
	_, err = tel.Recv()
	require.NoError(t, err)

	done := make(chan v2.Code, 1)
	go func() {
		rs, err := client.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: v5Group},
			MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: v5Topic}, Id: 0}, BatchSize: 1,
			InvisibleDuration: durationpb.New(time.Minute)})
		code := v2.Code_INTERNAL_ERROR
		for err == nil {
			var resp *v2.ReceiveMessageResponse
			if resp, err = rs.Recv(); err == nil && resp.GetStatus() != nil {
				code = resp.GetStatus().GetCode()
			}
		}
		done <- code
	}()
	select {
	case code := <-done:
		require.Equal(t, v2.Code_MESSAGE_NOT_FOUND, code, "an empty answer after the client's 1 s")
	case <-time.After(2 * time.Minute):
		t.Fatal("the leader polled for its own 10 min, not the client's 1 s")
	}
}
