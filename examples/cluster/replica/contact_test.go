package replica

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/testkit"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestContactCheckDecidesOnRaftsOwnCriterion(t *testing.T) {
	const hb = 250 * time.Millisecond
	for _, tc := range []struct {
		name   string
		state  raft.RaftState
		leader raft.ServerAddress
		silent time.Duration
		jitter time.Duration
		want   bool
	}{
		{"follower, leader silent for the timeout", raft.Follower, "n1", hb, 0, true},
		{"follower, leader silent for the timeout and its jitter", raft.Follower, "n1", hb + 30*time.Millisecond, 30 * time.Millisecond, true},
		{"follower, within the jitter", raft.Follower, "n1", hb + 29*time.Millisecond, 30 * time.Millisecond, false},
		{"follower, leader heard from", raft.Follower, "n1", hb - time.Millisecond, 0, false},
		{"follower that knows no leader (raft noticed)", raft.Follower, "", time.Hour, 0, false},
		{"candidate", raft.Candidate, "", time.Hour, 0, false},
		{"leader", raft.Leader, "n2", time.Hour, 0, false},
		{"shut down", raft.Shutdown, "n1", time.Hour, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, contactCheck(tc.state, tc.leader, tc.silent, hb, tc.jitter))
		})
	}
}

// When the leader dies, a survivor starts the election as soon as the leader
// has been silent for the heartbeat timeout, not when raft's own timer gets
// to it. raft's timer may be first in one failover (its period is random),
// so the leader is killed until a survivor's watch has acted, at most 8
// times; without the watch it never does.
func TestSilentLeaderIsNoticedAsSoonAsItsTimeoutRunsOut(t *testing.T) {
	var logs testkit.LogBuffer
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	const line = "leader silent for its heartbeat timeout"
	for i := 0; i < 8 && !strings.Contains(logs.String(), line); i++ {
		l := c.leader()
		_, err := l.Produce(msg("t", 0, "before"))
		require.NoError(t, err)
		c.kill(l.ID())
		nl := c.leader()
		require.NotEqual(t, l.ID(), nl.ID())
		_, err = nl.Produce(msg("t", 0, "after"))
		require.NoError(t, err)
		c.restart(l.ID())
		c.waitConverged()
	}
	require.True(t, strings.Contains(logs.String(), line), "no survivor's watch started an election in 8 failovers")
	c.requireIdentical()
}
