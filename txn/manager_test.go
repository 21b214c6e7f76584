package txn

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHalfIsInvisibleUntilCommitThenDeliveredOnceRestored(t *testing.T) {
	r := newRig(t, Options{})
	id := r.prepare("orders", "a")
	assert.Empty(t, r.delivered("orders"), "a half message is not on its topic")
	assert.True(t, r.m.Pending(id))

	require.NoError(t, r.m.Commit(id))
	require.NoError(t, r.m.Commit(id), "a repeated commit answers nil")
	require.NoError(t, r.m.End(id, Commit, FromCheck), "a check answer after the client's commit too")
	assert.Equal(t, []string{"a"}, r.delivered("orders"), "once")

	msgs, err := r.log.Read("orders", 1, 0, 10)
	require.NoError(t, err)
	p := msgs[0].Properties
	assert.Equal(t, "u-a", p[PropUniqKey])
	assert.Equal(t, "pg", p[PropProducerGroup])
	assert.Equal(t, strconv.FormatInt(id, 10), p[PropPreparedQueueOffset])
	for _, k := range []string{PropRealTopic, PropRealQueue, PropTransaction, propOpFloor} {
		assert.NotContains(t, p, k)
	}
	s := r.m.Stats()
	assert.Equal(t, 0, s.Pending)
	assert.Equal(t, uint64(1), s.Committed)
}

func TestRollbackDeliversNothingAndTheOppositeResolutionIsRefused(t *testing.T) {
	r := newRig(t, Options{})
	a, b := r.prepare("orders", "a"), r.prepare("orders", "b")
	require.NoError(t, r.m.Rollback(a))
	require.NoError(t, r.m.Rollback(a))
	require.NoError(t, r.m.Commit(b))
	assert.ErrorIs(t, r.m.Commit(a), ErrAlreadyResolved)
	assert.ErrorIs(t, r.m.Rollback(b), ErrAlreadyResolved)
	assert.Equal(t, []string{"b"}, r.delivered("orders"))
	assert.Equal(t, uint64(2), r.m.Stats().Refused)

	r.restart()
	assert.ErrorIs(t, r.m.Commit(a), ErrAlreadyResolved, "the outcome is rebuilt from the op records")
	assert.NoError(t, r.m.Commit(b))
	assert.Equal(t, []string{"b"}, r.delivered("orders"))
}

func TestUnknownLeavesItOpenAndUnknownIDsAreNotFound(t *testing.T) {
	r := newRig(t, Options{})
	id := r.prepare("orders", "a")
	require.NoError(t, r.m.End(id, Unknown, FromClient))
	assert.True(t, r.m.Pending(id))
	assert.ErrorIs(t, r.m.Commit(id+1), ErrNotFound)
	assert.ErrorIs(t, r.m.End(id+1, Unknown, FromClient), ErrNotFound)
	assert.ErrorIs(t, r.m.End(id, Resolution(9), FromClient), ErrInvalid)
}

func TestPrepareRefusesDelayTimerAndBadInputAndChangesNothing(t *testing.T) {
	r := newRig(t, Options{})
	for _, p := range []string{"DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__STARTDELIVERTIME"} {
		_, err := r.m.Prepare(&store.Message{Topic: "t", Properties: map[string]string{p: "3"}}, "pg")
		assert.ErrorIs(t, err, ErrDelayNotSupported, p)
		assert.ErrorIs(t, err, ErrInvalid, p)
	}
	for _, m := range []*store.Message{nil, {Topic: ""}, {Topic: HalfTopic}, {Topic: "t", QueueID: -1},
		{Topic: "t", Properties: map[string]string{PropCheckImmunityTime: "x"}}} {
		_, err := r.m.Prepare(m, "pg")
		assert.ErrorIs(t, err, ErrInvalid)
	}
	_, err := r.m.Prepare(&store.Message{Topic: "t"}, "")
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, int64(0), r.log.MaxOffset(HalfTopic, 0))
	orig := &store.Message{Topic: "t", Properties: map[string]string{"a": "b"}}
	_, err = r.m.Prepare(orig, "pg")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "b"}, orig.Properties, "msg is not changed")
	assert.Equal(t, "t", orig.Topic)
}

