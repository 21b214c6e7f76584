//go:build !race

package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/txn"
)

// The RocketMQ 4 Go client's TransactionProducer against the program:
// Execute's answer ends the transaction (END_TRANSACTION, oneway), an
// UNKNOWN answer is settled by CHECK_TRANSACTION_STATE with a producer of
// the group, which its listener's Check answers.

// listenerFunc is a primitive.TransactionListener of two functions.
type listenerFunc struct {
	exec  func(*primitive.Message) primitive.LocalTransactionState
	check func(*primitive.MessageExt) primitive.LocalTransactionState
}

func (l listenerFunc) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	return l.exec(m)
}

func (l listenerFunc) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	return l.check(m)
}

// byBody answers each message by its body.
func byBody(answers map[string]primitive.LocalTransactionState) func(string) primitive.LocalTransactionState {
	return func(body string) primitive.LocalTransactionState {
		if a, ok := answers[body]; ok {
			return a
		}
		return primitive.UnkonwnState
	}
}

func newTxnProducerV2(t testing.TB, ns, group string, l primitive.TransactionListener) rocketmq.TransactionProducer {
	t.Helper()
	p, err := rocketmq.NewTransactionProducer(l,
		producer.WithNameServer([]string{ns}),
		producer.WithGroupName(group),
		producer.WithInstanceName(instance(t, "txn-producer")),
		producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// collect subscribes a push consumer of group to topic and counts bodies.
func collect(t testing.TB, ns, group, topic string) *seen {
	t.Helper()
	got := newSeen()
	c := newPushConsumer(t, ns, group)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got.add(string(m.Body))
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
	return got
}

func (s *seen) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

func sendTxn(t testing.TB, p rocketmq.TransactionProducer, topic, body string) *primitive.TransactionSendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := p.SendMessageInTransaction(ctx, primitive.NewMessage(topic, []byte(body)))
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, r.Status)
	return r
}

func TestV2TransactionCommitIsReceivedOnceAndNotBeforeAndARollbackNever(t *testing.T) {
	b := startTxnBroker(t, &shiftClock{})
	got := collect(t, b.NameSrv, "billing", "orders")
	// Execute holds the commit until the test saw that nothing arrived.
	release := make(chan struct{})
	answer := byBody(map[string]primitive.LocalTransactionState{"committed": primitive.CommitMessageState, "rolled back": primitive.RollbackMessageState})
	p := newTxnProducerV2(t, b.NameSrv, "pg-orders", listenerFunc{
		exec: func(m *primitive.Message) primitive.LocalTransactionState {
			if string(m.Body) == "committed" {
				<-release
			}
			return answer(string(m.Body))
		},
		check: func(*primitive.MessageExt) primitive.LocalTransactionState { return primitive.UnkonwnState },
	})
	done := make(chan struct{})
	go func() { defer close(done); sendTxn(t, p, "orders", "committed") }()
	plain := newProducer(t, b.NameSrv)
	sendSync(t, plain, primitive.NewMessage("orders", []byte("before")))
	got.waitUnique(t, 1, 30*time.Second)
	assert.Equal(t, map[string]int{"before": 1}, got.counts(), "the half message is not delivered before its commit")
	close(release)
	<-done
	sendTxn(t, p, "orders", "rolled back")
	sendSync(t, plain, primitive.NewMessage("orders", []byte("control")))
	got.waitUnique(t, 3, 30*time.Second)
	time.Sleep(time.Second) // a late duplicate or a rolled-back delivery would arrive now
	assert.Equal(t, map[string]int{"before": 1, "committed": 1, "control": 1}, got.counts())
}

