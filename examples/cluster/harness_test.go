package main

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// tcluster is three replica nodes in this process on raft's in-memory
// transport, each serving the HTTP API on loopback — what main wires,
// through replica's exported API only.
type tcluster struct {
	t     *testing.T
	ids   []string
	mu    sync.Mutex
	nodes map[string]*replica.Node
}

// httpCluster starts it; addrs are the nodes' HTTP addresses.
func httpCluster(t *testing.T) (*tcluster, map[string]string) {
	return httpClusterWith(t, nil, nil)
}

// httpClusterWith is httpCluster whose HTTP API has a cluster secret and
// reads now (nil = none, time.Now).
func httpClusterWith(t *testing.T, secret []byte, now func() time.Time) (*tcluster, map[string]string) {
	c := &tcluster{t: t, nodes: map[string]*replica.Node{}}
	lns := map[string]net.Listener{}
	addrs := map[string]string{}
	trans := map[string]*raft.InmemTransport{}
	var servers []raft.Server
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns[id], addrs[id] = ln, ln.Addr().String()
		_, trans[id] = raft.NewInmemTransportWithTimeout(raft.ServerAddress(id), 200*time.Millisecond)
		c.ids = append(c.ids, id)
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id)})
	}
	for a, ta := range trans {
		for b, tb := range trans {
			if a != b {
				ta.Connect(raft.ServerAddress(b), tb)
			}
		}
	}
	for _, id := range c.ids {
		n, err := replica.Open(replica.Config{ID: id, Dir: t.TempDir(), Transport: trans[id], Addr: addrs[id],
			Bootstrap: servers, BootstrapAddrs: addrs,
			// A leader a loaded machine (load average 10, -race) stalls for
			// most of a second keeps leading: the tests look at the leader
			// they found.
			HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimout: 900 * time.Millisecond,
			ApplyTimeout: 2 * time.Second, ScheduleTick: 10 * time.Millisecond, CommitEvery: 20 * time.Millisecond,
			Probe: func(id, _, _ string) error { return nil }})
		require.NoError(t, err)
		c.nodes[id] = n
		srv := &http.Server{Handler: Handler(n, replica.Config{Addr: addrs[id], ClusterSecret: secret, Now: now})}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(lns[id]) }()
		t.Cleanup(func() { _ = srv.Close(); <-done; _ = n.Close(); _ = trans[id].Close() })
	}
	return c, addrs
}

func (c *tcluster) node(id string) *replica.Node { return c.nodes[id] }

func (c *tcluster) live() []*replica.Node {
	var out []*replica.Node
	for _, id := range c.ids {
		out = append(out, c.nodes[id])
	}
	return out
}

// leader waits until exactly one node runs the leader services.
func (c *tcluster) leader() *replica.Node {
	c.t.Helper()
	var l *replica.Node
	require.Eventually(c.t, func() bool {
		l = nil
		count := 0
		for _, n := range c.live() {
			if n.IsLeader() {
				l = n
				count++
			}
		}
		return count == 1
	}, 15*time.Second, 5*time.Millisecond, "no single leader")
	return l
}

// waitConverged waits until every node applied the same last command.
func (c *tcluster) waitConverged() {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		nodes := c.live()
		for _, n := range nodes {
			if n.Status().LastApplied != nodes[0].Status().LastApplied {
				return false
			}
		}
		return true
	}, 15*time.Second, 5*time.Millisecond, "nodes did not converge")
}
