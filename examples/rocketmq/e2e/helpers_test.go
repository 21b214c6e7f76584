package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/require"
)

// quietLogger silences the client (it logs through logrus to stderr).
type quietLogger struct{}

func (quietLogger) Debug(string, map[string]interface{})   {}
func (quietLogger) Info(string, map[string]interface{})    {}
func (quietLogger) Warning(string, map[string]interface{}) {}
func (quietLogger) Error(string, map[string]interface{})   {}
func (quietLogger) Fatal(string, map[string]interface{})   {}
func (quietLogger) Level(string)                           {}
func (quietLogger) OutputPath(string) error                { return nil }

func init() {
	if os.Getenv("RMQ_CLIENT_LOG") == "" {
		rlog.SetLogger(quietLogger{})
	}
}

func long() bool { return os.Getenv("BROKERCORE_LONG") == "1" }

var instanceSeq atomic.Int64

// instance is a fresh instance name: the client shares one client object
// (and client id) per instance name in a process.
func instance(t testing.TB, role string) string {
	return fmt.Sprintf("%s-%s-%d", t.Name(), role, instanceSeq.Add(1))
}

func newProducer(t testing.TB, ns string, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	opts = append([]producer.Option{
		producer.WithNameServer([]string{ns}),
		producer.WithGroupName("pg-" + fmt.Sprint(instanceSeq.Add(1))),
		producer.WithInstanceName(instance(t, "producer")),
		producer.WithRetry(2),
	}, opts...)
	p, err := rocketmq.NewProducer(opts...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

func newPushConsumer(t testing.TB, ns, group string, opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	opts = append([]consumer.Option{
		consumer.WithNameServer([]string{ns}),
		consumer.WithGroupName(group),
		consumer.WithInstance(instance(t, "consumer")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
	c, err := rocketmq.NewPushConsumer(opts...)
	require.NoError(t, err)
	return c
}

// seen counts deliveries per key.
type seen struct {
	mu   sync.Mutex
	m    map[string]int
	cond chan struct{}
}

func newSeen() *seen { return &seen{m: map[string]int{}, cond: make(chan struct{}, 1)} }

func (s *seen) add(key string) {
	s.mu.Lock()
	s.m[key]++
	s.mu.Unlock()
	select {
	case s.cond <- struct{}{}:
	default:
	}
}

func (s *seen) unique() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// waitUnique waits until n unique keys were seen or the timeout passes.
func (s *seen) waitUnique(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for s.unique() < n {
		select {
		case <-s.cond:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("saw %d unique keys of %d after %v", s.unique(), n, timeout)
		}
	}
}

func sendSync(t testing.TB, p rocketmq.Producer, m *primitive.Message) *primitive.SendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := p.SendSync(ctx, m)
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, r.Status)
	return r
}
