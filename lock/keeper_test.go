package lock

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// every20 is the renewal period the 1:3 rule allows for the default table.
// It is long in real time, so the keeper's own ticker never fires during a
// test: the tests step renewals with Renew and time with the fake clock.
const every20 = DefaultMaxLiveTime / RenewRatio

func newKeeper(t *testing.T, l Locker, client string) *Keeper {
	t.Helper()
	k, err := NewKeeper(l, "cg", client, KeeperOptions{Every: every20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func TestNewKeeperRefusesPeriodLongerThanAThirdOfMaxLiveTime(t *testing.T) {
	tb := New(Options{})
	_, err := NewKeeper(tb, "cg", "a", KeeperOptions{Every: every20 + time.Nanosecond})
	require.ErrorIs(t, err, ErrRenewTooSlow)
	assert.Contains(t, err.Error(), "20s")

	// The field report's tuning: 15 s leases, so 5 s is the slowest allowed.
	short := New(Options{MaxLiveTime: 15 * time.Second})
	_, err = NewKeeper(short, "cg", "a", KeeperOptions{Every: 20 * time.Second}) // the old default period
	require.ErrorIs(t, err, ErrRenewTooSlow)
	k, err := NewKeeper(short, "cg", "a", KeeperOptions{Every: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, k.Close())
}

func TestNewKeeperRejectsInvalidInput(t *testing.T) {
	tb := New(Options{})
	var nilTable *Table
	for name, f := range map[string]func() (*Keeper, error){
		"nil locker":   func() (*Keeper, error) { return NewKeeper(nil, "cg", "a", KeeperOptions{Every: time.Second}) },
		"nil table":    func() (*Keeper, error) { return NewKeeper(nilTable, "cg", "a", KeeperOptions{Every: time.Second}) },
		"empty group":  func() (*Keeper, error) { return NewKeeper(tb, "", "a", KeeperOptions{Every: time.Second}) },
		"empty client": func() (*Keeper, error) { return NewKeeper(tb, "cg", "", KeeperOptions{Every: time.Second}) },
		"neg period":   func() (*Keeper, error) { return NewKeeper(tb, "cg", "a", KeeperOptions{Every: -time.Second}) },
	} {
		k, err := f()
		assert.ErrorIs(t, err, ErrInvalid, name)
		assert.Nil(t, k, name)
	}
}

func TestZeroKeeperOptionsRenewAtTheSlowestPeriodTheRuleAllows(t *testing.T) {
	k, err := NewKeeper(New(Options{MaxLiveTime: 30 * time.Second}), "cg", "a", KeeperOptions{})
	require.NoError(t, err)
	defer k.Close()
	assert.Equal(t, 10*time.Second, k.every)
}

// OnLost is an option, in place before the Keeper's goroutine starts: a
// renewal on that goroutine can never race with setting it (the old
// OnLost method could).
func TestKeeperOnLostIsSetBeforeItsGoroutineRenews(t *testing.T) {
	c := newFakeClock()
	tb := New(Options{Now: c.Now, MaxLiveTime: 30 * time.Millisecond})
	lost := make(chan []Queue, 16)
	a, err := NewKeeper(tb, "cg", "a", KeeperOptions{Every: 10 * time.Millisecond,
		OnLost: func(qs []Queue) { lost <- qs }})
	require.NoError(t, err)
	defer a.Close()
	require.Len(t, a.Hold(q(0)), 1)
	c.Advance(time.Second) // expired under a
	require.Len(t, tb.TryLockBatch("cg", []Queue{q(0)}, "b"), 1)
	select { // the Keeper's own goroutine renews (real 10 ms ticks) and reports it
	case qs := <-lost:
		assert.Equal(t, []Queue{q(0)}, qs)
	case <-time.After(10 * time.Second):
		t.Fatal("OnLost was never called by the keeper's goroutine")
	}
}

func TestKeeperHoldRejectsInvalidQueueAndChangesNothing(t *testing.T) {
	tb := New(Options{Now: newFakeClock().Now})
	k := newKeeper(t, tb, "a")
	got, err := k.TryHold(q(0), q(-1))
	require.ErrorIs(t, err, ErrInvalid)
	assert.Nil(t, got)
	assert.Nil(t, k.Hold(q(0), q(-1)))
	assert.Empty(t, k.Held())
	assert.Zero(t, tb.Stats().Entries)
}

func TestKeeperRenewalKeepsQueuesAcrossManyLeaseLengths(t *testing.T) {
	c := newFakeClock()
	tb := New(Options{Now: c.Now})
	a := newKeeper(t, tb, "a")
	require.Equal(t, queues(4), a.Hold(queues(4)...))
	first, _ := tb.Holder("cg", q(0))
	for range 30 { // ten lease lengths
		c.Advance(every20)
		require.Empty(t, a.Renew())
		require.Empty(t, tb.TryLockBatch("cg", queues(4), "b"), "a renews; b must never get in")
	}
	now, _ := tb.Holder("cg", q(0))
	assert.Equal(t, first.Token, now.Token, "renewals keep the token")
	assert.Equal(t, queues(4), a.Held())
}

func TestKeeperSurvivesTwoMissedRenewals(t *testing.T) {
	c := newFakeClock()
	tb := New(Options{Now: c.Now})
	a := newKeeper(t, tb, "a")
	a.Hold(q(0))
	c.Advance(3*every20 - time.Nanosecond) // two ticks lost, third one just in time
	assert.Empty(t, a.Renew())
	assert.Equal(t, []Queue{q(0)}, a.Held())
}

func TestKeeperReportsQueueTakenWhileRenewalsStalled(t *testing.T) {
	c := newFakeClock()
	tb := New(Options{Now: c.Now})
	var mu sync.Mutex
	var lost []Queue
	a, err := NewKeeper(tb, "cg", "a", KeeperOptions{Every: every20, OnLost: func(qs []Queue) {
		mu.Lock()
		lost = append(lost, qs...)
		mu.Unlock()
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	require.Len(t, a.Hold(queues(3)...), 3)
	c.Advance(DefaultMaxLiveTime) // a stalled (GC pause, partition): leases expired
	require.Equal(t, []Queue{q(1)}, tb.TryLockBatch("cg", []Queue{q(1)}, "b"))

	assert.Equal(t, []Queue{q(1)}, a.Renew())
	mu.Lock()
	assert.Equal(t, []Queue{q(1)}, lost, "OnLost tells the consumer to stop processing q1")
	mu.Unlock()
	assert.Equal(t, []Queue{q(0), q(2)}, a.Held(), "expired but free queues are relocked")
	h, _ := tb.Holder("cg", q(1))
	assert.Equal(t, "b", h.ClientID)

	// Hold of a queue held but taken meanwhile reports it lost too.
	c.Advance(DefaultMaxLiveTime)
	tb.TryLock("cg", q(2), "b")
	assert.Equal(t, []Queue{q(0)}, a.Hold(q(0), q(2)))
	assert.Equal(t, []Queue{q(0)}, a.Held())
	mu.Lock()
	assert.Equal(t, []Queue{q(1), q(2)}, lost)
	mu.Unlock()
}

func TestKeeperReleaseHandsOverAtOnce(t *testing.T) {
	tb := New(Options{Now: newFakeClock().Now})
	a := newKeeper(t, tb, "a")
	a.Hold(queues(3)...)
	a.Release(q(1), q(7))
	assert.Equal(t, []Queue{q(0), q(2)}, a.Held())
	assert.Equal(t, []Queue{q(1)}, tb.TryLockBatch("cg", queues(3), "b"))
}

func TestKeeperCloseIsIdempotentAndRefusesLaterHolds(t *testing.T) {
	tb := New(Options{Now: newFakeClock().Now})
	k, err := NewKeeper(tb, "cg", "a", KeeperOptions{Every: every20})
	require.NoError(t, err)
	k.Hold(q(0))
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, k.Close()) }()
	}
	wg.Wait()
	require.NoError(t, k.Close())
	_, err = k.TryHold(q(1))
	assert.ErrorIs(t, err, ErrClosed)
	assert.Nil(t, k.Hold(q(1)))
	assert.Nil(t, k.Renew())
	k.Release(q(0))
	assert.Empty(t, k.Held())
	assert.Zero(t, tb.Stats().Entries)
}

// countingLocker is a Locker with a short max live time, to see the
// keeper's own goroutine renew without a fake clock.
type countingLocker struct {
	calls atomic.Int64
	max   time.Duration
}

func (c *countingLocker) TryLockBatch(_ string, qs []Queue, _ string) []Queue {
	c.calls.Add(1)
	return qs
}
func (c *countingLocker) UnlockBatch(string, []Queue, string) {}
func (c *countingLocker) MaxLiveTime() time.Duration          { return c.max }

func TestKeeperGoroutineRenewsEveryPeriodAndStopsOnClose(t *testing.T) {
	l := &countingLocker{max: 3 * time.Millisecond}
	k, err := NewKeeper(l, "cg", "a", KeeperOptions{Every: time.Millisecond})
	require.NoError(t, err)
	k.Hold(q(0))
	require.Eventually(t, func() bool { return l.calls.Load() >= 4 }, 5*time.Second, time.Millisecond)
	require.NoError(t, k.Close())
	n := l.calls.Load()
	time.Sleep(5 * time.Millisecond)
	assert.Equal(t, n, l.calls.Load(), "no renewal after Close")
	// goleak in TestMain proves the goroutine exited.
}

// gateLocker is a Table whose TryLockBatch, once armed, stops at a gate
// until the test opens it: a slow remote renewal call.
type gateLocker struct {
	*Table
	armed   atomic.Bool
	entered chan struct{}
	open    chan struct{}
}

func (g *gateLocker) TryLockBatch(group string, qs []Queue, client string) []Queue {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.open
	}
	return g.Table.TryLockBatch(group, qs, client)
}

// TestKeeperReleaseDuringSlowRenewalNeverLeavesAQueueLocked: a renewal
// that read the held set before Release and reached the table after it
// would relock the released queue, leaving it leased for a full
// MaxLiveTime with nobody processing it. The keeper serialises its Locker
// calls, so Release waits for the renewal and unlocks after it. (Checked
// by moving Renew's TryLockBatch outside that serialisation: this fails.)
func TestKeeperReleaseDuringSlowRenewalNeverLeavesAQueueLocked(t *testing.T) {
	g := &gateLocker{Table: New(Options{Now: newFakeClock().Now}),
		entered: make(chan struct{}), open: make(chan struct{})}
	k := newKeeper(t, g, "a")
	require.Equal(t, []Queue{q(0)}, k.Hold(q(0)))

	g.armed.Store(true)
	renewed := make(chan struct{})
	go func() { defer close(renewed); k.Renew() }()
	<-g.entered
	released := make(chan struct{})
	go func() { defer close(released); k.Release(q(0)) }()
	time.Sleep(20 * time.Millisecond) // let Release run as far as it can
	close(g.open)
	<-renewed
	<-released

	assert.Empty(t, k.Held())
	_, ok := g.Holder("cg", q(0))
	assert.False(t, ok, "released queue is still leased")
}

func TestKeeperErrorsWrapSentinels(t *testing.T) {
	_, err := NewKeeper(New(Options{}), "", "a", KeeperOptions{Every: time.Second})
	assert.True(t, errors.Is(err, ErrInvalid))
	assert.Contains(t, err.Error(), "NewKeeper")
}
