//go:build !race

package e2e

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// A kill -9 loop of the broker under the RocketMQ 5 producer's
// transactions: even bodies are committed, odd ones rolled back (by the
// producer, or by its TransactionChecker when the end was lost to a kill).
// The kills come at random moments of the load. Afterwards the topic's log
// holds no transaction twice (each message names its transaction, the
// half's offset), the transaction of every acknowledged even send exactly
// once, and no odd body at all. Short by default (3 kills);
// BROKERCORE_LONG=1 runs 12.
//
// A body may be in the log twice, from two transactions: the v5 client
// retries a send whose answer a kill lost (the settings the server sends
// give it Apache's 3 attempts, whatever WithMaxAttempts says), and the
// half of the lost answer is a transaction of its own, which its check
// commits. That is the client's at-least-once send, as against Apache; the
// message ID is the same, and consumers deduplicate on it.
//
// The v5 client rebuilds a Telemetry stream broken by a kill only at its
// next settings sync (every 5 minutes), so the checks of the transactions
// the kills left open go to a second producer of the group (a gRPC
// producer's group is its topic) started after the last kill, as they
// would to any other live instance.
func TestV5Kill9DuringTransactionsCommitsExactlyOnceAndNeverARollback(t *testing.T) {
	t.Parallel()
	kills := 3
	if long() {
		kills = 12
	}
	dir, ns, br, grpcAddr := t.TempDir(), freeAddr(t), freeAddr(t), freeAddr(t)
	env := []string{"E2E_DIR=" + dir, "E2E_NS=" + ns, "E2E_BR=" + br, "E2E_GRPC=" + grpcAddr, "E2E_TXN=fast"}
	broker := startChild(t, "grpcbroker", env...)
	const topic = "txn-survivor-v5"
	decide := func(body []byte) rmq.TransactionResolution {
		n, _ := strconv.Atoi(string(body))
		if n%2 == 0 {
			return rmq.COMMIT
		}
		return rmq.ROLLBACK
	}
	checker := &rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution { return decide(mv.GetBody()) }}
	p, err := rmq.NewProducer(txnV5Config(grpcAddr, ""), rmq.WithTopics(topic), rmq.WithTransactionChecker(checker))
	require.NoError(t, err)
	txnV5Start(t, p.Start)
	defer p.GracefulStop()

	var (
		mu    sync.Mutex
		acked = map[int]string{} // body: its transaction ID as the receipt names it
		next  int
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
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
				body := []byte(strconv.Itoa(n))
				tx := p.BeginTransaction()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				rs, err := p.SendWithTransaction(ctx, &rmq.Message{Topic: topic, Body: body}, tx)
				cancel()
				if err != nil {
					time.Sleep(50 * time.Millisecond) // the broker is down: do not spin
					continue
				}
				mu.Lock()
				acked[n] = strings.TrimPrefix(rs[0].TransactionId, "BCTX")
				mu.Unlock()
				end := tx.Commit
				if decide(body) == rmq.ROLLBACK {
					end = tx.RollBack
				}
				_ = end() // lost to a kill: the check settles it
			}
		}()
	}
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitAcked := func(n int) { // n more sends acknowledged by this broker
		deadline := time.Now().Add(2 * time.Minute)
		for start := ackedNow(); ackedNow() < start+n; {
			require.True(t, time.Now().Before(deadline), "no transactional send acknowledged by the restarted broker")
			time.Sleep(10 * time.Millisecond)
		}
	}
	for k := 0; k < kills; k++ {
		waitAcked(5) // at least some load on this broker, then a random moment of it
		time.Sleep(time.Duration(rand.N(800)) * time.Millisecond)
		broker.kill()
		broker = startChild(t, "grpcbroker", env...)
	}
	waitAcked(20) // the last broker takes load too
	close(stop)
	wg.Wait()

	mu.Lock()
	var wantEven []string
	wantTxn := map[string]string{} // body: the acknowledged transaction
	for n, id := range acked {
		if n%2 == 0 {
			wantEven = append(wantEven, strconv.Itoa(n))
			wantTxn[strconv.Itoa(n)] = id
		}
	}
	total := len(acked)
	mu.Unlock()
	require.NotEmpty(t, wantEven)

	// A live producer of the group for the checks of what the kills left open.
	checked := newSeen()
	p2, err := rmq.NewProducer(txnV5Config(grpcAddr, ""), rmq.WithTopics(topic),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution {
			checked.add(string(mv.GetBody()))
			return decide(mv.GetBody())
		}}))
	require.NoError(t, err)
	txnV5Start(t, p2.Start)
	defer p2.GracefulStop()

	c := newV5Consumer(t, grpcAddr, "g-txn-kill9-v5", topic)
	got := newSeen()
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
		for _, b := range v5ReceiveSome(t, c) {
			got.add(b)
		}
	}
	require.NoError(t, c.GracefulStop())
	broker.stop(t)

	// The log itself, not the consumer (which may see a message twice
	// after a kill): no transaction twice, the acknowledged even ones
	// exactly once, no odd body.
	inLog := readTopic(t, dir, topic)
	perTxn := map[string]int{}
	retried := 0
	for b, recs := range inLog {
		v, _ := strconv.Atoi(b)
		assert.Zero(t, v%2, "rolled-back transaction %s delivered", b)
		for _, r := range recs {
			perTxn[r.txn]++
			assert.Equal(t, recs[0].msgID, r.msgID, "body %s from two sends, not one send retried", b)
		}
		if len(recs) > 1 {
			retried++
		}
	}
	for id, n := range perTxn {
		assert.Equal(t, 1, n, "transaction %s appended %d times", id, n)
	}
	for _, b := range wantEven {
		var txns []string
		for _, r := range inLog[b] {
			txns = append(txns, r.txn)
		}
		assert.Contains(t, txns, wantTxn[b], "acknowledged committed transaction %s of body %s", wantTxn[b], b)
	}
	t.Logf("%d transactions acknowledged (%d committed) across %d kill -9s; %d transactions in the log (%d bodies twice, from a retried send); %d checks answered by the second producer",
		total, len(wantEven), kills, len(perTxn), retried, len(checked.counts()))
}

