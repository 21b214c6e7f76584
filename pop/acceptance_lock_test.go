package pop_test

// Acceptance tests of pop: the group@topic lock and FIFO retries waiting on it.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/pop"
)

// holdLock parks a non-FIFO pop of group g on topic t inside its Source read
// of queue 1, i.e. holding the group@topic lock, until release is called.
func (e *accEnv) holdLock(t *testing.T) (release func(), done <-chan popOutcome) {
	t.Helper()
	entered, rel := e.src.holdNextRead()
	r := accReq()
	r.QueueID = 1
	r.Max = 1
	inner := e.popAsync(context.Background(), r)
	out, finished := make(chan popOutcome, 1), make(chan struct{})
	go func() { o := <-inner; close(finished); out <- o }()
	select {
	case <-entered:
	case <-time.After(2 * time.Second):
		rel()
		t.Fatal("holder pop never reached the Source read")
	}
	t.Cleanup(func() { rel(); <-finished })
	return rel, out
}

// "A contended non-FIFO pop never waits on the lock: with Poll>0 it long-polls,
// otherwise it returns empty." The long poll is woken by the lock's release.
func TestAcceptContendedNonFIFOPopNeverWaitsOnLock(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 2)
	release, holder := e.holdLock(t)

	o := waitOutcome(t, e.popAsync(context.Background(), accReq()), time.Second, "contended Poll=0")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages, "contended, Poll 0: empty at once")

	r := accReq()
	r.Poll = 30 * time.Second
	polled := e.popAsync(context.Background(), r)
	requireStillWaiting(t, polled, 150*time.Millisecond, "contended Poll>0")
	release()
	ho := waitOutcome(t, holder, 2*time.Second, "holder")
	require.NoError(t, ho.err)
	o = waitOutcome(t, polled, 2*time.Second, "long-poll woken by the lock release")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0, 1}, offsetsOf(o.res))
}

// "A FIFO pop with a non-empty attemptId waits for the lock … it must never come
// back empty because of the lock. If the wait runs out it returns
// ErrLockTimeout" — for each bound: Options.LockWait (Poll 0), Poll, ctx.
func TestAcceptFIFORetryLockWaitRunsOutWithErrLockTimeoutNotEmpty(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 120 * time.Millisecond})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 1)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Equal(t, []int64{0}, offsetsOf(batch))
	e.holdLock(t)

	cases := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		req  pop.Request
	}{
		{"LockWait", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, a},
		{"Poll", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			func() pop.Request { r := a; r.Poll = 120 * time.Millisecond; return r }()},
		{"ctx", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 120*time.Millisecond)
		}, func() pop.Request { r := a; r.Poll = 30 * time.Second; return r }()},
		{"new attemptId", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			fifoReq("N")},
	}
	for _, c := range cases {
		ctx, cancel := c.ctx()
		o := waitOutcome(t, e.popAsync(ctx, c.req), 3*time.Second, c.name)
		cancel()
		require.Error(t, o.err, "%s: a FIFO pop with an attemptId must not come back empty because of the lock", c.name)
		assert.ErrorIs(t, o.err, pop.ErrLockTimeout, c.name)
		assert.Empty(t, o.res.Messages, c.name)
		assert.GreaterOrEqual(t, o.at, 90*time.Millisecond, "%s: it waited for the lock", c.name)
	}
	// Nothing changed: the batch is still A's, attempt 1, and still blocks B.
	require.NoError(t, e.svc.Ack(batch.Messages[0].Handle), "timed-out retries did not supersede the handle")
}

// The FIFO retry waits for the lock and gets its batch as soon as the lock is
// released (no empty answer, no extra attempt).
func TestAcceptFIFORetryWaitsForLockThenGetsSameBatch(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 30 * time.Second})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 1)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Equal(t, []int64{0}, offsetsOf(batch))
	release, _ := e.holdLock(t)

	retries := make([]<-chan popOutcome, 4)
	for i := range retries {
		retries[i] = e.popAsync(context.Background(), a)
	}
	newID := e.popAsync(context.Background(), fifoReq("B"))
	requireStillWaiting(t, retries[0], 150*time.Millisecond, "FIFO retry")
	release()
	for i, ch := range retries {
		o := waitOutcome(t, ch, 2*time.Second, "retry woken by lock release")
		require.NoError(t, o.err, i)
		require.Equal(t, []int64{0}, offsetsOf(o.res), "retry %d: same batch, never empty", i)
		assert.Equal(t, []int{1}, attemptsOf(o.res), "retry %d: no attempt counted", i)
	}
	o := waitOutcome(t, newID, 2*time.Second, "new attemptId")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages, "another attemptId stays blocked")
}

