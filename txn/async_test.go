package txn

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

// gateLog holds every Append at a gate until open, counting the ones that
// wait there.
type gateLog struct {
	Log
	gate    chan struct{}
	once    sync.Once
	waiting atomic.Int64
}

func newGateLog(l Log) *gateLog { return &gateLog{Log: l, gate: make(chan struct{})} }

func (g *gateLog) Append(msgs ...*store.Message) error {
	g.waiting.Add(1)
	<-g.gate
	return g.Log.Append(msgs...)
}

func (g *gateLog) open() { g.once.Do(func() { close(g.gate) }) }

// gatedRig is a Manager over a gateLog over the rig's store, with the
// transactions prepared through the rig's own manager.
func gatedRig(t *testing.T, n int) (*rig, *gateLog, *Manager, []int64) {
	t.Helper()
	r := newRig(t, Options{})
	var ids []int64
	for i := 0; i < n; i++ {
		ids = append(ids, r.prepare("orders", itoa(i)))
	}
	g := newGateLog(r.log)
	t.Cleanup(g.open)
	m, err := New(g, r.opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return r, g, m, ids
}

// result collects done's answers.
type result struct{ ch chan error }

func newResult(n int) *result { return &result{ch: make(chan error, n)} }

func (r *result) done(err error) { r.ch <- err }

// EndAsync answers once the resolution is decided, before its records are
// in the log; the transaction stays busy meanwhile: a repeat and the
// opposite resolution wait for the append and then answer as after it.
func TestEndAsyncAnswersBeforeTheAppendAndTheTransactionWaitsForIt(t *testing.T) {
	r, g, m, ids := gatedRig(t, 1)
	id := ids[0]
	res := newResult(1)
	require.NoError(t, m.EndAsync(id, Commit, FromClient, nil, res.done))
	assert.Empty(t, r.delivered("orders"), "nothing appended yet: the append waits at the gate")
	assert.True(t, m.Pending(id))

	opposite := make(chan error, 1)
	go func() { opposite <- m.Rollback(id) }()
	g.open()
	require.NoError(t, <-res.ch)
	require.ErrorIs(t, <-opposite, ErrAlreadyResolved)
	require.NoError(t, m.Commit(id))
	assert.Equal(t, []string{"0"}, r.delivered("orders"))
	assert.Equal(t, uint64(1), m.Stats().Committed)
}

// What EndAsync refuses, it refuses before it answers, and appends
// nothing: an unknown id, a failed verification, the opposite resolution.
// A repeat answers nil and reports done(nil) at once.
func TestEndAsyncRefusesSynchronouslyAndARepeatIsDoneAtOnce(t *testing.T) {
	r := newRig(t, Options{})
	a, b := r.prepare("orders", "a"), r.prepare("orders", "b")
	require.ErrorIs(t, r.m.EndAsync(99, Commit, FromClient, nil, nil), ErrNotFound)
	errNo := errors.New("not this message")
	require.ErrorIs(t, r.m.EndAsync(a, Commit, FromClient, func(*store.Message) error { return errNo }, nil), errNo)
	assert.True(t, r.m.Pending(a), "a refused verification leaves it open")
	require.NoError(t, r.m.Rollback(b))
	require.ErrorIs(t, r.m.EndAsync(b, Commit, FromClient, nil, nil), ErrAlreadyResolved)
	res := newResult(1)
	require.NoError(t, r.m.EndAsync(b, Rollback, FromCheck, nil, res.done))
	require.NoError(t, <-res.ch)
	require.ErrorIs(t, r.m.EndAsync(a, Resolution(7), FromClient, nil, nil), ErrInvalid)
	assert.Empty(t, r.delivered("orders"))
}

// Close waits for EndAsync's appends: after it returns, the commit is in
// the log (and no goroutine is left, which goleak checks).
func TestCloseWaitsForEndAsyncAppends(t *testing.T) {
	r, g, m, ids := gatedRig(t, 3)
	var got atomic.Int64
	for _, id := range ids {
		require.NoError(t, m.EndAsync(id, Commit, FromClient, nil, func(err error) {
			if err == nil {
				got.Add(1)
			}
		}))
	}
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	require.Eventually(t, func() bool { return g.waiting.Load() == 3 }, 30*time.Second, time.Millisecond)
	g.open()
	require.NoError(t, <-closed)
	assert.Equal(t, int64(3), got.Load(), "every done was called before Close returned")
	assert.Len(t, r.delivered("orders"), 3)
	assert.ErrorIs(t, m.EndAsync(ids[0], Commit, FromClient, nil, nil), ErrClosed)
}

// Past maxAsyncEnds appends in flight, EndAsync appends before it answers
// (its done is called before it returns): the Manager's goroutines stay
// bounded.
func TestEndAsyncPastItsBoundAppendsInTheCaller(t *testing.T) {
	r, g, m, ids := gatedRig(t, maxAsyncEnds+1)
	res := newResult(maxAsyncEnds + 1)
	for _, id := range ids[:maxAsyncEnds] {
		require.NoError(t, m.EndAsync(id, Commit, FromClient, nil, res.done))
	}
	var lastDone atomic.Bool
	returned := make(chan bool, 1)
	go func() {
		_ = m.EndAsync(ids[maxAsyncEnds], Commit, FromClient, nil, func(err error) {
			assert.NoError(t, err)
			lastDone.Store(true)
		})
		returned <- lastDone.Load()
	}()
	require.Eventually(t, func() bool { return g.waiting.Load() == maxAsyncEnds+1 }, 30*time.Second, time.Millisecond)
	g.open()
	assert.True(t, <-returned, "the call past the bound appended before it returned")
	for range maxAsyncEnds {
		require.NoError(t, <-res.ch)
	}
	assert.Len(t, r.delivered("orders"), maxAsyncEnds+1)
}

// An EndAsync whose append fails uncertainly (the caller already has its
// nil) leaves the transaction uncertain until the log settles it; then it
// is open and its check asks the producer again.
func TestEndAsyncThatFailedIsSettledAndCheckedAgain(t *testing.T) {
	r, fl, m := faultRig(t, Options{})
	id := r.prepare("orders", "a")
	require.NoError(t, m.catchUp())
	fl.failNext(false)
	res := newResult(1)
	require.NoError(t, m.EndAsync(id, Commit, FromClient, nil, res.done))
	require.ErrorIs(t, <-res.ch, errKilled)
	n, err := m.settleUncertain()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	r.clk.Advance(DefaultTransactionTimeout)
	r.check.reset()
	_, err = m.CheckNow()
	require.NoError(t, err)
	assert.Equal(t, []int64{id}, r.check.ids())
	require.NoError(t, m.End(id, Commit, FromCheck))
	assert.Equal(t, []string{"a"}, r.delivered("orders"))
}
