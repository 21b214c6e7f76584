//go:build !race

package replicated

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/brokercore/brokercore/txn"
	"github.com/stretchr/testify/require"
)

// txnListener is the v2 producer's transaction listener: a body's prefix
// says what Execute answers ("commit", "rollback", "check": unknown, and
// commit on the check); the check answers by transaction id what Execute
// decided, and answers unknown (ask again) for one it has not executed.
type txnListener struct {
	mu      sync.Mutex
	decided map[string]primitive.LocalTransactionState // transaction id → the final answer
	checked map[string]int                             // body → checks answered
}

func newTxnListener() *txnListener {
	return &txnListener{decided: map[string]primitive.LocalTransactionState{}, checked: map[string]int{}}
}

func (l *txnListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	body := string(m.Body)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case strings.Contains(body, "commit"):
		l.decided[m.TransactionId] = primitive.CommitMessageState
		return primitive.CommitMessageState
	case strings.Contains(body, "rollback"):
		l.decided[m.TransactionId] = primitive.RollbackMessageState
		return primitive.RollbackMessageState
	}
	l.decided[m.TransactionId] = primitive.CommitMessageState // on the check
	return primitive.UnkonwnState
}

func (l *txnListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked[string(m.Body)]++
	if s, ok := l.decided[m.TransactionId]; ok {
		return s
	}
	// Not executed here (yet): a check can come before the client has run
	// ExecuteLocalTransaction when the half's answer took longer than the
	// check timeout (a loaded machine), or for a half whose send the client
	// saw fail and sent again. Rolling back the first kind would lose an
	// acknowledged commit; asking again later loses nothing.
	return primitive.UnkonwnState
}

func (l *txnListener) checks(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for b, k := range l.checked {
		if strings.HasPrefix(b, prefix) && k > 0 {
			n++
		}
	}
	return n
}

