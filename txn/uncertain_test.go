package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultRig is a Manager over a faultLog over the rig's store.
func faultRig(t *testing.T, opts Options) (*rig, *faultLog, *Manager) {
	t.Helper()
	r := newRig(t, opts)
	fl := &faultLog{Log: r.log}
	m, err := New(fl, r.opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return r, fl, m
}

// The commit's batch landed but its caller saw an error (a store that lost
// its answer): the retry settles it from the log at once — committed, once
// — instead of refusing until a restart.
func TestUncertainCommitThatLandedIsSettledByTheRetryWithoutARestart(t *testing.T) {
	r, fl, m := faultRig(t, Options{})
	id := r.prepare("orders", "a")
	require.NoError(t, m.catchUp())
	fl.failNext(true)
	require.ErrorIs(t, m.Commit(id), errKilled)
	assert.Equal(t, 1, m.Stats().Uncertain)

	require.NoError(t, m.Commit(id), "the log says it committed: the retry answers as a repeat")
	assert.ErrorIs(t, m.Rollback(id), ErrAlreadyResolved)
	assert.Zero(t, m.Stats().Uncertain)
	assert.False(t, m.Pending(id))
	assert.Equal(t, []string{"a"}, r.delivered("orders"))
	assert.Equal(t, uint64(1), m.Stats().Committed)
}

// Nothing landed: the retry finds no record after its probe, so the
// transaction is open again and the retry commits it, once.
func TestUncertainCommitThatDidNotLandIsOpenAgainAndTheRetryCommitsOnce(t *testing.T) {
	r, fl, m := faultRig(t, Options{})
	id := r.prepare("orders", "a")
	require.NoError(t, m.catchUp())
	fl.failNext(false)
	require.ErrorIs(t, m.Commit(id), errKilled)
	assert.Equal(t, 1, m.Stats().Uncertain)

	require.NoError(t, m.Commit(id))
	require.NoError(t, m.Commit(id))
	assert.Zero(t, m.Stats().Uncertain)
	assert.Equal(t, []string{"a"}, r.delivered("orders"))

	m2, err := New(r.log, r.opts) // the log agrees
	require.NoError(t, err)
	defer m2.Close()
	assert.False(t, m2.Pending(id))
	assert.ErrorIs(t, m2.Rollback(id), ErrAlreadyResolved)
}

// While the log keeps failing nothing can be decided: a retry answers
// ErrUncertain, the transaction is neither checked nor rolled back, however
// late. Once the log works again the driver's settling (each tick) opens
// it again, and its check is sent when due.
func TestUncertainStaysWhileTheLogFailsAndTheTickSettlesItOnceItWorks(t *testing.T) {
	r, fl, m := faultRig(t, Options{})
	id := r.prepare("orders", "a")
	require.NoError(t, m.catchUp())
	fl.setDown(true)
	require.ErrorIs(t, m.Commit(id), errKilled)
	assert.ErrorIs(t, m.Commit(id), ErrUncertain)
	assert.ErrorIs(t, m.Rollback(id), ErrUncertain)
	r.clk.Advance(time.Hour)
	n, _ := m.CheckNow()
	assert.Zero(t, n, "an uncertain transaction is neither checked nor rolled back")
	_, err := m.settleUncertain()
	require.ErrorIs(t, err, errKilled, "the probe fails while the log does")
	assert.Equal(t, 1, m.Stats().Uncertain)

	fl.setDown(false)
	settled, err := m.settleUncertain()
	require.NoError(t, err)
	assert.Equal(t, 1, settled)
	assert.Zero(t, m.Stats().Uncertain)
	assert.True(t, m.Pending(id))
	r.check.reset()
	n, err = m.CheckNow()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []int64{id}, r.check.ids(), "open again, and long due: checked")
	require.NoError(t, m.End(id, Commit, FromCheck))
	assert.Equal(t, []string{"a"}, r.delivered("orders"))
}

// A check record whose append failed uncertainly and landed: the settling
// counts the check (the log has it) and the transaction is due again after
// CheckInterval, not at once.
func TestUncertainCheckThatLandedCountsOnceSettled(t *testing.T) {
	r, fl, m := faultRig(t, Options{})
	id := r.prepare("orders", "a")
	require.NoError(t, m.catchUp())
	r.clk.Advance(DefaultTransactionTimeout)
	fl.failNext(true)
	_, err := m.CheckNow()
	require.ErrorIs(t, err, errKilled)
	assert.Equal(t, 1, m.Stats().Uncertain)
	_, err = m.settleUncertain()
	require.NoError(t, err)
	s := m.Stats()
	assert.Zero(t, s.Uncertain)
	assert.Equal(t, uint64(1), s.ChecksSent, "the landed check record counts")
	n, _ := m.CheckNow()
	assert.Zero(t, n, "next check due after CheckInterval")
	r.clk.Advance(DefaultCheckInterval)
	n, _ = m.CheckNow()
	assert.Equal(t, 1, n)
	assert.True(t, m.Pending(id))
}

// Nothing uncertain: settling appends nothing.
func TestSettleWithNothingUncertainAppendsNothing(t *testing.T) {
	r, fl, m := faultRig(t, Options{})
	r.prepare("orders", "a")
	n, err := m.settleUncertain()
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Zero(t, fl.tried())
}

// The started driver settles by itself: no retry, no restart.
func TestStartedDriverSettlesAnUncertainTransaction(t *testing.T) {
	r, fl, m := faultRig(t, Options{Tick: time.Millisecond})
	id := r.prepare("orders", "a")
	require.NoError(t, m.catchUp())
	fl.failNext(false)
	require.ErrorIs(t, m.Commit(id), errKilled)
	require.NoError(t, m.Start())
	require.Eventually(t, func() bool { return m.Stats().Uncertain == 0 }, 30*time.Second, time.Millisecond)
	assert.True(t, m.Pending(id))
	require.NoError(t, m.Commit(id))
	assert.Equal(t, []string{"a"}, r.delivered("orders"))
}
