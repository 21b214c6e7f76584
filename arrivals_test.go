package brokercore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
)

// ends is a fake log end whose MaxOffset can run a hook: the moment between
// a waiter's look at the queue and its wait.
type ends struct {
	max    atomic.Int64
	onLook func()
}

func (e *ends) MaxOffset(string, int) int64 {
	v := e.max.Load()
	if f := e.onLook; f != nil {
		e.onLook = nil
		f()
	}
	return v
}

// waitResult runs Wait in a goroutine and returns its answer's channel.
func waitResult(a *brokercore.Arrivals, ctx context.Context, offset int64) <-chan bool {
	ch := make(chan bool, 1)
	go func() { ch <- a.Wait(ctx, "T", 0, offset) }()
	return ch
}

func TestArrivalsWaitReturnsAtOnceWhenTheQueueIsPastTheOffset(t *testing.T) {
	e := &ends{}
	e.max.Store(3)
	a := brokercore.NewArrivals(e)
	defer a.Close()
	assert.True(t, a.Wait(context.Background(), "T", 0, 2))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, a.Wait(ctx, "T", 0, 3), "at the end: waits until ctx ends")
}

// An arrival between the waiter's look at the queue (MaxOffset says
// nothing yet) and its wait must still wake it: the lost wake-up of a
// waiter that subscribes after checking. Deterministic: the arrival runs
// inside the look.
func TestArrivalsAnArrivalBetweenTheLookAndTheWaitIsNotLost(t *testing.T) {
	e := &ends{}
	a := brokercore.NewArrivals(e)
	defer a.Close()
	e.onLook = func() {
		e.max.Store(1)
		a.Notify("T", 0, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.True(t, a.Wait(ctx, "T", 0, 0), "woken, not timed out")
	require.NoError(t, ctx.Err())
}

func TestArrivalsWakeOnlyTheirQueueAndKeepWaitingForAnOffsetAhead(t *testing.T) {
	e := &ends{}
	a := brokercore.NewArrivals(e)
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := waitResult(a, ctx, 1) // asks for offset 1: the queue must reach 2
	require.Eventually(t, func() bool { return a.Stats().Watched == 1 }, 5*time.Second, time.Millisecond)
	a.Notify("T", 1, 1) // another queue
	a.Notify("U", 0, 1) // another topic
	e.max.Store(1)
	a.Notify("T", 0, 1) // below what it asked for
	require.Eventually(t, func() bool { return a.Stats().Watched == 1 && a.Stats().Notified == 1 }, 5*time.Second, time.Millisecond)
	select {
	case v := <-got:
		t.Fatalf("returned %v before its offset arrived", v)
	default:
	}
	e.max.Store(2)
	a.Notify("T", 0, 2)
	assert.True(t, <-got)
}

func TestArrivalsWakeEndsAWaitEvenWithoutAnArrival(t *testing.T) {
	e := &ends{}
	a := brokercore.NewArrivals(e)
	defer a.Close()
	got := waitResult(a, context.Background(), 0)
	require.Eventually(t, func() bool { return a.Stats().Watched == 1 }, 5*time.Second, time.Millisecond)
	a.Wake("T", 0)
	assert.True(t, <-got, "a reset: look again")
	assert.EqualValues(t, 1, a.Stats().Wakes)
}

// A reset between an arrival that woke the waiter (below its offset) and
// its next watch is not lost either: Wait compares reset counts.
func TestArrivalsAResetRightAfterAnArrivalIsNotLost(t *testing.T) {
	e := &ends{}
	a := brokercore.NewArrivals(e)
	defer a.Close()
	var once sync.Once
	e.onLook = func() {
		// First look: an arrival below the offset wakes the waiter, and a
		// reset follows before it watches again.
		once.Do(func() {
			a.Notify("T", 0, 1)
			a.Wake("T", 0)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	assert.True(t, a.Wait(ctx, "T", 0, 5))
	require.NoError(t, ctx.Err())
}

// A Wait an arrival answers leaves no channel armed behind it: Watched
// counts queues someone waits on, and a test (or a dashboard) that waits
// for a second waiter to watch must not see the first one's leftover.
func TestArrivalsAnsweredWaitLeavesNothingWatched(t *testing.T) {
	e := &ends{}
	a := brokercore.NewArrivals(e)
	defer a.Close()
	got := waitResult(a, context.Background(), 0)
	require.Eventually(t, func() bool { return a.Stats().Watched == 1 }, 5*time.Second, time.Millisecond)
	e.max.Store(1)
	a.Notify("T", 0, 1)
	assert.True(t, <-got)
	assert.Zero(t, a.Stats().Watched, "the answered waiter watches no more")

	// Woken by an arrival below its offset, it watches again.
	got = waitResult(a, context.Background(), 1)
	require.Eventually(t, func() bool { return a.Stats().Watched == 1 }, 5*time.Second, time.Millisecond)
	e.max.Store(1)
	a.Notify("T", 0, 1)
	require.Eventually(t, func() bool { return a.Stats().Watched == 1 && a.Stats().Notified == 2 }, 5*time.Second, time.Millisecond)
	e.max.Store(2)
	a.Notify("T", 0, 2)
	assert.True(t, <-got)
	assert.Zero(t, a.Stats().Watched)
}

func TestArrivalsCloseEndsEveryWaitAndWatch(t *testing.T) {
	e := &ends{}
	a := brokercore.NewArrivals(e)
	w := a.Watch("T", 1)
	got := waitResult(a, context.Background(), 0)
	require.Eventually(t, func() bool { return a.Stats().Watched == 2 }, 5*time.Second, time.Millisecond)
	a.Close()
	a.Close()
	assert.False(t, <-got)
	<-w
	<-a.Watch("T", 0)
	<-a.Done()
	assert.False(t, a.Wait(context.Background(), "T", 0, 0))
}

func TestBrokerWaitArrivalWakesOnAppendsResetsAndClose(t *testing.T) {
	b := openBroker(t, t.TempDir(), testOptions(newClock()))
	ctx := context.Background()
	got := make(chan bool, 1)
	go func() { got <- b.WaitArrival(ctx, topic, 0, 0) }()
	require.Eventually(t, func() bool { return b.Stats().Arrivals.Watched == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, b.Store().Append(msg("a")))
	assert.True(t, <-got)

	go func() { got <- b.WaitArrival(ctx, topic, 0, 1) }()
	require.Eventually(t, func() bool { return b.Stats().Arrivals.Watched == 1 }, 5*time.Second, time.Millisecond)
	_, err := b.Offsets().Reset(group, topic, 0, 0)
	require.NoError(t, err)
	assert.True(t, <-got, "an offset reset wakes the queue's waiters")

	go func() { got <- b.WaitArrival(ctx, topic, 0, 1) }()
	require.Eventually(t, func() bool { return b.Stats().Arrivals.Watched == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, b.Close())
	assert.False(t, <-got)
}
