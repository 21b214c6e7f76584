package pop_test

// Acceptance tests of pop: non-FIFO delivery — visibility on the injected
// clock, redelivery, attempts and dead letters, rotation over queues.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// "Every visibility decision (invisible time over, FIFO block over) uses
// Options.Now at the time of the call; background loops only wake waiters, so
// a test that moves an injected clock and pops again sees the result at once."
// Tick is an hour, so nothing but the call itself can make the decision.
func TestAcceptVisibilityReadsInjectedClockAtCallTime(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	e.appendN("t", 0, 1)
	e.appendN("t", 1, 1)

	// Non-FIFO invisible time.
	first := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(first))
	assert.Empty(t, e.pop(accReq()).Messages, "invisible")
	e.clk.Advance(29 * time.Second)
	assert.Empty(t, e.pop(accReq()).Messages, "still invisible before Invisible is over")
	e.clk.Advance(2 * time.Second)
	again := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(again), "visible again as soon as the clock passed Invisible")
	assert.Equal(t, []int{2}, attemptsOf(again))

	// FIFO block.
	a := fifoReq("A")
	a.QueueID = 1
	b := fifoReq("B")
	b.QueueID = 1
	require.Equal(t, []int64{0}, offsetsOf(e.pop(a)))
	assert.Empty(t, e.pop(b).Messages, "blocked for another attemptId")
	e.clk.Advance(29 * time.Second)
	assert.Empty(t, e.pop(b).Messages, "still blocked before Invisible is over")
	e.clk.Advance(2 * time.Second)
	res := e.pop(b)
	require.Equal(t, []int64{0}, offsetsOf(res), "block over as soon as the clock passed Invisible")
	assert.Equal(t, []int{2}, attemptsOf(res))
}

// "Non-FIFO: popped messages are invisible for Invisible; unacked ones are
// delivered again after it with Attempts+1."
func TestAcceptNonFIFOUnackedRedeliveredWithAttemptsPlusOne(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 2)
	res := e.pop(accReq())
	require.Equal(t, []int64{0, 1}, offsetsOf(res))
	require.NoError(t, e.svc.Ack(res.Messages[1].Handle))

	handles := []string{res.Messages[0].Handle}
	for attempt := 2; attempt <= 4; attempt++ {
		e.clk.Advance(31 * time.Second)
		again := e.pop(accReq())
		require.Equal(t, []int64{0}, offsetsOf(again), "only the unacked one comes back")
		assert.Equal(t, attempt, again.Messages[0].Attempts)
		assert.Equal(t, res.Messages[0].Message.Body, again.Messages[0].Message.Body)
		assert.NotContains(t, handles, again.Messages[0].Handle, "a redelivery has a fresh handle")
		for _, old := range handles {
			assert.ErrorIs(t, e.svc.Ack(old), pop.ErrStaleHandle, "a redelivered message's older handles are stale")
		}
		handles = append(handles, again.Messages[0].Handle)
	}
	require.NoError(t, e.svc.Ack(handles[len(handles)-1]))
	assert.Equal(t, int64(2), e.committed(0))
	e.clk.Advance(time.Hour)
	assert.Empty(t, e.pop(accReq()).Messages, "an acked message never comes again")
}

// ChangeInvisible: "popped messages stay hidden this long unless acked or
// changed"; the new handle replaces the old one.
func TestAcceptChangeInvisibleMovesRedeliveryAndStalesOldHandle(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 1)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 1)
	old := res.Messages[0].Handle

	nh, err := e.svc.ChangeInvisible(old, 2*time.Minute)
	require.NoError(t, err)
	require.NotEqual(t, old, nh)
	assert.ErrorIs(t, e.svc.Ack(old), pop.ErrStaleHandle, "the old handle becomes stale")

	e.clk.Advance(31 * time.Second)
	assert.Empty(t, e.pop(accReq()).Messages, "extended: still invisible after the original Invisible")
	e.clk.Advance(90 * time.Second)
	again := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(again))
	assert.Equal(t, 2, again.Messages[0].Attempts)
	assert.ErrorIs(t, e.svc.Ack(nh), pop.ErrStaleHandle)
	require.NoError(t, e.svc.Ack(again.Messages[0].Handle))
	assert.Equal(t, int64(1), e.committed(0))
}

// "Options.MaxAttempts (default 16) is the total number of deliveries: once a
// message has been delivered that many times and its invisible time ends
// again, it goes to Options.DeadLetter instead of a next delivery."
func TestAcceptMaxAttemptsDeliveriesThenDeadLetter(t *testing.T) {
	var mu sync.Mutex
	var dead []string
	var groups []string
	e := newAccEnv(t, pop.Options{MaxAttempts: 3, DeadLetter: func(group string, m *store.Message) error {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, string(m.Body))
		groups = append(groups, group)
		return nil
	}})
	deadCount := func() int { mu.Lock(); defer mu.Unlock(); return len(dead) }
	e.appendN("t", 0, 1)

	for attempt := 1; attempt <= 3; attempt++ {
		res := e.pop(accReq())
		require.Equal(t, []int64{0}, offsetsOf(res), "delivery %d", attempt)
		assert.Equal(t, attempt, res.Messages[0].Attempts)
		e.clk.Advance(10 * time.Second)
		assert.Empty(t, e.pop(accReq()).Messages)
		assert.Equal(t, 0, deadCount(), "not dead-lettered while its last invisible time runs")
		e.clk.Advance(21 * time.Second)
	}
	res := e.pop(accReq())
	assert.Empty(t, res.Messages, "no 4th delivery")
	require.Equal(t, 1, deadCount(), "dead-lettered by the pop that found its last invisible time over")
	assert.Equal(t, []string{"t/0/0"}, dead)
	assert.Equal(t, []string{"g"}, groups)

	// The message is done: it never comes again, it is not dead-lettered
	// twice, and the committed offset may now pass it.
	e.clk.Advance(time.Hour)
	assert.Empty(t, e.pop(accReq()).Messages)
	assert.Equal(t, 1, deadCount())
	e.appendN("t", 0, 1)
	next := e.pop(accReq())
	require.Equal(t, []int64{1}, offsetsOf(next))
	require.NoError(t, e.svc.Ack(next.Messages[0].Handle))
	assert.Equal(t, int64(2), e.committed(0), "a dead-lettered message is done: the commit passes it")
}

