package pop

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

func TestUnlockWithAnotherHoldersTokenReleasesNothing(t *testing.T) {
	var l topicLock
	a, ok := l.tryAcquire(1)
	require.True(t, ok)
	ok, _, _ = l.release(a+1, 2)
	require.False(t, ok)
	require.True(t, l.owns(a))
	ok, free, _ := l.release(a, 3)
	require.True(t, ok)
	require.True(t, free)
	b, ok := l.tryAcquire(4)
	require.True(t, ok)
	ok, _, _ = l.release(a, 5) // the old holder unlocking late
	require.False(t, ok)
	require.True(t, l.owns(b), "the late unlock did not release the new hold")
}

func TestLockBackstopNeverEvictsAHolderStillInUse(t *testing.T) {
	var l topicLock
	tok, _ := l.tryAcquire(0)
	_, evicted := l.evictAbandoned(int64(time.Hour), int64(time.Minute))
	require.False(t, evicted, "the holder's request is live, however old the hold")
	require.True(t, l.owns(tok))

	var l2 topicLock
	tok2, _ := l2.tryAcquire(0)
	l2.abandon(tok2 + 1) // another hold's request: no effect
	l2.abandon(tok2)
	_, evicted = l2.evictAbandoned(int64(30*time.Second), int64(time.Minute))
	require.False(t, evicted, "not expired yet")
	got, evicted := l2.evictAbandoned(int64(2*time.Minute), int64(time.Minute))
	require.True(t, evicted)
	require.Equal(t, tok2, got)
	ok, _, _ := l2.release(tok2, 0)
	require.False(t, ok, "the evicted holder's unlock releases nothing")
	tok3, ok := l2.tryAcquire(0)
	require.True(t, ok)
	_, evicted = l2.evictAbandoned(int64(time.Hour), int64(time.Minute))
	require.False(t, evicted, "a new hold starts live")
	require.True(t, l2.owns(tok3))
}

func TestLockHandsOverToQueuedWaitersInOrder(t *testing.T) {
	var l topicLock
	a, _ := l.tryAcquire(0)
	w1 := l.enqueue()
	w2 := l.enqueue()
	_, ok := l.tryAcquire(0)
	require.False(t, ok, "queued waiters go first")
	_, free, to := l.release(a, 1)
	require.False(t, free)
	require.Same(t, w1, to)
	require.True(t, w1.granted)
	require.True(t, l.owns(w1.token))
	require.False(t, w2.granted)
	free, to = l.cancel(w1, 2)
	require.False(t, free, "w1 gives up after the grant: handed on to w2")
	require.Same(t, w2, to)
	require.True(t, l.owns(w2.token))
	free, to = l.cancel(w2, 3)
	require.True(t, free)
	require.Nil(t, to)
	_, ok = l.tryAcquire(4)
	require.True(t, ok)
}

// TestAbandonedSlowReadIsEvictedAndChangesNothing: a pop whose caller went
// away while its read hung for longer than LockExpiry loses the lock to the
// backstop; when the read finally returns it changes nothing.
func TestAbandonedSlowReadIsEvictedAndChangesNothing(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 2)
	s := New(src, Options{Now: clock.Now, LockExpiry: time.Minute})
	defer s.Close()
	release := src.gate(0)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { _, err := s.Pop(ctx, req0(1, time.Minute)); done <- err }()
	<-src.entered
	clock.Advance(2 * time.Minute)
	r, err := s.Pop(bg, req0(1, time.Minute))
	require.NoError(t, err)
	require.Empty(t, r.Messages, "the holder's request is live: not evicted")
	cancel()
	// Now abandoned and expired: the next pop evicts it and proceeds.
	r, err = popUngated(t, s, src)
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(r))
	require.EqualValues(t, 1, s.Stats().LockEvictions)
	release() // the stuck read returns at last
	require.ErrorIs(t, <-done, context.Canceled)
	r, err = s.Pop(bg, req0(2, time.Minute))
	require.NoError(t, err)
	require.Equal(t, []int64{1}, offsetsOf(r), "the evicted pop delivered nothing")
}

// popUngated pops queue 0 while the evicted holder is still stuck in its
// gated read: the gate only blocks the read that entered it, so lift the
// gate for new reads first.
func popUngated(t *testing.T, s *Service, src *memSource) (Result, error) {
	t.Helper()
	src.mu.Lock()
	delete(src.gates, 0)
	src.mu.Unlock()
	return s.Pop(bg, req0(1, time.Minute))
}

// TestPanickingSourceDoesNotLeaveTheLockHeld: a host whose Source panics
// (and recovers, as net/http does) must not brick the group@topic.
func TestPanickingSourceDoesNotLeaveTheLockHeld(t *testing.T) {
	src := &panicSource{memSource: newMemSource()}
	src.append("T", 0, 1)
	s := New(src, Options{})
	defer s.Close()
	func() {
		defer func() { require.NotNil(t, recover()) }()
		src.panics = true
		_, _ = s.Pop(bg, req0(1, time.Minute))
	}()
	src.panics = false
	r, err := s.Pop(bg, req0(1, time.Minute))
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(r))
}

type panicSource struct {
	*memSource
	panics bool
}

func (p *panicSource) Read(topic string, q int, off int64, max int) ([]*store.Message, error) {
	if p.panics {
		panic("disk on fire")
	}
	return p.memSource.Read(topic, q, off, max)
}
