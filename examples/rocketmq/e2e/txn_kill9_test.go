//go:build !race

package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
)

// A kill -9 loop of the broker under the v2 TransactionProducer: even
// bodies are committed, odd ones rolled back (by Execute, or by Check when
// the end was lost to a kill). Afterwards the topic's log holds every even
// body whose send was acknowledged exactly once, no even body twice and no
// odd body at all. Short by default; BROKERCORE_LONG=1 runs 10 kills.
func TestKill9DuringTransactionsCommitsExactlyOnceAndNeverARollback(t *testing.T) {
	t.Parallel()
	kills := 2
	if long() {
		kills = 10
	}
	dir, ns, br := t.TempDir(), freeAddr(t), freeAddr(t)
	env := []string{"E2E_DIR=" + dir, "E2E_NS=" + ns, "E2E_BR=" + br, "E2E_TXN=fast"}
	broker := startChild(t, "broker", env...)
	const topic = "txn-survivor"
	decide := func(body string) primitive.LocalTransactionState {
		n, _ := strconv.Atoi(body)
		if n%2 == 0 {
			return primitive.CommitMessageState
		}
		return primitive.RollbackMessageState
	}
	p, err := rocketmq.NewTransactionProducer(listenerFunc{
		exec:  func(m *primitive.Message) primitive.LocalTransactionState { return decide(string(m.Body)) },
		check: func(m *primitive.MessageExt) primitive.LocalTransactionState { return decide(string(m.Body)) },
	}, producer.WithNameServer([]string{ns}), producer.WithGroupName("pg-kill9"),
		producer.WithInstanceName(instance(t, "txn")), producer.WithRetry(0), producer.WithSendMsgTimeout(2*time.Second))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	got := newSeen()
	c := newPushConsumer(t, ns, "g-txn-kill9")
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got.add(string(m.Body))
		}
		return consumer.ConsumeSuccess, nil
	}))
	_, err = p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte("0")))
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })

	var mu sync.Mutex
	acked := map[int]bool{0: true}
	var next int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				next++
				n := next
				mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				r, err := p.SendMessageInTransaction(ctx, primitive.NewMessage(topic, []byte(strconv.Itoa(n))))
				cancel()
				if err == nil && r.Status == primitive.SendOK {
					mu.Lock()
					acked[n] = true
					mu.Unlock()
				} else {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	for k := 0; k < kills; k++ {
		time.Sleep(1500 * time.Millisecond)
		broker.kill()
		broker = startChild(t, "broker", env...)
	}
	time.Sleep(2 * time.Second) // the producer sends to the last broker: it is known there, for the checks
	close(stop)
	wg.Wait()

	mu.Lock()
	var wantEven []string
	for n := range acked {
		if n%2 == 0 {
			wantEven = append(wantEven, strconv.Itoa(n))
		}
	}
	mu.Unlock()
	require.NotEmpty(t, wantEven)
	deadline := time.Now().Add(90 * time.Second)
	for {
		missing := 0
		counts := got.counts()
		for _, b := range wantEven {
			if counts[b] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d acknowledged committed transactions never consumed after %d kills", missing, len(wantEven), kills)
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // what the checks still settle
	broker.stop(t)

	// The log itself, not the consumer (which may see a message twice
	// after a kill): every even body at most once, the acknowledged ones
	// exactly once, no odd one.
	st, err := store.Open(filepath.Join(dir, brokercore.StoreDir), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	inLog := map[string]int{}
	for _, q := range st.Queues(topic) {
		for off := st.MinOffset(topic, q); off < st.MaxOffset(topic, q); {
			msgs, err := st.Read(topic, q, off, 256)
			require.NoError(t, err)
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				inLog[string(m.Body)]++
				off = m.QueueOffset + 1
			}
		}
	}
	for b, n := range inLog {
		v, _ := strconv.Atoi(b)
		assert.Zero(t, v%2, "rolled-back transaction %s delivered", b)
		assert.Equal(t, 1, n, "transaction %s appended %d times", b, n)
	}
	for _, b := range wantEven {
		assert.Equal(t, 1, inLog[b], "acknowledged committed transaction %s", b)
	}
	t.Logf("%d transactions acknowledged (%d committed) across %d kill -9s; %d messages in the log", len(acked), len(wantEven), kills, len(inLog))
}
