package replica

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A store hook runs on the appender, which on a replica is raft's FSM
// goroutine: a hook that reads the replicated state (the committed
// offsets, as pop's plan does) must not wait for the apply that called
// it. The FSM held its state lock across the store append, and a leader
// of examples/rocketmq/replicated hung for good under load: pop's Arrived
// (a hook) waited for a pop whose plan waited for that lock.
func TestAStoreHookReadsTheReplicatedStateWhileItIsApplied(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	var calls atomic.Int64
	for _, n := range c.live() {
		cancel := n.Store().Subscribe(func(topic string, q int, _ int64) {
			n.Committed("g", topic, q)
			calls.Add(1)
		})
		t.Cleanup(cancel)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Produce(msg("t", 0, "a"))
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the produce never returned: the hook waited for the state machine")
	}
	require.Eventually(t, func() bool { return calls.Load() == 3 }, 30*time.Second, 5*time.Millisecond,
		"every replica's hook ran")
}
