package pop

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

// TestZeroInvisibleIsDefaultInvisibleNotEverySecond is the trap of issue
// 14: a zero Request.Invisible was clamped to 1 s, so an unacked message
// came back every second. Zero means DefaultInvisible (60 s).
func TestZeroInvisibleIsDefaultInvisibleNotEverySecond(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 1)
	s := New(src, Options{Now: clock.Now})
	defer s.Close()
	req := Request{Group: "g", Topic: "T", ClientID: "c"} // zero Max, zero Invisible
	r, err := s.Pop(bg, req)
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(r), "zero Max means 1")
	require.Equal(t, DefaultInvisible, r.Invisible)
	require.False(t, r.Clamped, "a zero that means the default is not a clamp")
	for range 59 {
		clock.Advance(time.Second)
		r, err = s.Pop(bg, req)
		require.NoError(t, err)
		require.Empty(t, r.Messages, "redelivered before DefaultInvisible")
	}
	clock.Advance(time.Second)
	r, err = s.Pop(bg, req)
	require.NoError(t, err)
	require.Equal(t, []int{2}, attemptsOf(r))
}

func TestZeroMaxIsOneAndOutOfRangeMaxIsInvalid(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 3)
	s := New(src, Options{Now: newFakeClock().Now})
	defer s.Close()
	r, err := s.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	for _, m := range []int{-1, MaxBatch + 1} {
		_, err = s.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", Max: m})
		require.ErrorIs(t, err, ErrInvalid, "max %d", m)
	}
}

// TestPopOverClosedStoreIsErrClosedNotEmpty: a pop service whose store was
// closed under it used to answer an empty success.
func TestPopOverClosedStoreIsErrClosedNotEmpty(t *testing.T) {
	var hook atomic.Pointer[Service]
	st := realStore(t, t.TempDir(), &hook)
	appendN(t, st, "T", 0, 2)
	s := New(st, Options{Now: newFakeClock().Now})
	defer s.Close()
	r, err := s.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", Invisible: time.Minute})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	_, err = s.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c"})
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Pop(bg, Request{Group: "g", Topic: "empty", ClientID: "c"})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Ack(r.Messages[0].Handle), ErrClosed)
	_, err = s.ChangeInvisible(r.Messages[0].Handle, time.Minute)
	require.ErrorIs(t, err, ErrClosed)
}

// TestLongPollEndsWithErrClosedWhenStoreCloses: a waiter must not sit out
// its Poll for arrivals that will never come.
func TestLongPollEndsWithErrClosedWhenStoreCloses(t *testing.T) {
	var hook atomic.Pointer[Service]
	st := realStore(t, t.TempDir(), &hook)
	s := New(st, Options{Now: newFakeClock().Now})
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.Pop(context.Background(), Request{Group: "g", Topic: "T", ClientID: "c", Poll: time.Hour})
		done <- err
	}()
	waitFor(t, "the pop waits", func() bool { return s.Stats().Waiters == 1 })
	require.NoError(t, st.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("long poll kept waiting after the store closed")
	}
}

// TestNewSubscribesToTheStoreAndCancelsOnClose: no OnAppend wiring, yet an
// arrival wakes a long poll; after Close the hook is gone.
func TestNewSubscribesToTheStoreAndCancelsOnClose(t *testing.T) {
	var none atomic.Pointer[Service] // never set: only Subscribe wakes
	st := realStore(t, t.TempDir(), &none)
	defer st.Close()
	sub := &subscribeCounter{Store: st}
	s := New(sub, Options{Now: newFakeClock().Now})
	require.EqualValues(t, 1, sub.live.Load())
	done := make(chan Result, 1)
	go func() {
		r, err := s.Pop(context.Background(), Request{Group: "g", Topic: "T", ClientID: "c", Poll: time.Hour})
		require.NoError(t, err)
		done <- r
	}()
	waitFor(t, "the pop waits", func() bool { return s.Stats().Waiters == 1 })
	appendN(t, st, "T", 0, 1)
	select {
	case r := <-done:
		require.Len(t, r.Messages, 1)
	case <-time.After(5 * time.Second):
		t.Fatal("arrival did not wake the long poll: pop.New did not subscribe")
	}
	require.NoError(t, s.Close())
	require.Zero(t, sub.live.Load(), "Close cancelled the subscription")
	appendN(t, st, "T", 0, 1) // must not reach the closed service
}

// subscribeCounter counts the live arrival subscriptions on a store.
type subscribeCounter struct {
	*store.Store
	live atomic.Int32
}

func (c *subscribeCounter) Subscribe(fn func(string, int, int64)) func() {
	cancel := c.Store.Subscribe(fn)
	c.live.Add(1)
	var once sync.Once
	return func() { once.Do(func() { cancel(); c.live.Add(-1) }) }
}