func TestV2UnknownThenCheckCommitsAndACheckRollsBack(t *testing.T) {
	clk := &shiftClock{}
	b := startTxnBroker(t, clk)
	got := collect(t, b.NameSrv, "billing", "orders")
	var mu sync.Mutex
	checked := map[string]int{}
	check := byBody(map[string]primitive.LocalTransactionState{"commit on check": primitive.CommitMessageState, "roll back on check": primitive.RollbackMessageState})
	p := newTxnProducerV2(t, b.NameSrv, "pg-check", listenerFunc{
		exec: func(*primitive.Message) primitive.LocalTransactionState { return primitive.UnkonwnState },
		check: func(m *primitive.MessageExt) primitive.LocalTransactionState {
			mu.Lock()
			checked[string(m.Body)]++
			mu.Unlock()
			return check(string(m.Body))
		},
	})
	sendTxn(t, p, "orders", "commit on check")
	sendTxn(t, p, "orders", "roll back on check")
	tm := b.Server.Core().Transactions()
	require.Eventually(t, func() bool { return tm.Stats().Pending == 2 }, 10*time.Second, 10*time.Millisecond)
	clk.Advance(txn.DefaultTransactionTimeout)
	require.Eventually(t, func() bool { s := tm.Stats(); return s.Committed == 1 && s.RolledBack == 1 }, 30*time.Second, 10*time.Millisecond)
	got.waitUnique(t, 1, 30*time.Second)
	sendSync(t, newProducer(t, b.NameSrv), primitive.NewMessage("orders", []byte("control")))
	got.waitUnique(t, 2, 30*time.Second)
	assert.Equal(t, map[string]int{"commit on check": 1, "control": 1}, got.counts())
	mu.Lock()
	assert.Equal(t, map[string]int{"commit on check": 1, "roll back on check": 1}, checked)
	mu.Unlock()
}

func TestV2CheckGoesToAnotherProducerOfTheGroupOnceTheSenderIsGone(t *testing.T) {
	clk := &shiftClock{}
	b := startTxnBroker(t, clk)
	got := collect(t, b.NameSrv, "billing", "orders")
	unknown := listenerFunc{
		exec:  func(*primitive.Message) primitive.LocalTransactionState { return primitive.UnkonwnState },
		check: func(*primitive.MessageExt) primitive.LocalTransactionState { return primitive.UnkonwnState },
	}
	sender, err := rocketmq.NewTransactionProducer(unknown, producer.WithNameServer([]string{b.NameSrv}),
		producer.WithGroupName("pg-shared"), producer.WithInstanceName(instance(t, "sender")))
	require.NoError(t, err)
	require.NoError(t, sender.Start())
	sendTxn(t, sender, "orders", "answered by the other")
	require.NoError(t, sender.Shutdown())

	other := newTxnProducerV2(t, b.NameSrv, "pg-shared", listenerFunc{
		exec:  func(*primitive.Message) primitive.LocalTransactionState { return primitive.CommitMessageState },
		check: func(*primitive.MessageExt) primitive.LocalTransactionState { return primitive.CommitMessageState },
	})
	// The second producer is known to the broker once it sent (or
	// heartbeated: a v2 producer heartbeats only brokers it has routes to).
	sendTxn(t, other, "orders", "the other's own")
	tm := b.Server.Core().Transactions()
	require.Eventually(t, func() bool {
		clk.Advance(txn.DefaultCheckInterval)
		return tm.Stats().Committed == 2
	}, 60*time.Second, 200*time.Millisecond)
	got.waitUnique(t, 2, 30*time.Second)
	assert.Equal(t, map[string]int{"answered by the other": 1, "the other's own": 1}, got.counts())
}

func TestV2TwoHundredTransactionsFromEightGoroutinesHalfCommittedDeliverExactlyThose(t *testing.T) {
	b := startTxnBroker(t, &shiftClock{})
	got := collect(t, b.NameSrv, "billing", "orders")
	evenCommits := func(m string) primitive.LocalTransactionState {
		var i int
		fmt.Sscan(m, &i)
		if i%2 == 0 {
			return primitive.CommitMessageState
		}
		return primitive.RollbackMessageState
	}
	p := newTxnProducerV2(t, b.NameSrv, "pg-load", listenerFunc{
		exec:  func(m *primitive.Message) primitive.LocalTransactionState { return evenCommits(string(m.Body)) },
		check: func(m *primitive.MessageExt) primitive.LocalTransactionState { return evenCommits(string(m.Body)) },
	})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 200; i += 8 {
				sendTxn(t, p, "orders", fmt.Sprint(i))
			}
		}(w)
	}
	wg.Wait()
	got.waitUnique(t, 100, 60*time.Second)
	time.Sleep(time.Second) // a late duplicate or rolled-back delivery would arrive now
	counts := got.counts()
	var keys []string
	for k, n := range counts {
		assert.Equal(t, 1, n, "body %s delivered %d times", k, n)
		keys = append(keys, k)
	}
	var want []string
	for i := 0; i < 200; i += 2 {
		want = append(want, fmt.Sprint(i))
	}
	sort.Strings(keys)
	sort.Strings(want)
	assert.Equal(t, want, keys)
}