// A FIFO retry that waits for the lock re-checks the in-flight state once it
// has it: if the batch was acked meanwhile, the retry must not re-deliver it.
func TestAcceptFIFORetryRechecksStateAfterLockWait(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 30 * time.Second})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 1)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Equal(t, []int64{0}, offsetsOf(batch))
	release, _ := e.holdLock(t)
	retry := e.popAsync(context.Background(), a)
	requireStillWaiting(t, retry, 100*time.Millisecond, "retry behind lock")
	require.NoError(t, e.svc.Ack(batch.Messages[0].Handle))
	release()
	o := waitOutcome(t, retry, 2*time.Second, "retry")
	require.NoError(t, o.err)
	assert.NotContains(t, offsetsOf(o.res), int64(0), "an acked message never comes again")
}

// "Serialization is a group@topic lock": another group is not contended.
func TestAcceptLockIsPerGroupAtTopic(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 100 * time.Millisecond})
	e.appendN("t", 0, 1)
	e.appendN("t", 1, 1)
	e.holdLock(t)
	g2 := accReq()
	g2.Group = "g2"
	o := waitOutcome(t, e.popAsync(context.Background(), g2), 2*time.Second, "other group")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res), "group g2 is not serialized behind group g")
	f := fifoReq("A")
	f.Group = "g3"
	o = waitOutcome(t, e.popAsync(context.Background(), f), 2*time.Second, "other group FIFO")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))
}

// Lock-release wake-up under races: the holder lets go right as the
// contended long-poll goes to sleep.
func TestAcceptNoLostLockReleaseWakeUp(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	e.appendN("t", 0, 20)
	e.appendN("t", 1, 20)
	for i := 0; i < 15; i++ {
		release, holder := e.holdLock(t)
		r := accReq()
		r.Max = 1
		r.Poll = 30 * time.Second
		ch := e.popAsync(context.Background(), r)
		release()
		o := waitOutcome(t, ch, 2*time.Second, fmt.Sprintf("lock-release race %d", i))
		require.NoError(t, o.err)
		require.Len(t, o.res.Messages, 1)
		require.NoError(t, e.svc.Ack(o.res.Messages[0].Handle))
		ho := waitOutcome(t, holder, 2*time.Second, "holder")
		require.NoError(t, ho.err)
		for _, d := range ho.res.Messages {
			require.NoError(t, e.svc.Ack(d.Handle))
		}
	}
}

// Issue: "The lock has an expiry backstop that can never evict a lock its
// holder still uses" — however far the clock moves while the holder's read
// is slow, nobody else gets the lock, and the holder's pop completes.
func TestAcceptLockBackstopNeverEvictsALiveHolder(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockExpiry: time.Second, LockWait: 200 * time.Millisecond})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 1)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Len(t, batch.Messages, 1)
	release, holder := e.holdLock(t)
	e.clk.Advance(time.Hour)
	time.Sleep(150 * time.Millisecond) // a few background ticks with the clock far past LockExpiry
	o := waitOutcome(t, e.popAsync(context.Background(), a), 2*time.Second, "FIFO retry")
	assert.ErrorIs(t, o.err, pop.ErrLockTimeout, "the live holder's lock must not be evicted")
	o = waitOutcome(t, e.popAsync(context.Background(), accReq()), 2*time.Second, "non-FIFO")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages)
	release()
	ho := waitOutcome(t, holder, 2*time.Second, "holder")
	require.NoError(t, ho.err)
	assert.Equal(t, []int64{0}, offsetsOf(ho.res), "the slow holder's pop completes")
}
