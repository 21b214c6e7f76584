package replicated

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/brokercore/brokercore/txn"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// newV5TxnProducer is a v5 Producer of topic over endpoints whose
// transaction checker is check.
func newV5TxnProducer(t *testing.T, st *starter, endpoints []string, topic string, check func(*rmq.MessageView) rmq.TransactionResolution) rmq.Producer {
	t.Helper()
	var checked atomic.Bool
	p, err := rmq.NewProducer(v5Config(endpoints, ""), rmq.WithTopics(topic),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution {
			checked.Store(true)
			return check(mv)
		}}))
	require.NoError(t, err)
	st.add(p.Start, nil)
	t.Cleanup(func() {
		// One that answered a check-back is left running (v5.1.4's
		// GracefulStop races its check-back goroutine; see grpcapi's
		// newTxnProducer): the nodes' Close ends its connections.
		if !checked.Load() {
			_ = p.GracefulStop()
		}
	})
	return p
}

// v5SendTxn sends one transactional message with key and returns its
// transaction.
func v5SendTxn(t *testing.T, p rmq.Producer, topic, key string) rmq.Transaction {
	t.Helper()
	m := &rmq.Message{Topic: topic, Body: []byte("body-" + key)}
	m.SetKeys(key)
	tx := p.BeginTransaction()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.SendWithTransaction(ctx, m, tx)
	require.NoError(t, err, key)
	return tx
}

// The v5 client's transactions on a three-node cluster: a producer
// connected to a follower prepares, commits and rolls back through it
// (SendMessage and EndTransaction forwarded to the leader); a transaction
// left open is checked back by the leader (RecoverOrphanedTransactionCommand
// over a producer's Telemetry stream to the leader: the one connected to
// it, or the other, whose client keeps streams to the endpoints of its
// routes), and the answer commits it. Each commit lands once on every node
// and is received; the rollback never.
func TestV5TransactionsThroughAFollowerAndCheckedBackByTheLeader(t *testing.T) {
	const topic = "v5-txn"
	clk := &shiftClock{}
	c := startCluster(t, 3, withTxnClock(clk))
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	leader := c.nodes[l]
	var mu sync.Mutex
	asked := map[string]int{}
	check := func(mv *rmq.MessageView) rmq.TransactionResolution {
		mu.Lock()
		defer mu.Unlock()
		asked[mv.GetKeys()[0]]++
		if mv.GetKeys()[0] == "leader-check" {
			return rmq.COMMIT
		}
		return rmq.ROLLBACK
	}
	var st starter
	viaFollower := newV5TxnProducer(t, &st, []string{f.GRPCAddr()}, topic, check)
	atLeader := newV5TxnProducer(t, &st, []string{leader.GRPCAddr()}, topic, check)
	got := startV5Consumer(t, &st, []string{leader.GRPCAddr()}, v5Group, topic)
	st.run(t)

	require.NoError(t, v5SendTxn(t, viaFollower, topic, "follower-commit").Commit())
	require.NoError(t, v5SendTxn(t, viaFollower, topic, "follower-rollback").RollBack())
	v5SendTxn(t, atLeader, topic, "leader-check") // left open
	// The client keeps its Telemetry stream to one endpoint of its routes
	// (they name every node), whichever it dialed: the leader checks back
	// the producers whose stream is to it. Leadership moves round the
	// nodes until one delivers its check.
	answered := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(asked) > 0
	}
	for attempt := 0; !answered(); attempt++ {
		require.Less(t, attempt, 2*len(c.nodes), "no leader reached a producer")
		cur := c.leader(30 * time.Second)
		tm, err := c.nodes[cur].Node().Transactions()
		require.NoError(t, err)
		failed := tm.Stats().ChecksFailed
		clk.Advance(txn.DefaultCheckInterval) // due: the first check, or the next after one no producer got
		require.Eventually(t, func() bool { return answered() || tm.Stats().ChecksFailed > failed },
			30*time.Second, 5*time.Millisecond, "n%d made no check", cur+1)
		if !answered() {
			next := (cur + 1) % len(c.nodes)
			t.Logf("n%d reached no producer: leadership to n%d", cur+1, next+1)
			_ = c.nodes[cur].Node().Raft().LeadershipTransferToServer(raft.ServerID(c.nodes[next].Node().ID()), c.trans[next].LocalAddr()).Error()
		}
	}
	got.waitAll(t, "transactions", []string{"follower-commit", "leader-check"}, 30*time.Second)
	mu.Lock()
	require.Equal(t, map[string]int{"leader-check": 1}, asked, "only the open one is checked, once")
	mu.Unlock()
	for i, s := range c.nodes {
		require.Eventually(t, func() bool {
			n := 0
			for q := range DefaultQueueNums {
				n += int(s.Node().Store().MaxOffset(topic, q))
			}
			return n == 2
		}, 10*time.Second, 10*time.Millisecond, "node %d holds the two commits", i)
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	// (A leader change redelivers what was in flight: pop's state is the
	// leader's. The stores above hold each commit once.)
	require.Zero(t, got.seen["follower-rollback"], "the rollback is never received")
}