// v5ReceiveSome makes one receive of up to 32 messages, acks them and
// returns their bodies (none when the queue had nothing for 2 s).
func v5ReceiveSome(t testing.TB, c rmq.SimpleConsumer) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mvs, err := c.Receive(ctx, 32, 20*time.Second)
	var rs *rmq.ErrRpcStatus
	if errors.As(err, &rs) && rs.Code == 40401 || errors.Is(err, context.DeadlineExceeded) {
		return nil // MESSAGE_NOT_FOUND, or a loaded machine's slow answer: the caller receives again
	}
	require.NoError(t, err)
	var out []string
	for _, mv := range mvs {
		out = append(out, string(mv.GetBody()))
		require.NoError(t, c.Ack(context.Background(), mv))
	}
	return out
}

// committedRec is one message a commit appended: its transaction (the
// half's offset) and its message ID.
type committedRec struct{ txn, msgID string }

// readTopic returns the bodies of topic in the store of the stopped broker
// in dir, each with the commits that appended it.
func readTopic(t testing.TB, dir, topic string) map[string][]committedRec {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, brokercore.StoreDir), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	inLog := map[string][]committedRec{}
	for _, q := range st.Queues(topic) {
		for off := st.MinOffset(topic, q); off < st.MaxOffset(topic, q); {
			msgs, err := st.Read(topic, q, off, 256)
			require.NoError(t, err)
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				inLog[string(m.Body)] = append(inLog[string(m.Body)],
					committedRec{m.Properties[txn.PropPreparedQueueOffset], m.Properties[txn.PropUniqKey]})
				off = m.QueueOffset + 1
			}
		}
	}
	return inLog
}
