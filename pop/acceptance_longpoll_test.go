package pop_test

// Acceptance tests of pop: long polling — what wakes a waiter, what does not,
// and the cap on waiters.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/pop"
)

// "A topic or queue with nothing in it yet is not an error: the pop long-polls
// for it."
func TestAcceptEmptyTopicLongPollsInsteadOfErroring(t *testing.T) {
	e := newAccEnv(t, pop.Options{})

	res, err := e.svc.Pop(context.Background(), accReq())
	require.NoError(t, err, "a never-written topic is not an error")
	assert.Empty(t, res.Messages)
	// The contract's Result is { Messages []Delivery }: an empty answer must
	// compare equal to the zero Result whatever fields pop added.
	assert.Equal(t, pop.Result{}, res)

	r := accReq()
	r.QueueID = pop.AllQueues
	res, err = e.svc.Pop(context.Background(), r)
	require.NoError(t, err, "AllQueues on a topic with no queues yet is not an error")
	assert.Empty(t, res.Messages)

	// A short Poll on nothing ends empty, without error, after about Poll.
	r = accReq()
	r.Poll = 50 * time.Millisecond
	o := waitOutcome(t, e.popAsync(context.Background(), r), 2*time.Second, "short poll")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages)
	assert.GreaterOrEqual(t, o.at, 40*time.Millisecond, "Poll>0 must wait, not answer at once")

	// One queue and AllQueues both long-poll until the first message arrives.
	r = accReq()
	r.Poll = 30 * time.Second
	one := e.popAsync(context.Background(), r)
	r.Group = "g2"
	r.QueueID = pop.AllQueues
	all := e.popAsync(context.Background(), r)
	requireStillWaiting(t, one, 100*time.Millisecond, "queue long-poll")
	e.appendN("t", 0, 1)
	for name, ch := range map[string]<-chan popOutcome{"queue": one, "AllQueues": all} {
		o := waitOutcome(t, ch, 2*time.Second, name)
		require.NoError(t, o.err, name)
		assert.Equal(t, []int64{0}, offsetsOf(o.res), name)
	}
}

// "Long-polling waiters wake on message arrival, on an ack that unblocks a FIFO
// queue, on a lock release, and on an invisible time that ends" (lock release:
// TestAcceptContendedNonFIFOPopNeverWaitsOnLock). Poll is 30 s; each must
// return within 2 s, which it cannot without its wake-up.
func TestAcceptLongPollWakesOnArrival(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	r := accReq()
	r.Poll = 30 * time.Second
	ch := e.popAsync(context.Background(), r)
	requireStillWaiting(t, ch, 100*time.Millisecond, "arrival")
	e.appendN("t", 0, 1)
	o := waitOutcome(t, ch, 2*time.Second, "arrival")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))
}

func TestAcceptLongPollWakesOnFIFOUnblockingAck(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	e.appendN("t", 0, 2)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Equal(t, []int64{0}, offsetsOf(batch))
	b := fifoReq("B")
	b.Max = 1
	b.Poll = 30 * time.Second
	ch := e.popAsync(context.Background(), b)
	requireStillWaiting(t, ch, 100*time.Millisecond, "FIFO blocked")
	require.NoError(t, e.svc.Ack(batch.Messages[0].Handle))
	o := waitOutcome(t, ch, 2*time.Second, "FIFO-unblocking ack")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{1}, offsetsOf(o.res))
}

func TestAcceptLongPollWakesWhenInvisibleTimeEnds(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 1)
	e.appendN("t", 1, 1)
	require.Len(t, e.pop(accReq()).Messages, 1)
	fr := fifoReq("A")
	fr.QueueID = 1
	require.Len(t, e.pop(fr).Messages, 1)

	r := accReq()
	r.Poll = 30 * time.Second
	plain := e.popAsync(context.Background(), r)
	fb := fifoReq("B")
	fb.QueueID = 1
	fb.Poll = 30 * time.Second
	fifo := e.popAsync(context.Background(), fb)
	requireStillWaiting(t, plain, 150*time.Millisecond, "invisible")
	e.clk.Advance(31 * time.Second)
	o := waitOutcome(t, plain, 2*time.Second, "invisible time ended")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))
	assert.Equal(t, []int{2}, attemptsOf(o.res))
	o = waitOutcome(t, fifo, 2*time.Second, "FIFO block ended")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))
	assert.Equal(t, []int{2}, attemptsOf(o.res))
}

