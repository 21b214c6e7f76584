package replica

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/testkit"
	"github.com/stretchr/testify/require"
)

// httpAddrs gives every node of c a (fake) HTTP address known at bootstrap.
func httpAddrs(ids ...string) map[string]string {
	m := map[string]string{}
	for _, id := range ids {
		m[id] = "http-" + id
	}
	return m
}

// watchRedirects polls every live node until stop, counting the moments a
// node knew the leader's id but not its HTTP address (the field report's
// 503 "leader is nX … (http \"\")").
func watchRedirects(c *tcluster, stop <-chan struct{}) (blind *atomic.Int64, done func()) {
	blind = &atomic.Int64{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, n := range c.live() {
				if _, id := n.Raft().LeaderWithID(); id != "" && n.LeaderAddr() == "" {
					blind.Add(1)
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return blind, wg.Wait
}

// A follower that knows the leader's raft id always knows its HTTP
// address: the bootstrap voters' addresses come with the bootstrap
// configuration, and a member added later has its address in the
// replicated state before it becomes a voter — so also a leader that never
// led before, right after its election, is redirected to.
func TestFollowersKnowTheLeadersHTTPAddressFromTheStart(t *testing.T) {
	addrs := httpAddrs("n1", "n2", "n3", "n4")
	stop := make(chan struct{})
	var c *tcluster
	var blind *atomic.Int64
	var wait func()
	c = newCluster(t, 3, func(cfg *Config) {
		cfg.Addr = addrs[cfg.ID]
		cfg.BootstrapAddrs = map[string]string{"n1": addrs["n1"], "n2": addrs["n2"], "n3": addrs["n3"]}
	})
	blind, wait = watchRedirects(c, stop)
	defer func() { close(stop); wait() }()

	for round := range 3 {
		l := c.leader()
		_, err := l.Produce(msg("t", 0, fmt.Sprint(round)))
		require.NoError(t, err)
		c.kill(l.ID())
		c.leader()
		c.restart(l.ID())
	}
	c.addID("n4")
	c.start("n4", false)
	l := c.leader()
	require.NoError(t, l.AddMember("n4", "n4", addrs["n4"]))
	c.waitConverged() // n4 caught up: a transfer to a node without the log fails
	require.Eventually(t, func() bool {
		if l := c.leader(); l.ID() != "n4" {
			_ = l.Raft().LeadershipTransferToServer("n4", "n4").Error()
		}
		return c.node("n4").IsLeader()
	}, 10*time.Second, 5*time.Millisecond)
	c.waitConverged()
	require.Zero(t, blind.Load(), "moments a node knew the leader but not its HTTP address")
	require.Eventually(t, func() bool {
		for _, n := range c.live() {
			if n.LeaderAddr() != addrs["n4"] {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "every node names n4's address")
}

// The leader logs a peer it cannot reach (WARN) and its return (INFO),
// both with the key "peer", and Reachable follows them.
func TestLeaderLogsPeersLossAndReturn(t *testing.T) {
	var buf testkit.LogBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := newCluster(t, 3, func(cfg *Config) { cfg.Logger = log })
	l := c.leader()
	var f string
	for _, id := range c.ids {
		if id != l.ID() {
			f = id
			break
		}
	}
	require.True(t, l.Reachable(f), "a follower in contact")
	require.True(t, l.Reachable(l.ID()))
	require.True(t, c.node(f).Reachable(f), "a node vouches for itself")
	require.False(t, c.node(f).Reachable(l.ID()), "a follower vouches for nobody else")
	c.isolate(f)
	require.Eventually(t, func() bool {
		return strings.Contains(buf.String(), fmt.Sprintf(`level=WARN msg="cluster: peer unreachable" node=%s peer=%s`, l.ID(), f))
	}, 10*time.Second, 5*time.Millisecond, "%s", &buf)
	require.False(t, l.Reachable(f), "the leader lost it")
	c.heal(f)
	require.Eventually(t, func() bool {
		return strings.Contains(buf.String(), fmt.Sprintf(`level=INFO msg="cluster: peer reachable again" node=%s peer=%s`, l.ID(), f))
	}, 10*time.Second, 5*time.Millisecond, "%s", &buf)
	require.True(t, l.Reachable(f), "back in contact")
	require.Equal(t, 1, strings.Count(buf.String(), fmt.Sprintf(`msg="cluster: peer unreachable" node=%s peer=%s`, l.ID(), f)), "logged once per loss, not per failed heartbeat")
}
