package grpcapi_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// txnClock is a clock the transaction manager reads, moved by the test so
// that a check is due without waiting 6 s.
type txnClock struct{ off atomic.Int64 }

func (c *txnClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *txnClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// startTxnBroker is startBroker with the transaction manager on clk, making
// a check round every few milliseconds.
func startTxnBroker(t *testing.T, clk *txnClock) *broker {
	t.Helper()
	dir := t.TempDir()
	c, err := brokercore.Open(dir, brokercore.Options{
		Store: store.Options{Sync: store.SyncNone},
		Txn:   txn.Options{Now: clk.Now, Tick: 5 * time.Millisecond},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	srv, err := grpcapi.New(c, grpcapi.Options{CertDir: dir, LongPolling: 2 * time.Second, MaxAttempts: grpcapi.DefaultMaxAttempts})
	require.NoError(t, err)
	c.Transactions().SetChecker(txn.CheckerFunc(srv.CheckTransaction))
	addr, err := srv.Listen("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return &broker{Broker: c, srv: srv, endpoint: addr.String(), dir: dir}
}

func newTxnProducer(t *testing.T, endpoint string, check func(*rmq.MessageView) rmq.TransactionResolution, topics ...string) rmq.Producer {
	t.Helper()
	var checked atomic.Bool
	p, err := rmq.NewProducer(config(endpoint, ""), rmq.WithTopics(topics...),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution {
			checked.Store(true)
			return check(mv)
		}}))
	require.NoError(t, err)
	require.NoError(t, startWithin(t, p.Start))
	t.Cleanup(func() {
		// A producer that answered a check-back is left running: v5.1.4's
		// GracefulStop replaces its meter under a lock that the check-back
		// goroutine's read of it (after its EndTransaction) does not take,
		// a data race inside the client that the race detector reports,
		// like the one Options.SettingsHold orders. The server's Close
		// ends its connections.
		if !checked.Load() {
			_ = p.GracefulStop()
		}
	})
	return p
}

// receiveBodies receives and acks until want bodies came or wait ran out.
func receiveBodies(t *testing.T, c rmq.SimpleConsumer, want int, wait time.Duration) []string {
	t.Helper()
	var out []string
	deadline := time.Now().Add(wait)
	for len(out) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		mvs, err := receive(ctx, c, 16, 20*time.Second)
		cancel()
		require.NoError(t, err)
		for _, mv := range mvs {
			out = append(out, string(mv.GetBody()))
			require.NoError(t, c.Ack(context.Background(), mv))
		}
	}
	return out
}

func TestTransactionCommitIsReceivedOnceAndARollbackNever(t *testing.T) {
	b := startTxnBroker(t, &txnClock{})
	p := newTxnProducer(t, b.endpoint, func(*rmq.MessageView) rmq.TransactionResolution { return rmq.UNKNOWN }, "orders")
	ctx := context.Background()

	tx := p.BeginTransaction()
	rs, err := p.SendWithTransaction(ctx, textMessage("orders", "committed"), tx)
	require.NoError(t, err)
	require.NotEmpty(t, rs[0].TransactionId)
	assert.Equal(t, 1, b.Transactions().Stats().Pending)
	require.NoError(t, tx.Commit())

	tx = p.BeginTransaction()
	_, err = p.SendWithTransaction(ctx, textMessage("orders", "rolled back"), tx)
	require.NoError(t, err)
	require.NoError(t, tx.RollBack())
	_, err = p.Send(ctx, textMessage("orders", "control"))
	require.NoError(t, err)

	c := newSimpleConsumer(t, b.endpoint, "billing", "orders", 2*time.Second, nil)
	got := receiveBodies(t, c, 2, 20*time.Second)
	assert.ElementsMatch(t, []string{"committed", "control"}, got)
	assert.Empty(t, receiveBodies(t, c, 1, 3*time.Second), "nothing more: not the rollback, not a second commit")
	s := b.Transactions().Stats()
	assert.Equal(t, uint64(1), s.Committed)
	assert.Equal(t, uint64(1), s.RolledBack)
}

func TestOrphanedTransactionIsCheckedOverTheProducersTelemetryAndResolvedByItsAnswer(t *testing.T) {
	clk := &txnClock{}
	b := startTxnBroker(t, clk)
	var mu sync.Mutex
	answers := map[string]rmq.TransactionResolution{"commit me": rmq.COMMIT, "roll me back": rmq.ROLLBACK}
	asked := map[string]int{}
	p := newTxnProducer(t, b.endpoint, func(mv *rmq.MessageView) rmq.TransactionResolution {
		mu.Lock()
		defer mu.Unlock()
		asked[string(mv.GetBody())]++
		return answers[string(mv.GetBody())]
	}, "orders")
	ctx := context.Background()
	for _, body := range []string{"commit me", "roll me back"} {
		_, err := p.SendWithTransaction(ctx, textMessage("orders", body), p.BeginTransaction()) // never ended
		require.NoError(t, err)
	}
	clk.Advance(txn.DefaultTransactionTimeout)
	require.Eventually(t, func() bool {
		s := b.Transactions().Stats()
		return s.Committed == 1 && s.RolledBack == 1
	}, 20*time.Second, 10*time.Millisecond)
	c := newSimpleConsumer(t, b.endpoint, "billing", "orders", 2*time.Second, nil)
	assert.Equal(t, []string{"commit me"}, receiveBodies(t, c, 1, 20*time.Second))
	mu.Lock()
	assert.Equal(t, map[string]int{"commit me": 1, "roll me back": 1}, asked)
	mu.Unlock()
}

func TestEndTransactionRefusesIDsItDidNotIssueAndMismatchedMessages(t *testing.T) {
	b := startTxnBroker(t, &txnClock{})
	p := newTxnProducer(t, b.endpoint, func(*rmq.MessageView) rmq.TransactionResolution { return rmq.UNKNOWN }, "orders")
	rs, err := p.SendWithTransaction(context.Background(), textMessage("orders", "x"), p.BeginTransaction())
	require.NoError(t, err)
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	end := func(topic, msgID, txID string, r v2.TransactionResolution) v2.Code {
		resp, err := c.EndTransaction(ctx, &v2.EndTransactionRequest{Topic: &v2.Resource{Name: topic}, MessageId: msgID,
			TransactionId: txID, Resolution: r})
		require.NoError(t, err)
		return resp.GetStatus().GetCode()
	}
	id := rs[0].TransactionId
	assert.Equal(t, v2.Code_INVALID_TRANSACTION_ID, end("orders", rs[0].MessageID, "nope", v2.TransactionResolution_COMMIT))
	assert.Equal(t, v2.Code_INVALID_TRANSACTION_ID, end("orders", rs[0].MessageID, "BCTX99", v2.TransactionResolution_COMMIT))
	assert.Equal(t, v2.Code_INVALID_TRANSACTION_ID, end("orders", "another", id, v2.TransactionResolution_COMMIT))
	assert.Equal(t, v2.Code_INVALID_TRANSACTION_ID, end("other", rs[0].MessageID, id, v2.TransactionResolution_COMMIT))
	assert.Equal(t, v2.Code_OK, end("orders", rs[0].MessageID, id, v2.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED))
	assert.Equal(t, 1, b.Transactions().Stats().Pending, "unspecified leaves it open")
	assert.Equal(t, v2.Code_OK, end("orders", rs[0].MessageID, id, v2.TransactionResolution_COMMIT))
	assert.Equal(t, v2.Code_OK, end("orders", rs[0].MessageID, id, v2.TransactionResolution_COMMIT), "again: the effect of one")
	assert.Equal(t, v2.Code_PRECONDITION_FAILED, end("orders", rs[0].MessageID, id, v2.TransactionResolution_ROLLBACK))
	assert.Equal(t, uint64(1), b.Transactions().Stats().Committed)
}