// Long polling on one queue is not answered early by arrivals elsewhere, and
// groups are independent consumers of the same messages.
func TestAcceptLongPollIgnoresArrivalOnOtherQueueAndGroupsAreIndependent(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	r := accReq()
	r.Poll = 30 * time.Second
	ch := e.popAsync(context.Background(), r)
	requireStillWaiting(t, ch, 100*time.Millisecond, "before any arrival")
	e.appendN("t", 1, 1)
	e.appendN("other", 0, 1)
	requireStillWaiting(t, ch, 150*time.Millisecond, "after arrivals on other queues")
	assert.Equal(t, uint64(1), e.svc.Stats().Waiters)
	e.appendN("t", 0, 1)
	o := waitOutcome(t, ch, 2*time.Second, "arrival")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))

	g2 := accReq()
	g2.Group = "g2"
	res := e.pop(g2)
	assert.Equal(t, []int64{0}, offsetsOf(res), "another group gets the same message")
	assert.Equal(t, []int{1}, attemptsOf(res))
}

// Issue: caps on waiters with a clear error past them.
func TestAcceptTooManyWaitersIsAClearError(t *testing.T) {
	e := newAccEnv(t, pop.Options{MaxWaitersPerKey: 2})
	r := accReq()
	r.Poll = 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	w1, w2 := e.popAsync(ctx, r), e.popAsync(ctx, r)
	require.Eventually(t, func() bool { return e.svc.Stats().Waiters == 2 }, 2*time.Second, time.Millisecond)
	o := waitOutcome(t, e.popAsync(context.Background(), r), time.Second, "third waiter")
	assert.ErrorIs(t, o.err, pop.ErrTooManyWaiters)
	cancel()
	waitOutcome(t, w1, 2*time.Second, "w1")
	waitOutcome(t, w2, 2*time.Second, "w2")
}

// "no wake-up source is missing", under races: the arrival, the unblocking
// ack and the lock release happen right as the pop goes to sleep. A lost
// wake-up shows as a 30 s Poll not returning within 2 s.
func TestAcceptNoLostWakeUpWhenEventRacesTheWait(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	for i := 0; i < 40; i++ {
		r := accReq()
		r.Poll = 30 * time.Second
		r.Max = 1
		ch := e.popAsync(context.Background(), r)
		e.appendN("t", 0, 1)
		o := waitOutcome(t, ch, 2*time.Second, fmt.Sprintf("arrival race %d", i))
		require.NoError(t, o.err)
		require.Equal(t, []int64{int64(i)}, offsetsOf(o.res))
		require.NoError(t, e.svc.Ack(o.res.Messages[0].Handle))
	}

	e.appendN("f", 0, 41)
	a := fifoReq("A")
	a.Topic = "f"
	a.Max = 1
	batch := e.pop(a)
	for i := 0; i < 40; i++ {
		b := fifoReq(fmt.Sprintf("B%d", i))
		b.Topic = "f"
		b.Max = 1
		b.Poll = 30 * time.Second
		ch := e.popAsync(context.Background(), b)
		require.NoError(t, e.svc.Ack(batch.Messages[0].Handle))
		o := waitOutcome(t, ch, 2*time.Second, fmt.Sprintf("unblocking-ack race %d", i))
		require.NoError(t, o.err)
		require.Equal(t, []int64{int64(i + 1)}, offsetsOf(o.res))
		batch = o.res
	}
}

// AllQueues long-poll wakes for a queue that did not exist when it started.
func TestAcceptAllQueuesLongPollWakesOnNewQueue(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	e.appendN("t", 0, 1)
	r := accReq()
	r.QueueID = pop.AllQueues
	require.Len(t, e.pop(r).Messages, 1)
	r.Poll = 30 * time.Second
	ch := e.popAsync(context.Background(), r)
	requireStillWaiting(t, ch, 100*time.Millisecond, "AllQueues")
	e.appendN("t", 5, 1)
	o := waitOutcome(t, ch, 2*time.Second, "new queue")
	require.NoError(t, o.err)
	require.Len(t, o.res.Messages, 1)
	assert.Equal(t, 5, o.res.Messages[0].Message.QueueID)
}
