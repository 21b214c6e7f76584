package replica

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/testkit"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// checks records the check-backs every node's Manager sent, by node.
type checks struct {
	mu  sync.Mutex
	got map[string][]txn.Check
}

func (c *checks) checker(node string) txn.Checker {
	return txn.CheckerFunc(func(ch txn.Check) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.got[node] = append(c.got[node], ch)
		return nil
	})
}

// of returns the ids node checked, in order.
func (c *checks) of(node string) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []int64
	for _, ch := range c.got[node] {
		ids = append(ids, ch.ID)
	}
	return ids
}

// txnCluster is a 3-node cluster running transactions on an injected
// clock, its checks recorded.
func txnCluster(t *testing.T) (*tcluster, *testkit.Clock, *checks) {
	clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
	cs := &checks{got: map[string][]txn.Check{}}
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.Now = clock.Now
		cfg.Transactions = &txn.Options{Tick: 5 * time.Millisecond, Checker: cs.checker(cfg.ID)}
	})
	return c, clock, cs
}

func transactions(t *testing.T, n *Node) *txn.Manager {
	t.Helper()
	tm, err := n.Transactions()
	require.NoError(t, err)
	return tm
}

// requireEverywhere waits until every live node converged and checks that
// each holds want on topic's queue 0.
func requireEverywhere(t *testing.T, c *tcluster, topic string, want map[string]int) {
	t.Helper()
	c.requireIdentical()
	for _, n := range c.live() {
		require.Equal(t, want, bodiesIn(t, n, topic, 0), "node %s", n.ID())
	}
}

// A commit's real message lands once on every replica, whatever how often
// it is committed; a rollback and an open transaction leave nothing on the
// real topic (their halves are in the half topic only).
func TestTransactionsCommitOnceRollbackNothingOnEveryReplica(t *testing.T) {
	c, _, _ := txnCluster(t)
	tm := transactions(t, c.leader())
	commit, err := tm.Prepare(msg("orders", 0, "commit"), "pg")
	require.NoError(t, err)
	rollback, err := tm.Prepare(msg("orders", 0, "rollback"), "pg")
	require.NoError(t, err)
	_, err = tm.Prepare(msg("orders", 0, "open"), "pg")
	require.NoError(t, err)
	requireEverywhere(t, c, "orders", map[string]int{})

	require.NoError(t, tm.Commit(commit.QueueOffset))
	require.NoError(t, tm.Commit(commit.QueueOffset), "a repeated commit appends nothing")
	require.NoError(t, tm.Rollback(rollback.QueueOffset))
	require.ErrorIs(t, tm.Commit(rollback.QueueOffset), txn.ErrAlreadyResolved)
	requireEverywhere(t, c, "orders", map[string]int{"commit": 1})
	requireEverywhere(t, c, txn.HalfTopic, map[string]int{"commit": 1, "rollback": 1, "open": 1})
	require.Equal(t, 1, tm.Stats().Pending)
}