func TestCheckBackFirstAfterTimeoutThenEveryIntervalThenRolledBackAtTheLimit(t *testing.T) {
	r := newRig(t, Options{CheckMax: 3})
	id := r.prepare("orders", "a")
	n, err := r.m.CheckNow()
	require.NoError(t, err)
	assert.Zero(t, n, "not before TransactionTimeout")
	r.clk.Advance(DefaultTransactionTimeout - time.Millisecond)
	n, _ = r.m.CheckNow()
	assert.Zero(t, n)
	r.clk.Advance(time.Millisecond)
	n, _ = r.m.CheckNow()
	assert.Equal(t, 1, n)
	require.Len(t, r.check.ids(), 1)
	c := r.check.checks[0]
	assert.Equal(t, id, c.ID)
	assert.Equal(t, "pg", c.Group)
	assert.Equal(t, "orders", c.Message.Topic)
	assert.Equal(t, 1, c.Message.QueueID)
	assert.Equal(t, "1", c.Message.Properties[PropCheckTimes])
	assert.Equal(t, id, c.Message.QueueOffset, "the half's offsets")
	half, err := r.log.Read(HalfTopic, 0, id, 1)
	require.NoError(t, err)
	assert.Equal(t, half[0].LogOffset, c.Message.LogOffset)

	for i := 2; i <= 3; i++ {
		r.clk.Advance(DefaultCheckInterval - time.Millisecond)
		n, _ = r.m.CheckNow()
		assert.Zero(t, n, "not before CheckInterval")
		r.clk.Advance(time.Millisecond)
		n, _ = r.m.CheckNow()
		assert.Equal(t, 1, n)
		assert.Len(t, r.check.ids(), i)
	}
	r.clk.Advance(DefaultCheckInterval)
	n, _ = r.m.CheckNow()
	assert.Equal(t, 1, n, "the round after the last check rolls it back")
	assert.Len(t, r.check.ids(), 3, "no fourth check")
	assert.False(t, r.m.Pending(id))
	kept, err := r.log.Read(CheckMaxTimeTopic, 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, kept, 1)
	assert.Equal(t, "a", string(kept[0].Body))
	assert.ErrorIs(t, r.m.Commit(id), ErrAlreadyResolved)
	assert.Empty(t, r.delivered("orders"))
	s := r.m.Stats()
	assert.Equal(t, uint64(3), s.ChecksSent)
	assert.Equal(t, uint64(1), s.CheckLimitExceeded)
	assert.Equal(t, uint64(1), s.RolledBack)
	assert.Equal(t, uint64(1), s.Refused)
}

func TestCheckCountsSurviveARestart(t *testing.T) {
	r := newRig(t, Options{CheckMax: 2})
	id := r.prepare("orders", "a")
	r.clk.Advance(DefaultTransactionTimeout)
	_, _ = r.m.CheckNow()
	r.restart()
	r.clk.Advance(DefaultCheckInterval - time.Millisecond)
	n, _ := r.m.CheckNow()
	assert.Zero(t, n, "the next check is due CheckInterval after the last one, across the restart")
	r.clk.Advance(time.Millisecond)
	n, _ = r.m.CheckNow()
	assert.Equal(t, 1, n)
	r.restart()
	r.clk.Advance(DefaultCheckInterval)
	_, _ = r.m.CheckNow()
	assert.False(t, r.m.Pending(id), "two checks before and after restarts reached CheckMax 2")
	assert.Equal(t, 2, len(r.check.ids()))
}

func TestCheckImmunityTimeReplacesTheTimeout(t *testing.T) {
	r := newRig(t, Options{})
	h, err := r.m.Prepare(&store.Message{Topic: "t", Properties: map[string]string{PropCheckImmunityTime: "30"}}, "pg")
	require.NoError(t, err)
	r.clk.Advance(29 * time.Second)
	n, _ := r.m.CheckNow()
	assert.Zero(t, n)
	r.clk.Advance(time.Second)
	n, _ = r.m.CheckNow()
	assert.Equal(t, 1, n)
	assert.Equal(t, []int64{h.QueueOffset}, r.check.ids())
}

func TestACheckAnsweredWithCommitDeliversOnce(t *testing.T) {
	r := newRig(t, Options{})
	id := r.prepare("orders", "a")
	r.m.SetChecker(CheckerFunc(func(c Check) error {
		go func() { _ = r.m.End(c.ID, Commit, FromCheck) }() // answers come back later, on another connection
		return nil
	}))
	r.clk.Advance(DefaultTransactionTimeout)
	_, _ = r.m.CheckNow()
	require.Eventually(t, func() bool { return !r.m.Pending(id) }, 10*time.Second, time.Millisecond)
	require.NoError(t, r.m.Commit(id), "the client's own commit racing the answer")
	assert.Equal(t, []string{"a"}, r.delivered("orders"))
}

func TestNoCheckerStillCountsChecksAndRollsBackAtTheLimit(t *testing.T) {
	r := newRig(t, Options{CheckMax: 1})
	r.m.SetChecker(nil)
	id := r.prepare("orders", "a")
	r.clk.Advance(DefaultTransactionTimeout)
	_, _ = r.m.CheckNow()
	assert.Equal(t, uint64(1), r.m.Stats().ChecksFailed)
	r.clk.Advance(DefaultCheckInterval)
	_, _ = r.m.CheckNow()
	assert.False(t, r.m.Pending(id))
}

