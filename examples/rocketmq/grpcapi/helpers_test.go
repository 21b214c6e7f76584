package grpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// openCore opens the broker core a test serves with brokercore.Open
// (store, offsets, pop dead-lettering to %DLQ%<group>, scheduler, consumer
// registry), closed when the test ends.
func openCore(t testing.TB, dir string, maxAttempts int) *brokercore.Broker {
	t.Helper()
	c, err := brokercore.Open(dir, brokercore.Options{
		Store: store.Options{Sync: store.SyncNone},
		Pop:   pop.Options{MaxAttempts: maxAttempts},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// broker is a core with the gRPC server listening on 127.0.0.1.
type broker struct {
	*brokercore.Broker
	srv      *grpcapi.Server
	endpoint string
	dir      string
}

func startBroker(t testing.TB, opts grpcapi.Options) *broker {
	t.Helper()
	dir := t.TempDir()
	return startBrokerIn(t, dir, opts)
}

func startBrokerIn(t testing.TB, dir string, opts grpcapi.Options) *broker {
	t.Helper()
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = grpcapi.DefaultMaxAttempts
	}
	if opts.LongPolling == 0 {
		opts.LongPolling = 2 * time.Second // push consumers' GracefulStop waits this + 3 s
	}
	c := openCore(t, dir, opts.MaxAttempts)
	if opts.CertDir == "" {
		opts.CertDir = dir
	}
	srv, err := grpcapi.New(c, opts)
	require.NoError(t, err)
	addr, err := srv.Listen("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return &broker{Broker: c, srv: srv, endpoint: addr.String(), dir: dir}
}

// config is a client's configuration with clientCreds; none when they are
// empty (the v5 client signs whenever Credentials is non-nil, even with an
// empty key).
func config(endpoint, group string) *rmq.Config {
	return configCreds(endpoint, group, clientCreds)
}

func configCreds(endpoint, group string, cr credentials.SessionCredentials) *rmq.Config {
	c := &rmq.Config{Endpoint: endpoint, ConsumerGroup: group}
	if cr.AccessKey != "" {
		c.Credentials = &cr
	}
	return c
}

func newProducer(t testing.TB, endpoint string, topics ...string) rmq.Producer {
	t.Helper()
	p, err := rmq.NewProducer(config(endpoint, ""), rmq.WithTopics(topics...))
	require.NoError(t, err)
	require.NoError(t, startWithin(t, p.Start))
	t.Cleanup(func() { _ = p.GracefulStop() })
	return p
}

func newSimpleConsumer(t testing.TB, endpoint, group, topic string, await time.Duration, filter *rmq.FilterExpression) rmq.SimpleConsumer {
	t.Helper()
	if filter == nil {
		filter = rmq.SUB_ALL
	}
	c, err := rmq.NewSimpleConsumer(config(endpoint, group),
		rmq.WithSimpleAwaitDuration(await),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: filter}))
	require.NoError(t, err)
	require.NoError(t, startWithin(t, c.Start))
	t.Cleanup(func() { _ = c.GracefulStop() })
	return c
}

// startWithin runs a client's Start, which blocks until the server answered
// its settings (forever if it never does), and fails after 15 s.
func startWithin(t testing.TB, start func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- start() }()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		return errors.New("client Start did not return within 15 s: settings never answered")
	}
}

func textMessage(topic, body string) *rmq.Message {
	return &rmq.Message{Topic: topic, Body: []byte(body)}
}

// receiveAll keeps receiving until n messages were received or the time is
// up; each received message is handed to f (which acks or not).
func receive(ctx context.Context, c rmq.SimpleConsumer, batch int32, invisible time.Duration) ([]*rmq.MessageView, error) {
	mvs, err := c.Receive(ctx, batch, invisible)
	var rs *rmq.ErrRpcStatus
	if errors.As(err, &rs) && rs.Code == 40401 { // MESSAGE_NOT_FOUND
		return nil, nil
	}
	return mvs, err
}

// seenSet records message ids, safe for concurrent use.
type seenSet struct {
	mu sync.Mutex
	m  map[string]int
}

func newSeenSet() *seenSet { return &seenSet{m: make(map[string]int)} }

func (s *seenSet) add(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id]++
	return s.m[id]
}

func (s *seenSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *seenSet) dups() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, n := range s.m {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", id, n))
		}
	}
	return out
}

// waitDeadLetter waits until the message with id is in group's dead-letter
// topic and returns it.
func waitDeadLetter(t testing.TB, ctx context.Context, b *broker, group, id string) *store.Message {
	t.Helper()
	for ctx.Err() == nil {
		msgs, err := b.Store().Read(brokercore.DeadLetterTopic(group), 0, 0, 1000)
		require.NoError(t, err)
		for _, m := range msgs {
			if m.Properties[brokercore.PropUniqKey] == id {
				return m
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("message %s never reached %s", id, brokercore.DeadLetterTopic(group))
	return nil
}
