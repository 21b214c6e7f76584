package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brokercore/brokercore/pop"
	"github.com/stretchr/testify/require"
)

func produceN(t testing.TB, l *Node, topic string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := l.Produce(msg(topic, 0, fmt.Sprint(i)))
		require.NoError(t, err)
	}
}

// popN pops up to n messages of topic/0 (no long poll).
func popN(t testing.TB, l *Node, group, topic string, n int) []pop.Delivery {
	t.Helper()
	var out []pop.Delivery
	for len(out) < n {
		res, err := l.Pop(context.Background(), pop.Request{Group: group, Topic: topic, QueueID: 0, Max: min(32, n-len(out)), ClientID: "c"})
		require.NoError(t, err)
		if len(res.Messages) == 0 {
			break
		}
		out = append(out, res.Messages...)
	}
	return out
}

func offsetsOf(ds []pop.Delivery) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, d.Message.QueueOffset)
	}
	return out
}

func TestPopOnlyOnTheLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	produceN(t, l, "t", 0, 3)
	c.waitConverged()
	for _, n := range c.live() {
		if n == l {
			continue
		}
		_, err := n.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", QueueID: 0})
		require.ErrorIs(t, err, ErrNotLeader)
		require.ErrorIs(t, n.Ack("x"), ErrNotLeader)
	}
	require.Len(t, popN(t, l, "g", "t", 10), 3)
}

// With CommitEvery out of the way, the test decides when offsets commit:
// what was committed before the failover never comes back; what was acked
// after the last commit (the documented bound) and what was never acked
// is delivered again by the new leader.
func TestConsumerPositionSurvivesFailoverWithinCommitBound(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.CommitEvery = time.Hour })
	l := c.leader()
	produceN(t, l, "t", 0, 100)

	for _, d := range popN(t, l, "g", "t", 60) {
		require.NoError(t, l.Ack(d.Handle))
	}
	require.NoError(t, l.FlushOffsets())
	c.waitConverged()
	for _, n := range c.live() {
		off, ok := n.Committed("g", "t", 0)
		require.True(t, ok)
		require.Equal(t, int64(60), off, "node %s", n.ID())
	}
	for _, d := range popN(t, l, "g", "t", 10) { // acked, not yet committed
		require.NoError(t, l.Ack(d.Handle))
	}
	require.Len(t, popN(t, l, "g", "t", 5), 5) // never acked

	c.kill(l.ID())
	nl := c.leader()
	again := popN(t, nl, "g", "t", 100)
	got := offsetsOf(again)
	require.Equal(t, int64(60), got[0], "resumes at the last committed offset")
	for i, off := range got {
		require.Equal(t, int64(60+i), off, "in order, nothing below the committed offset")
	}
	require.Len(t, got, 40)
	for _, d := range again {
		require.Equal(t, 1, d.Attempts, "a new leader's pop has no memory of earlier attempts")
	}
}

func TestAckedOffsetsReachFollowersWithinCommitEvery(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.CommitEvery = 20 * time.Millisecond })
	l := c.leader()
	produceN(t, l, "t", 0, 10)
	for _, d := range popN(t, l, "g", "t", 10) {
		require.NoError(t, l.Ack(d.Handle))
	}
	require.Eventually(t, func() bool {
		for _, n := range c.live() {
			if off, _ := n.Committed("g", "t", 0); off != 10 {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
}

func TestOffsetResetThroughRaftFencesOldCommits(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.CommitEvery = time.Hour })
	l := c.leader()
	produceN(t, l, "t", 0, 10)
	ds := popN(t, l, "g", "t", 4)
	require.NoError(t, l.ResetOffset("g", "t", 0, 8))
	// The handle belongs to the epoch before the reset: no commit of it.
	require.Error(t, l.Ack(ds[0].Handle))
	require.NoError(t, l.FlushOffsets())
	got := offsetsOf(popN(t, l, "g", "t", 10))
	require.Equal(t, []int64{8, 9}, got)
	require.ErrorIs(t, l.ResetOffset("", "t", 0, 1), ErrInvalid)
}

// ResetOffsets moves several queues in one entry, each with its epoch
// bumped; one bad offset refuses them all, and nothing moves.
func TestResetOffsetsMovesEveryQueueOrNone(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.CommitEvery = time.Hour })
	l := c.leader()
	require.NoError(t, l.ResetOffset("g", "t", 2, 5))
	before := l.fsm.committed(offsetKey{"g", "t", 2}).epoch

	require.ErrorIs(t, l.ResetOffsets("g", "t", map[int]int64{0: 1, 1: -1}), ErrInvalid)
	_, ok := l.Committed("g", "t", 0)
	require.False(t, ok, "queue 0 moved with queue 1 refused")

	require.NoError(t, l.ResetOffsets("g", "t", map[int]int64{0: 1, 1: 3, 2: 4}))
	require.NoError(t, l.ResetOffsets("g", "t", nil))
	for _, n := range c.live() {
		require.Eventually(t, func() bool {
			a, _ := n.Committed("g", "t", 0)
			b, _ := n.Committed("g", "t", 1)
			d, _ := n.Committed("g", "t", 2)
			return a == 1 && b == 3 && d == 4
		}, 10*time.Second, 5*time.Millisecond)
	}
	require.Equal(t, before+1, l.fsm.committed(offsetKey{"g", "t", 2}).epoch)
}
