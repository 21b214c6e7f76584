package pop

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longPoll starts a pop with a long Poll and returns its result channel.
func longPoll(s *Service, req Request) <-chan popOutcome {
	ch := make(chan popOutcome, 1)
	go func() {
		r, err := s.Pop(context.Background(), req)
		ch <- popOutcome{r, err}
	}()
	return ch
}

type popOutcome struct {
	r   Result
	err error
}

func recvWithin(t *testing.T, ch <-chan popOutcome) popOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("long-polling pop was not woken")
		return popOutcome{}
	}
}

func newLongPollService(src *memSource, clock *fakeClock) *Service {
	s := New(src, Options{Now: clock.Now, Tick: 2 * time.Millisecond})
	src.onAppend = s.Arrived
	return s
}

func TestLongPollWakesOnArrival(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	s := newLongPollService(src, clock)
	defer s.Close()
	ch := longPoll(s, Request{Group: "g", Topic: "T", ClientID: "c", QueueID: AllQueues, Max: 4, Invisible: time.Minute, Poll: time.Minute})
	waitFor(t, "pop waiting", func() bool { return s.Stats().Waiters == 1 })
	src.append("T", 3, 2)
	o := recvWithin(t, ch)
	require.NoError(t, o.err)
	require.Equal(t, []int64{0, 1}, offsetsOf(o.r))
}

func TestLongPollWakesOnAckThatUnblocksFIFOQueue(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 3)
	s := newLongPollService(src, clock)
	defer s.Close()
	first, err := s.Pop(context.Background(), Request{Group: "g", Topic: "T", ClientID: "a", QueueID: 0, Max: 2, Invisible: time.Hour, FIFO: true, AttemptID: "X"})
	require.NoError(t, err)
	require.Len(t, first.Messages, 2)
	ch := longPoll(s, Request{Group: "g", Topic: "T", ClientID: "b", QueueID: 0, Max: 2, Invisible: time.Hour, Poll: time.Minute, FIFO: true, AttemptID: "Y"})
	waitFor(t, "Y waiting", func() bool { return s.Stats().Waiters == 1 })
	ackAll(t, s, first)
	o := recvWithin(t, ch)
	require.NoError(t, o.err)
	require.Equal(t, []int64{2}, offsetsOf(o.r))
}

// The ack that unblocks a FIFO queue can land after a pop's round found
// the queue blocked and before the pop takes its waiter slot: the CI
// failure of TestAcceptNoLostWakeUpWhenEventRacesTheWait ("unblocking-ack
// race 0: Pop did not return within 2s"). The steps of popLoop run one by
// one here with the ack between them; the wait must see it and return.
func TestUnblockingAckBetweenTheRoundAndTheWaitIsNotLost(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 2)
	s := New(src, Options{Now: clock.Now, Tick: time.Hour})
	src.onAppend = s.Arrived
	defer s.Close()
	first, err := s.Pop(context.Background(), Request{Group: "g", Topic: "T", ClientID: "a", QueueID: 0, Max: 1, Invisible: time.Hour, FIFO: true, AttemptID: "X"})
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(first))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := Request{Group: "g", Topic: "T", ClientID: "b", QueueID: 0, Max: 1, Invisible: time.Hour, Poll: time.Minute, FIFO: true, AttemptID: "Y"}
	filter, err := s.validate(&req)
	require.NoError(t, err)
	pc := s.newPopCall(ctx, req, filter, time.Hour)
	defer func() {
		if pc.counted {
			s.uncountWaiter(pc.gt)
		}
	}()
	tok, ok, err := s.acquire(pc)
	require.NoError(t, err)
	require.True(t, ok)
	picks, seq, _, err := s.round(pc, tok)
	require.NoError(t, err)
	require.Empty(t, picks, "the queue is blocked by X's message")

	ackAll(t, s, first) // the round is over, the wait not begun

	waited := make(chan error, 1)
	go func() { waited <- s.waitForEvent(pc, seq) }()
	select {
	case err := <-waited:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		cancel()
		<-waited
		t.Fatal("the wait slept through the ack that unblocked the queue")
	}
	tok, ok, err = s.acquire(pc)
	require.NoError(t, err)
	require.True(t, ok)
	picks, _, _, err = s.round(pc, tok)
	require.NoError(t, err)
	require.Len(t, picks, 1)
	assert.Equal(t, int64(1), picks[0].off)
}

