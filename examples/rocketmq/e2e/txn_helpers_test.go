package e2e

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/txn"
)

// shiftClock is the transaction manager's clock in these tests: real time
// plus what the test advanced, so a check is due at once instead of after
// 6 s (everything else keeps the real clock).
type shiftClock struct{ off atomic.Int64 }

func (c *shiftClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *shiftClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// startTxnBroker starts a broker whose transaction manager runs on clk,
// with a check round every 10 ms.
func startTxnBroker(t *testing.T, clk *shiftClock) *rmqtest.Broker {
	t.Helper()
	return rmqtest.StartConfig(t, server.Config{Core: brokercore.Options{Txn: txn.Options{Now: clk.Now, Tick: 10 * time.Millisecond}}})
}

func txnV5Config(endpoint, group string) *rmq.Config {
	return &rmq.Config{Endpoint: endpoint, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

// txnV5Start runs a v5 client's Start, which waits for the server's settings,
// failing after 15 s.
func txnV5Start(t testing.TB, start func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- start() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("v5 client Start did not return within 15 s")
	}
}

func newV5TxnProducer(t testing.TB, endpoint string, check func(*rmq.MessageView) rmq.TransactionResolution, topics ...string) rmq.Producer {
	t.Helper()
	var checked atomic.Bool
	p, err := rmq.NewProducer(txnV5Config(endpoint, ""), rmq.WithTopics(topics...),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution {
			checked.Store(true)
			return check(mv)
		}}))
	require.NoError(t, err)
	txnV5Start(t, p.Start)
	t.Cleanup(func() {
		// A producer that answered a check-back is left running: v5.1.4's
		// GracefulStop replaces its meter while the check-back goroutine
		// reads it without the lock, a race inside the client (see
		// grpcapi's newTxnProducer).
		if !checked.Load() {
			_ = p.GracefulStop()
		}
	})
	return p
}

func newV5Consumer(t testing.TB, endpoint, group, topic string) rmq.SimpleConsumer {
	t.Helper()
	c, err := rmq.NewSimpleConsumer(txnV5Config(endpoint, group), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	require.NoError(t, err)
	txnV5Start(t, c.Start)
	t.Cleanup(func() { _ = c.GracefulStop() })
	return c
}

// v5Receive receives and acks until want messages came or wait ran out,
// and returns their bodies.
func v5Receive(t testing.TB, c rmq.SimpleConsumer, want int, wait time.Duration) []string {
	t.Helper()
	var out []string
	deadline := time.Now().Add(wait)
	for len(out) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		mvs, err := c.Receive(ctx, 32, 20*time.Second)
		cancel()
		var rs *rmq.ErrRpcStatus
		if errors.As(err, &rs) && rs.Code == 40401 { // MESSAGE_NOT_FOUND
			continue
		}
		require.NoError(t, err)
		for _, mv := range mvs {
			out = append(out, string(mv.GetBody()))
			require.NoError(t, c.Ack(context.Background(), mv))
		}
	}
	return out
}

func unknownV5(*rmq.MessageView) rmq.TransactionResolution { return rmq.UNKNOWN }

// childTxnOptions are the child broker's transaction options: E2E_TXN=fast
// checks an open transaction 1 s after it was stored and then every second
// (never rolling it back for the count), so that a test settles the
// transactions a kill left open within seconds.
func childTxnOptions() txn.Options {
	if os.Getenv("E2E_TXN") != "fast" {
		return txn.Options{}
	}
	return txn.Options{TransactionTimeout: time.Second, CheckInterval: time.Second, CheckMax: 1 << 20, Tick: 100 * time.Millisecond}
}