func TestStartedDriverChecksOnTheTickAndCloseWaits(t *testing.T) {
	r := newRig(t, Options{Tick: time.Millisecond})
	id := r.prepare("orders", "a")
	require.NoError(t, r.m.Start())
	require.NoError(t, r.m.Start())
	r.clk.Advance(DefaultTransactionTimeout)
	require.Eventually(t, func() bool { return len(r.check.ids()) == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []int64{id}, r.check.ids())
	require.NoError(t, r.m.Close())
	require.NoError(t, r.m.Close())
	assert.ErrorIs(t, r.m.Start(), ErrClosed)
	assert.ErrorIs(t, r.m.Commit(id), ErrClosed)
	_, err := r.m.Prepare(&store.Message{Topic: "t"}, "pg")
	assert.ErrorIs(t, err, ErrClosed)
}

func TestStartedManagerIngestsHalvesAndOpsAnotherWriterAppended(t *testing.T) {
	r := newRig(t, Options{Tick: time.Hour})
	require.NoError(t, r.m.Start())
	// another writer (a replica applying a replicated log) appends a half and its commit
	h := halfOf(&store.Message{Topic: "orders", QueueID: 1, Body: []byte("x")}, "pg", 0)
	require.NoError(t, r.log.Append(h))
	require.Eventually(t, func() bool { return r.m.Pending(h.QueueOffset) }, 10*time.Second, time.Millisecond)
	require.NoError(t, r.log.Append(committed(h), opRecord(h.QueueOffset, opCommit)))
	require.Eventually(t, func() bool { return r.m.Stats().Committed == 1 }, 10*time.Second, time.Millisecond)
	assert.NoError(t, r.m.Commit(h.QueueOffset))
	assert.Equal(t, []string{"x"}, r.delivered("orders"))
}

func TestProgressLetsARestartSkipClosedHalvesButADamagedOneIsIgnored(t *testing.T) {
	r := newRig(t, Options{Remember: 2})
	var ids []int64
	for i := 0; i < 10; i++ {
		ids = append(ids, r.prepare("orders", itoa(i)))
	}
	for _, id := range ids[:8] {
		require.NoError(t, r.m.Commit(id))
	}
	r.restart()
	assert.Equal(t, 2, r.m.Stats().Pending)
	assert.Equal(t, uint64(4), r.m.Stats().Prepared, "read from the oldest remembered half, not from 0")
	assert.ErrorIs(t, r.m.Commit(ids[0]), ErrNotFound, "forgotten beyond Remember")
	assert.NoError(t, r.m.Commit(ids[7]), "remembered")

	require.NoError(t, r.m.Close())
	require.NoError(t, osWrite(r.opts.ProgressPath, []byte("garbage")))
	require.NoError(t, r.log.Close())
	r.open(r.dir)
	assert.Equal(t, 2, r.m.Stats().Pending)
	assert.Equal(t, uint64(10), r.m.Stats().Prepared, "a damaged progress file: the whole queue is read")
	assert.Equal(t, 8, len(r.delivered("orders")))
}

func TestProgressAheadOfTheLogIsNotTrusted(t *testing.T) {
	r := newRig(t, Options{})
	id := r.prepare("orders", "a")
	require.NoError(t, r.m.Close())
	require.NoError(t, osWrite(r.opts.ProgressPath, encodeProgress(progress{half: 5, op: 5, halfNext: 5, opNext: 5})))
	require.NoError(t, r.log.Close())
	r.open(r.dir)
	assert.True(t, r.m.Pending(id), "the log decides")
}

func TestNewRefusesBadOptions(t *testing.T) {
	_, err := New(nil, Options{})
	assert.ErrorIs(t, err, ErrInvalid)
	r := newRig(t, Options{})
	_, err = New(r.log, Options{CheckMax: -1})
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestEndVerifiedRefusesWhatItsCheckRefusesAndChangesNothing(t *testing.T) {
	r := newRig(t, Options{})
	id := r.prepare("orders", "a")
	errWrong := errors.New("not the producer's message")
	var seen *store.Message
	err := r.m.EndVerified(id, Commit, FromClient, func(m *store.Message) error { seen = m; return errWrong })
	assert.ErrorIs(t, err, errWrong)
	assert.Equal(t, "orders", seen.Topic, "verify sees the message on its real topic")
	assert.True(t, r.m.Pending(id))
	assert.Empty(t, r.delivered("orders"))
	require.NoError(t, r.m.EndVerified(id, Commit, FromClient, func(*store.Message) error { return nil }))
	called := false
	require.NoError(t, r.m.EndVerified(id, Commit, FromClient, func(*store.Message) error { called = true; return errWrong }))
	assert.False(t, called, "a repeated resolution is not verified again")
	assert.Equal(t, []string{"a"}, r.delivered("orders"))
}