func TestLongPollWakesOnLockRelease(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 2)
	s := newLongPollService(src, clock)
	defer s.Close()
	release := src.gate(0)
	holder := longPoll(s, Request{Group: "g", Topic: "T", ClientID: "a", QueueID: 0, Max: 1, Invisible: time.Hour})
	<-src.entered // holder holds the lock in its slow read
	ch := longPoll(s, Request{Group: "g", Topic: "T", ClientID: "b", QueueID: 0, Max: 1, Invisible: time.Hour, Poll: time.Minute})
	waitFor(t, "contended pop waiting", func() bool { return s.Stats().Waiters == 1 && s.Stats().LockContended >= 1 })
	release()
	require.Equal(t, []int64{0}, offsetsOf(recvWithin(t, holder).r))
	o := recvWithin(t, ch)
	require.NoError(t, o.err)
	require.Equal(t, []int64{1}, offsetsOf(o.r))
}

func TestLongPollWakesWhenInvisibleTimeEnds(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 1)
	s := newLongPollService(src, clock)
	defer s.Close()
	req := Request{Group: "g", Topic: "T", ClientID: "a", QueueID: 0, Max: 1, Invisible: 10 * time.Second}
	r, err := s.Pop(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	req.Poll = time.Minute
	ch := longPoll(s, req)
	waitFor(t, "pop waiting", func() bool { return s.Stats().Waiters == 1 })
	clock.Advance(11 * time.Second) // the loop sees it with Options.Now
	o := recvWithin(t, ch)
	require.NoError(t, o.err)
	require.Equal(t, []int64{0}, offsetsOf(o.r))
	require.Equal(t, []int{2}, attemptsOf(o.r))
}

func TestLongPollWakesWhenFIFOBlockEnds(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 1)
	s := newLongPollService(src, clock)
	defer s.Close()
	_, err := s.Pop(context.Background(), Request{Group: "g", Topic: "T", ClientID: "a", QueueID: 0, Max: 1, Invisible: 10 * time.Second, FIFO: true, AttemptID: "X"})
	require.NoError(t, err)
	ch := longPoll(s, Request{Group: "g", Topic: "T", ClientID: "a", QueueID: 0, Max: 1, Invisible: 10 * time.Second, Poll: time.Minute, FIFO: true, AttemptID: "Y"})
	waitFor(t, "Y waiting", func() bool { return s.Stats().Waiters == 1 })
	clock.Advance(10 * time.Second)
	o := recvWithin(t, ch)
	require.NoError(t, o.err)
	require.Equal(t, []int{2}, attemptsOf(o.r))
}

func TestCloseWakesEveryWaiter(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	s := newLongPollService(src, clock)
	chs := []<-chan popOutcome{}
	for range 3 {
		chs = append(chs, longPoll(s, Request{Group: "g", Topic: "T", ClientID: "a", QueueID: 0, Max: 1, Poll: time.Hour}))
	}
	waitFor(t, "3 waiting", func() bool { return s.Stats().Waiters == 3 })
	require.NoError(t, s.Close())
	for _, ch := range chs {
		require.ErrorIs(t, recvWithin(t, ch).err, ErrClosed)
	}
	require.NoError(t, s.Close(), "idempotent")
}

func TestWaiterCapsRejectWithClearError(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	s := New(src, Options{Now: clock.Now, MaxWaitersPerKey: 2, MaxWaiters: 3})
	defer s.Close()
	req := Request{Group: "g", Topic: "T", ClientID: "a", QueueID: 0, Max: 1, Poll: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 3)
	for i := range 2 { // one by one, so that they never contend and stay parked
		go func() { _, err := s.Pop(ctx, req); done <- err }()
		waitFor(t, "parked", func() bool { return s.Stats().Waiters == uint64(i+1) })
	}
	_, err := s.Pop(ctx, req)
	require.ErrorIs(t, err, ErrTooManyWaiters)
	require.Contains(t, err.Error(), "per group@topic")
	req2 := req
	req2.Group = "h"
	go func() { _, err := s.Pop(ctx, req2); done <- err }()
	waitFor(t, "3 waiting", func() bool { return s.Stats().Waiters == 3 })
	req3 := req
	req3.Group = "k"
	_, err = s.Pop(ctx, req3)
	require.ErrorIs(t, err, ErrTooManyWaiters)
	require.Contains(t, err.Error(), "total")
	cancel()
	for range 3 {
		require.ErrorIs(t, <-done, context.Canceled)
	}
}
