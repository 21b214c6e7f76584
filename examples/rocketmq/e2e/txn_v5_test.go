package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/txn"
)

// The RocketMQ 5 Go client's transactions against the program: commit,
// rollback, the orphaned-transaction check (answered by a second producer
// once the sender is gone), and a concurrent load.

func TestV5TransactionCommitIsReceivedOnceAndARollbackNeverWhileAControlMessageIs(t *testing.T) {
	b := startTxnBroker(t, &shiftClock{})
	p := newV5TxnProducer(t, b.GRPC, unknownV5, "orders")
	ctx := context.Background()
	tx := p.BeginTransaction()
	_, err := p.SendWithTransaction(ctx, &rmq.Message{Topic: "orders", Body: []byte("committed")}, tx)
	require.NoError(t, err)
	c := newV5Consumer(t, b.GRPC, "billing", "orders")
	assert.Empty(t, v5Receive(t, c, 1, 3*time.Second), "not before the commit")
	require.NoError(t, tx.Commit())

	tx = p.BeginTransaction()
	_, err = p.SendWithTransaction(ctx, &rmq.Message{Topic: "orders", Body: []byte("rolled back")}, tx)
	require.NoError(t, err)
	require.NoError(t, tx.RollBack())
	_, err = p.Send(ctx, &rmq.Message{Topic: "orders", Body: []byte("control")})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"committed", "control"}, v5Receive(t, c, 2, 30*time.Second))
	assert.Empty(t, v5Receive(t, c, 1, 3*time.Second))
}

func TestV5OrphanedTransactionIsAnsweredByAnotherProducerOnceTheSenderIsGone(t *testing.T) {
	clk := &shiftClock{}
	b := startTxnBroker(t, clk)
	sender, err := rmq.NewProducer(txnV5Config(b.GRPC, ""), rmq.WithTopics("orders"),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: unknownV5}))
	require.NoError(t, err)
	txnV5Start(t, sender.Start)
	ctx := context.Background()
	for _, body := range []string{"commit me", "roll me back"} {
		_, err := sender.SendWithTransaction(ctx, &rmq.Message{Topic: "orders", Body: []byte(body)}, sender.BeginTransaction())
		require.NoError(t, err)
	}
	require.NoError(t, sender.GracefulStop()) // the sender is gone before anything was ended

	var mu sync.Mutex
	asked := map[string]int{}
	newV5TxnProducer(t, b.GRPC, func(mv *rmq.MessageView) rmq.TransactionResolution {
		mu.Lock()
		asked[string(mv.GetBody())]++
		mu.Unlock()
		if string(mv.GetBody()) == "commit me" {
			return rmq.COMMIT
		}
		return rmq.ROLLBACK
	}, "orders")
	clk.Advance(txn.DefaultTransactionTimeout)
	tm := b.Server.Core().Transactions()
	require.Eventually(t, func() bool { s := tm.Stats(); return s.Committed == 1 && s.RolledBack == 1 }, 30*time.Second, 10*time.Millisecond)
	c := newV5Consumer(t, b.GRPC, "billing", "orders")
	assert.Equal(t, []string{"commit me"}, v5Receive(t, c, 1, 30*time.Second))
	assert.Empty(t, v5Receive(t, c, 1, 3*time.Second))
	mu.Lock()
	assert.Equal(t, map[string]int{"commit me": 1, "roll me back": 1}, asked)
	mu.Unlock()
}

func TestV5TwoHundredTransactionsFromEightGoroutinesHalfCommittedDeliverExactlyThose(t *testing.T) {
	b := startTxnBroker(t, &shiftClock{})
	p := newV5TxnProducer(t, b.GRPC, unknownV5, "orders")
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 200; i += 8 {
				tx := p.BeginTransaction()
				if _, err := p.SendWithTransaction(context.Background(), &rmq.Message{Topic: "orders", Body: []byte(fmt.Sprint(i))}, tx); err != nil {
					errs <- err
					continue
				}
				end := tx.Commit
				if i%2 == 1 {
					end = tx.RollBack
				}
				if err := end(); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	c := newV5Consumer(t, b.GRPC, "billing", "orders")
	got := v5Receive(t, c, 100, 60*time.Second)
	got = append(got, v5Receive(t, c, 1, 3*time.Second)...)
	var want []string
	for i := 0; i < 200; i += 2 {
		want = append(want, fmt.Sprint(i))
	}
	sort.Strings(got)
	sort.Strings(want)
	assert.Equal(t, want, got, "exactly the committed 100, once each")
}
