package store

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// batchOf is n messages for queue 0 of topic t.
func batchOf(n int) []*Message {
	ms := make([]*Message, n)
	for i := range ms {
		ms[i] = msg("t", 0, "x")
	}
	return ms
}

// The group commit's leader waits for as many messages as the last round
// carried, however they are split into appends: a broker that appends the
// sends of one read burst together brings the same senders' messages back
// in fewer, larger appends. A last round of 16 messages is completed by
// one append of 16 (no wait at all), and by an append of 4 and then one
// of 12, which share one fsync. Counted in appenders, the leader would
// wait for 16 appends that never come, for as long as the last fsync took
// (here an hour).
func TestGroupCommitGathersTheLastRoundsMessagesNotItsAppenders(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	setLastRound := func() {
		s.mu.Lock()
		s.lastGroup, s.lastFsync = 16, time.Hour
		s.mu.Unlock()
	}
	setLastRound()
	done := make(chan error, 2)
	go func() { done <- s.Append(batchOf(16)...) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("one append of the last round's 16 messages waited for more appenders")
	}

	setLastRound()
	syncs := s.Stats().Syncs
	go func() { done <- s.Append(batchOf(4)...) }()
	waitFor(t, func() bool { s.mu.RLock(); defer s.mu.RUnlock(); return s.gatherWant == 16 })
	var wg sync.WaitGroup
	wg.Go(func() { done <- s.Append(batchOf(12)...) })
	for range 2 {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("the 16 messages of two appends did not complete the group")
		}
	}
	wg.Wait()
	require.Equal(t, syncs+1, s.Stats().Syncs, "the two appends share one fsync")
	require.Equal(t, int64(32), s.MaxOffset("t", 0))
	s.mu.RLock()
	defer s.mu.RUnlock()
	require.Zero(t, s.waitRecs, "no message is left waiting")
	require.Equal(t, 16, s.lastGroup, "the round's messages")
}
