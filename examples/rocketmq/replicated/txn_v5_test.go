package replicated

import (
	"context"
	"slices"
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
	// the producers whose stream is to it, or relays the check to a
	// follower that reported one (relay.go; within relayReportEvery).
	// Should a check find neither, leadership moves on and the next
	// leader checks.
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

// producerHolders are the nodes whose gRPC endpoint holds a producer
// Telemetry stream publishing topic.
func (c *cluster) producerHolders(topic string) map[int]bool {
	held := map[int]bool{}
	for i, s := range c.nodes {
		if !c.closed[i] && slices.Contains(s.grpc.ProducerTopics(), topic) {
			held[i] = true
		}
	}
	return held
}

// A v5 producer whose Telemetry streams are all to followers is checked
// back all the same: the follower tells the leader it holds producers of
// the topic, and the leader's check goes to it, which pushes the
// RecoverOrphanedTransactionCommand on the stream (Apache's proxy does the
// same for the broker). The first check is answered UNKNOWN, the second
// COMMIT: the message is committed once on every node and received once.
func TestV5TransactionOfAProducerOnAFollowerIsCheckedBack(t *testing.T) {
	const topic = "v5-txn-relay"
	clk := &shiftClock{}
	c := startCluster(t, 3, withTxnClock(clk))
	l := c.leader(30 * time.Second)
	f := (l + 1) % 3
	var asked atomic.Int32
	check := func(mv *rmq.MessageView) rmq.TransactionResolution {
		if asked.Add(1) == 1 {
			return rmq.UNKNOWN
		}
		return rmq.COMMIT
	}
	var st starter
	p := newV5TxnProducer(t, &st, []string{c.nodes[f].GRPCAddr()}, topic, check)
	got := startV5Consumer(t, &st, []string{c.nodes[l].GRPCAddr()}, v5Group, topic)
	st.run(t)

	// The client's stream goes to the node it dialed, or to another of the
	// route's endpoints: leadership goes to a node that holds none.
	var held map[int]bool
	require.Eventually(t, func() bool { held = c.producerHolders(topic); return len(held) > 0 },
		30*time.Second, 10*time.Millisecond, "no node holds the producer's telemetry stream")
	require.Less(t, len(held), len(c.nodes), "every node holds a stream of the producer")
	if held[l] {
		next := 0
		for held[next] {
			next++
		}
		t.Logf("n%d holds a stream of the producer: leadership to n%d", l+1, next+1)
		require.NoError(t, c.nodes[l].Node().Raft().LeadershipTransferToServer(raft.ServerID(c.nodes[next].Node().ID()), c.trans[next].LocalAddr()).Error())
		l = c.leader(30 * time.Second)
		require.False(t, held[l])
	}
	// Every follower reports its producers' groups within relayReportEvery.
	require.Eventually(t, func() bool { return len(c.nodes[l].relay.reg.pick(topic)) > 0 },
		30*time.Second, 10*time.Millisecond, "no follower reported the producer to the leader")
	v5SendTxn(t, p, topic, "relayed") // left open: the check decides
	tm, err := c.nodes[l].Node().Transactions()
	require.NoError(t, err)
	for want := int32(1); want <= 2; want++ {
		sent := tm.Stats().ChecksSent
		clk.Advance(txn.DefaultCheckInterval) // the next check is due
		require.Eventually(t, func() bool { return tm.Stats().ChecksSent > sent },
			30*time.Second, 5*time.Millisecond, "no check made")
		require.Eventually(t, func() bool { return asked.Load() >= want }, 10*time.Second, 5*time.Millisecond,
			"check %d never reached the producer on a follower (failed checks: %d)", want, tm.Stats().ChecksFailed)
	}
	got.waitAll(t, "relayed transaction", []string{"relayed"}, 30*time.Second)
	for i, s := range c.nodes {
		require.Eventually(t, func() bool {
			n := 0
			for q := range DefaultQueueNums {
				n += int(s.Node().Store().MaxOffset(topic, q))
			}
			return n == 1
		}, 10*time.Second, 10*time.Millisecond, "node %d holds the commit once", i)
	}
	require.Equal(t, int32(2), asked.Load(), "asked twice: UNKNOWN, then COMMIT")
	require.Equal(t, uint64(2), c.nodes[l].relay.relayed.Load(), "both checks went through a follower")
	require.False(t, c.producerHolders(topic)[l], "the leader holds no stream of the producer")
	got.mu.Lock()
	defer got.mu.Unlock()
	require.Equal(t, 1, got.seen["relayed"], "received once")
}