// A follower has no Manager: it appends nothing and checks nothing back.
// Only the leader of the moment checks a due transaction: after a leader
// change the new leader sends the next check, the old one (a follower
// now) none.
func TestFollowersSendNoCheckBacks(t *testing.T) {
	c, clock, cs := txnCluster(t)
	first := c.leader()
	h, err := transactions(t, first).Prepare(msg("orders", 0, "unknown"), "pg")
	require.NoError(t, err)
	for _, n := range c.live() {
		if n != first {
			_, err := n.Transactions()
			require.ErrorIs(t, err, ErrNotLeader)
		}
	}
	clock.Advance(txn.DefaultTransactionTimeout)
	require.Eventually(t, func() bool { return len(cs.of(first.ID())) > 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []int64{h.QueueOffset}, cs.of(first.ID()))

	require.Eventually(t, func() bool {
		_ = first.Raft().LeadershipTransfer().Error()
		l := c.leader()
		return l != first
	}, 15*time.Second, 10*time.Millisecond)
	second := c.leader()
	clock.Advance(txn.DefaultCheckInterval)
	require.Eventually(t, func() bool { return len(cs.of(second.ID())) > 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []int64{h.QueueOffset}, cs.of(second.ID()))
	// Every check is a raft entry of the leader's: once every node holds
	// them, the followers have sent none since they follow.
	c.waitConverged()
	for _, n := range c.live() {
		switch n {
		case first:
			require.Equal(t, []int64{h.QueueOffset}, cs.of(n.ID()), "no check since it follows")
		case second:
		default:
			require.Empty(t, cs.of(n.ID()), "follower %s checked back", n.ID())
		}
	}
	tm := transactions(t, second)
	require.Equal(t, uint64(2), tm.Stats().ChecksSent, "both checks are in the log")
}

// end resolves transaction id on whichever node leads, until one answers
// nil (an earlier attempt that may have landed makes a later one a
// repeat).
func end(t *testing.T, c *tcluster, id int64, r txn.Resolution) {
	t.Helper()
	var last error
	require.Eventually(t, func() bool {
		tm, err := c.leader().Transactions()
		if err == nil {
			err = tm.End(id, r, txn.FromClient)
		}
		last = err
		return err == nil
	}, 15*time.Second, 5*time.Millisecond, "last error: %v", last)
}

// killLeader kills the leader and returns the new one.
func killLeader(t *testing.T, c *tcluster) (old string, l *Node) {
	t.Helper()
	old = c.leader().ID()
	c.kill(old)
	l = c.leader()
	require.NotEqual(t, old, l.ID())
	return old, l
}

// A transaction prepared on the old leader is open on the new one (its
// Manager rebuilt from the replica) and its commit lands once on every
// replica, the old leader included once it is back.
func TestPreparedOnOldLeaderCommittedOnceAfterLeaderChange(t *testing.T) {
	c, _, _ := txnCluster(t)
	tm := transactions(t, c.leader())
	h, err := tm.Prepare(msg("orders", 0, "across"), "pg")
	require.NoError(t, err)
	done, err := tm.Prepare(msg("orders", 0, "before"), "pg")
	require.NoError(t, err)
	require.NoError(t, tm.Commit(done.QueueOffset))

	old, l := killLeader(t, c)
	tm = transactions(t, l)
	require.True(t, tm.Pending(h.QueueOffset))
	require.False(t, tm.Pending(done.QueueOffset))
	end(t, c, done.QueueOffset, txn.Commit) // the old leader's commit is known: a repeat
	end(t, c, h.QueueOffset, txn.Commit)
	c.restart(old)
	requireEverywhere(t, c, "orders", map[string]int{"before": 1, "across": 1})
}

// A transaction the old leader left open is checked back by the new
// leader, and the answer to its check commits it once on every replica.
func TestPreparedOnOldLeaderCheckedBackByTheNewOne(t *testing.T) {
	c, clock, cs := txnCluster(t)
	h, err := transactions(t, c.leader()).Prepare(msg("orders", 0, "checked"), "pg")
	require.NoError(t, err)
	old, l := killLeader(t, c)
	clock.Advance(txn.DefaultTransactionTimeout)
	require.Eventually(t, func() bool { return len(cs.of(l.ID())) > 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []int64{h.QueueOffset}, cs.of(l.ID()))
	require.NoError(t, transactions(t, l).End(h.QueueOffset, txn.Commit, txn.FromCheck))
	c.restart(old)
	requireEverywhere(t, c, "orders", map[string]int{"checked": 1})
}

// A commit the isolated leader could not get committed (raft's "not
// committed": it may or may not land) never lands twice: the majority's
// new leader sees the transaction open (the entry never reached it) and
// commits it; the old leader's entry is dropped when it rejoins.
func TestCommitNotCommittedByTheOldLeaderLandsOnceAfterTheChange(t *testing.T) {
	c, _, _ := txnCluster(t)
	old := c.leader()
	tm := transactions(t, old)
	h, err := tm.Prepare(msg("orders", 0, "cut off"), "pg")
	require.NoError(t, err)
	c.waitConverged()
	c.isolate(old.ID())
	err = tm.Commit(h.QueueOffset)
	require.Error(t, err)
	t.Logf("commit on the isolated leader: %v", err)
	var l *Node
	require.Eventually(t, func() bool {
		for _, n := range c.live() {
			if n != old && n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	}, 15*time.Second, 5*time.Millisecond)
	require.True(t, transactions(t, l).Pending(h.QueueOffset))
	end(t, c, h.QueueOffset, txn.Commit)
	c.heal(old.ID())
	c.leader()
	requireEverywhere(t, c, "orders", map[string]int{"cut off": 1})
}

// The fence: an entry of transaction records applies only in the term
// that proposed it. One proposed for an earlier term is refused on every
// node, and a term's log refuses appends once its term is over.
func TestTransactionRecordsOfAnotherTermAreRefusedEverywhere(t *testing.T) {
	c, _, _ := txnCluster(t)
	l := c.leader()
	term := l.currentTerm().raftTerm
	_, err := l.apply(&entry{Kind: kindFenced, Term: term - 1, Msgs: []*store.Message{msg("orders", 0, "stale")}})
	require.ErrorIs(t, err, ErrStaleTerm)
	require.ErrorIs(t, err, ErrRejected)
	stale := newTermLog(l, term-1)
	err = stale.Append(msg("orders", 0, "over"))
	require.ErrorIs(t, err, store.ErrClosed, "nothing proposed: it cannot have landed")
	fresh := newTermLog(l, term)
	m := msg("orders", 0, "current")
	require.NoError(t, fresh.Append(m, msg(txn.OpTopic, 0, "op")))
	require.Equal(t, int64(0), m.QueueOffset)
	require.False(t, m.StoredAt.IsZero(), "the assigned fields are filled in")
	requireEverywhere(t, c, "orders", map[string]int{"current": 1})
	requireEverywhere(t, c, txn.OpTopic, map[string]int{"op": 1})
}

// Bad records are refused before anything is proposed, as the store
// refuses them (store.ErrInvalid: they cannot have landed).
func TestTransactionLogRefusesBadRecords(t *testing.T) {
	c, _, _ := txnCluster(t)
	l := c.leader()
	tl := newTermLog(l, l.currentTerm().raftTerm)
	before := l.fsm.lastIndex()
	for name, m := range map[string]*store.Message{
		"nil":      nil,
		"bad name": msg("a/b", 0, "x"),
		"queue":    msg("orders", -1, "x"),
	} {
		require.ErrorIs(t, tl.Append(m), store.ErrInvalid, name)
	}
	require.ErrorIs(t, tl.Append(), store.ErrInvalid, "empty")
	require.Equal(t, before, l.fsm.lastIndex())
}

// Groups of more than one raft group refuse transactions: a commit's
// records are in two groups.
func TestGroupsRefuseTransactions(t *testing.T) {
	_, err := OpenGroups(Config{ID: "n1", Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", Transactions: &txn.Options{}}, 2)
	require.ErrorIs(t, err, ErrInvalid)
}

// Many transactions across several leader changes: each committed one
// lands exactly once, each rolled-back one never, on every replica.
func TestTransactionsAcrossLeaderChanges(t *testing.T) {
	c, _, _ := txnCluster(t)
	rounds, per := 3, 10
	if long() {
		rounds, per = 10, 50
	}
	want := map[string]int{}
	for r := range rounds {
		var ids []int64
		tm := transactions(t, c.leader())
		for i := range per {
			h, err := tm.Prepare(msg("orders", 0, fmt.Sprintf("r%d-%d", r, i)), "pg")
			require.NoError(t, err)
			ids = append(ids, h.QueueOffset)
		}
		flap(t, c, r)
		for i, id := range ids {
			if i%2 == 0 {
				end(t, c, id, txn.Commit)
				want[fmt.Sprintf("r%d-%d", r, i)] = 1
			} else {
				end(t, c, id, txn.Rollback)
			}
		}
	}
	requireEverywhere(t, c, "orders", want)
}

// The FSM applies a fenced entry only when raft committed it in the term
// it names (every node reads the same term from the log): else nothing of
// it is stored and nothing counted as applied.
func TestFencedEntryAppliesOnlyInItsTerm(t *testing.T) {
	f := newTestFSM(t)
	at := time.Unix(1_700_000_000, 0)
	e := &entry{Kind: kindFenced, At: at, Term: 3, Msgs: []*store.Message{msg("orders", 0, "real"), msg(txn.OpTopic, 0, "op")}}
	r, _ := f.Apply(&raft.Log{Index: 1, Term: 2, Type: raft.LogCommand, Data: encodeEntry(e)}).(applyResult)
	require.ErrorIs(t, r.err, ErrStaleTerm)
	require.Equal(t, int64(0), f.st.Stats().LogNext)
	r, _ = f.Apply(&raft.Log{Index: 2, Term: 3, Type: raft.LogCommand, Data: encodeEntry(e)}).(applyResult)
	require.NoError(t, r.err)
	require.Len(t, r.msgs, 2)
	require.Equal(t, []int64{0, 1}, []int64{r.msgs[0].LogOffset, r.msgs[1].LogOffset}, "one batch")
	require.Equal(t, int64(2), f.st.Stats().LogNext)
}

// Concurrent appends of one term's log are joined into shared entries (a
// batcher of its own), each append still one batch: a real message and its
// op record are neighbours in the log on every replica, every pair once.
func TestConcurrentTransactionAppendsStayBatches(t *testing.T) {
	c, _, _ := txnCluster(t)
	l := c.leader()
	tl := newTermLog(l, l.currentTerm().raftTerm)
	const writers, each = 16, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				body := fmt.Sprintf("w%d-%d", w, i)
				if err := tl.Append(msg("orders", w%4, body), msg(txn.OpTopic, 0, body)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d appends in %d entries", tl.batch.stats.Produces.Load(), tl.batch.stats.Entries.Load())
	c.requireIdentical()
	for _, n := range c.live() {
		ops, err := n.Read(txn.OpTopic, 0, 0, writers*each+1)
		require.NoError(t, err)
		require.Len(t, ops, writers*each)
		for _, op := range ops {
			real, err := n.Store().ReadAt(op.LogOffset - 1)
			require.NoError(t, err)
			require.Equal(t, "orders", real.Topic)
			require.Equal(t, op.Body, real.Body, "node %s: the pair is one batch", n.ID())
		}
	}
}

// lostAnswer is a txn.Log over a term's log whose next commit-sized
// append lands but is answered as raft answers an entry it did not
// confirm (ErrNotCommitted): the Manager must not guess.
type lostAnswer struct {
	*termLog
	lose    atomic.Bool
	dropped bool // the lost one did not land either
}

func (l *lostAnswer) Append(msgs ...*store.Message) error {
	if len(msgs) == 2 && l.lose.CompareAndSwap(true, false) {
		if !l.dropped {
			if err := l.termLog.Append(msgs...); err != nil {
				return err
			}
		}
		return fmt.Errorf("produce entry: leadership lost while committing log: %w", ErrNotCommitted)
	}
	return l.termLog.Append(msgs...)
}

// The txn.Log contract on the replica: a commit raft did not confirm
// leaves its transaction uncertain; the next End settles it from the log
// (a probe appended in the same term, then a read of the local replica):
// it finds the records and answers the commit as repeated, or finds none
// (the entry never landed) and commits. Either way the real message is on
// every replica once.
func TestUncertainCommitIsSettledFromTheLog(t *testing.T) {
	for _, dropped := range []bool{false, true} {
		t.Run(fmt.Sprintf("landed=%v", !dropped), func(t *testing.T) {
			c, _, _ := txnCluster(t)
			l := c.leader()
			log := &lostAnswer{termLog: newTermLog(l, l.currentTerm().raftTerm), dropped: dropped}
			tm, err := txn.New(log, txn.Options{Now: l.cfg.Now})
			require.NoError(t, err)
			t.Cleanup(func() { _ = tm.Close() })
			h, err := tm.Prepare(msg("orders", 0, "lost answer"), "pg")
			require.NoError(t, err)
			log.lose.Store(true)
			require.ErrorIs(t, tm.Commit(h.QueueOffset), ErrNotCommitted)
			require.Equal(t, 1, tm.Stats().Uncertain, "not guessed")
			require.NoError(t, tm.Commit(h.QueueOffset))
			require.Zero(t, tm.Stats().Uncertain)
			require.False(t, tm.Pending(h.QueueOffset))
			requireEverywhere(t, c, "orders", map[string]int{"lost answer": 1})
		})
	}
}