// "MaxAttempts (default 16)": the zero Options dead-letters after 16 deliveries.
func TestAcceptDefaultMaxAttemptsIsSixteen(t *testing.T) {
	var n atomic.Int32
	e := newAccEnv(t, pop.Options{DeadLetter: func(string, *store.Message) error { n.Add(1); return nil }})
	e.appendN("t", 0, 1)
	for attempt := 1; attempt <= 16; attempt++ {
		res := e.pop(accReq())
		require.Len(t, res.Messages, 1, "delivery %d", attempt)
		require.Equal(t, attempt, res.Messages[0].Attempts)
		e.clk.Advance(31 * time.Second)
	}
	assert.Empty(t, e.pop(accReq()).Messages)
	assert.Equal(t, int32(1), n.Load())
}

// "With a nil DeadLetter nothing is dropped: it keeps being redelivered."
func TestAcceptNilDeadLetterKeepsRedelivering(t *testing.T) {
	e := newAccEnv(t, pop.Options{MaxAttempts: 2})
	e.appendN("t", 0, 1)
	for attempt := 1; attempt <= 6; attempt++ {
		res := e.pop(accReq())
		require.Equal(t, []int64{0}, offsetsOf(res), "delivery %d", attempt)
		assert.Equal(t, attempt, res.Messages[0].Attempts)
		e.clk.Advance(31 * time.Second)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0), "never committed past an undelivered-to-DLQ message")
}

// "Options.DeadLetter … receives a message that reached MaxAttempts; until it
// returns nil the message is kept and retried."
func TestAcceptFailingDeadLetterKeepsMessageAndRetries(t *testing.T) {
	var calls atomic.Int32
	e := newAccEnv(t, pop.Options{MaxAttempts: 2, DeadLetter: func(_ string, m *store.Message) error {
		if calls.Add(1) <= 2 {
			return errors.New("dead-letter topic unavailable")
		}
		return nil
	}})
	e.appendN("t", 0, 1)
	for attempt := 1; attempt <= 2; attempt++ {
		require.Len(t, e.pop(accReq()).Messages, 1)
		e.clk.Advance(31 * time.Second)
	}
	// A second message, acked, must not let the commit pass the kept one.
	e.appendN("t", 0, 1)

	seen := map[int32]bool{}
	for i := 0; i < 10 && calls.Load() < 3; i++ {
		res := e.pop(accReq())
		for _, d := range res.Messages {
			if d.Message.QueueOffset == 0 {
				assert.LessOrEqual(t, d.Attempts, 2, "no delivery beyond MaxAttempts")
				continue
			}
			require.NoError(t, e.svc.Ack(d.Handle))
		}
		if c := calls.Load(); c > 0 && c < 3 {
			seen[c] = true
			assert.LessOrEqual(t, e.committed(0), int64(0), "kept: the commit never passes a message whose DeadLetter failed")
		}
		e.clk.Advance(time.Minute)
	}
	require.Equal(t, int32(3), calls.Load(), "a failing DeadLetter is retried until it returns nil")
	assert.True(t, seen[1] && seen[2])

	e.clk.Advance(time.Hour)
	for _, d := range e.pop(accReq()).Messages {
		assert.NotEqual(t, int64(0), d.Message.QueueOffset, "done after DeadLetter returned nil")
	}
	assert.Equal(t, int32(3), calls.Load(), "not dead-lettered again after success")
}

// AllQueues: "rotate over every queue of the topic" — no queue starves.
func TestAcceptAllQueuesRotatesOverEveryQueue(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	for q := 0; q < 3; q++ {
		e.appendN("t", q, 10)
	}
	r := accReq()
	r.QueueID = pop.AllQueues
	r.Max = 1
	hits := map[int]int{}
	for i := 0; i < 6; i++ {
		res := e.pop(r)
		require.Len(t, res.Messages, 1)
		hits[res.Messages[0].Message.QueueID]++
	}
	for q := 0; q < 3; q++ {
		assert.Equal(t, 2, hits[q], "queue %d over 6 pops of Max 1: %v", q, hits)
	}
}

// A DeadLetter that appends to a dead-letter topic of the same store (which
// fires OnAppend → Arrived) must not deadlock the service.
func TestAcceptDeadLetterMayAppendToStore(t *testing.T) {
	var e *accEnv
	e = newAccEnv(t, pop.Options{MaxAttempts: 1, DeadLetter: func(group string, m *store.Message) error {
		return e.st.Append(&store.Message{Topic: "%DLQ%" + group, Body: m.Body})
	}})
	e.appendN("t", 0, 1)
	require.Len(t, e.pop(accReq()).Messages, 1)
	e.clk.Advance(31 * time.Second)
	o := waitOutcome(t, e.popAsync(context.Background(), accReq()), 2*time.Second, "pop that dead-letters")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages)
	dl := accReq()
	dl.Topic = "%DLQ%g"
	res := e.pop(dl)
	require.Len(t, res.Messages, 1)
	assert.Equal(t, []byte("t/0/0"), res.Messages[0].Message.Body)
}