// sendTxn sends one transactional message with key (its body too) until
// it is acknowledged.
func sendTxn(t *testing.T, p rocketmq.TransactionProducer, key string) *primitive.TransactionSendResult {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := primitive.NewMessage("orders", []byte(key))
		m.WithKeys([]string{key})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := p.SendMessageInTransaction(ctx, m)
		cancel()
		if err == nil && r.Status == primitive.SendOK {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("transactional send %s not acknowledged: %v", key, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// keysOnEveryNode waits until every live node holds n messages on the
// real topic and returns each node's count by key.
func (c *cluster) keysOnEveryNode(t *testing.T, n int) []map[string]int {
	t.Helper()
	var out []map[string]int
	for i, s := range c.nodes {
		if c.closed[i] {
			continue
		}
		got := map[string]int{}
		require.Eventually(t, func() bool {
			got = map[string]int{}
			total := 0
			for q := range DefaultQueueNums {
				msgs, err := s.Node().Store().Read("orders", q, 0, 10000)
				if err != nil {
					return false
				}
				for _, m := range msgs {
					got[strings.Join(m.Keys, " ")]++
					total++
				}
			}
			return total >= n
		}, 30*time.Second, 10*time.Millisecond, "node %d", i)
		out = append(out, got)
	}
	return out
}

// The official v2 TransactionProducer against a three-node cluster:
// Execute's commit lands once, a rollback never, an unknown is checked
// back by the leader and its check's commit lands once; after the leader
// stops, the new leader checks back the transactions the old one left
// open, and new transactions commit and roll back as before. Every node
// holds each committed message exactly once, a consumer reads each, and
// none of the rolled-back ones.
func TestV2TransactionProducerAcrossALeaderChange(t *testing.T) {
	// Short: three nodes, one leader stop. BROKERCORE_LONG=1: five nodes,
	// two leader stops in a row.
	nodes, stops, per := 3, 1, 4
	if os.Getenv("BROKERCORE_LONG") == "1" {
		nodes, stops, per = 5, 2, 6
	}
	clk := &shiftClock{}
	c := startCluster(t, nodes, withTxnClock(clk))
	l := newTxnListener()
	p, err := rocketmq.NewTransactionProducer(l, producer.WithNameServer(c.nameServers()),
		producer.WithGroupName("pg-txn"), producer.WithInstanceName(t.Name()+"-p"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })

	want := map[string]int{}
	var rolledBack []string
	send := func(prefix string, commits, rollbacks, checks int) {
		for i := range max(commits, rollbacks, checks) {
			if i < commits {
				k := fmt.Sprintf("%s-commit-%d", prefix, i)
				sendTxn(t, p, k)
				want[k] = 1
			}
			if i < rollbacks {
				k := fmt.Sprintf("%s-rollback-%d", prefix, i)
				sendTxn(t, p, k)
				rolledBack = append(rolledBack, k)
			}
			if i < checks {
				k := fmt.Sprintf("%s-check-%d", prefix, i)
				sendTxn(t, p, k)
				want[k] = 1
			}
		}
	}
	checkedBack := func(prefix string, n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			clk.Advance(txn.DefaultTransactionTimeout)
			return l.checks(prefix) == n
		}, 60*time.Second, 100*time.Millisecond, "checks of %s", prefix)
	}
	for r := range stops {
		leader := c.leader(30 * time.Second)
		// 3*per-1 sends in a row reach every node's queues at least once
		// (the client sends round robin over them): every node then knows
		// the producer (the leader from its own sends, a follower from the
		// ones it forwarded) and can check it back once it leads.
		a := fmt.Sprintf("r%d-a", r)
		send(a, per, per-1, per)
		checkedBack(a+"-check", per)
		b := fmt.Sprintf("r%d-b", r) // left open at the leader's stop
		send(b, 0, 0, 3)
		c.stop(leader)
		next := c.leader(30 * time.Second)
		t.Logf("round %d: leader n%d stopped, n%d leads", r, leader+1, next+1)
		checkedBack(b+"-check", 3)
		send(fmt.Sprintf("r%d-c", r), 3, 2, 0)
	}
	for i, got := range c.keysOnEveryNode(t, len(want)) {
		require.Equal(t, want, got, "live node %d: every commit once, no rollback", i)
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	_, seen := startCounting(t, c.nameServers(), "g-txn", t.Name()+"-c", "orders", nil)
	seen.waitAll(t, keys, 60*time.Second)
	missing, _ := seen.count(rolledBack)
	require.Equal(t, len(rolledBack), missing, "no rolled-back message is delivered")
}

// The same producer against three node processes, through kill -9 of the
// leader's (BROKERCORE_LONG=1: five rounds, the killed node restarted on
// its data each time), with the transactions' real clock at 1 s checks: a
// transaction whose END_TRANSACTION the kill lost is checked back by the
// new leader. Every commit is received exactly once, no rollback.
func TestV2TransactionsThroughLeaderKill9(t *testing.T) {
	rounds := 1
	if os.Getenv("BROKERCORE_LONG") == "1" {
		rounds = 5
	}
	t.Setenv("RMQHA_TXN", "fast") // the children's transaction timing (child_test.go)
	ps := startProcs(t, 3)
	var ns []string
	for _, p := range ps {
		ns = append(ns, p.cfg.NameSrvAddr)
	}
	l := newTxnListener()
	p, err := rocketmq.NewTransactionProducer(l, producer.WithNameServer(ns),
		producer.WithGroupName("pg-txn-kill"), producer.WithInstanceName(t.Name()+"-p"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })

	var committed, rolledBack []string
	send := func(prefix string, n int) {
		for i := range n {
			for _, kind := range []string{"commit", "rollback", "check"} {
				k := fmt.Sprintf("%s-%s-%d", prefix, kind, i)
				sendTxn(t, p, k)
				if kind == "rollback" {
					rolledBack = append(rolledBack, k)
				} else {
					committed = append(committed, k)
				}
			}
		}
	}
	for r := range rounds {
		send(fmt.Sprintf("r%d-a", r), 4) // twelve sends: every node hears the producer
		leader := agreedLeader(t, ps, 30*time.Second)
		leader.kill()
		next := agreedLeader(t, ps, 30*time.Second)
		t.Logf("round %d: leader %s killed, %s leads", r, leader.cfg.ID, next.cfg.ID)
		send(fmt.Sprintf("r%d-b", r), 2)
		if r+1 < rounds {
			leader.start(t)
		}
	}
	_, seen := startCounting(t, ns, "g-txn-kill", t.Name()+"-c", "orders", nil)
	seen.waitAll(t, committed, 60*time.Second)
	_, redelivered := seen.count(committed)
	missing, _ := seen.count(rolledBack)
	require.Equal(t, len(rolledBack), missing, "no rolled-back message is delivered")
	require.Zero(t, redelivered, "each commit is stored once (a new consumer reads each once)")
}
