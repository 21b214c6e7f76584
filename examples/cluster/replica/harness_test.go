package replica

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// long reports whether the long versions of the soak tests run.
func long() bool { return os.Getenv("BROKERCORE_LONG") == "1" }

// tcluster is an in-process cluster on raft's in-memory transport: nodes
// can be killed (closed), restarted on their directory, and cut off from
// the others.
type tcluster struct {
	t     testing.TB
	ids   []string
	dirs  map[string]string
	mu    sync.Mutex
	trans map[string]*raft.InmemTransport
	nodes map[string]*Node
	cut   map[string]bool
	tweak func(*Config)
}

func fastConfig(c *Config) {
	c.HeartbeatTimeout = 250 * time.Millisecond
	c.ElectionTimeout = 250 * time.Millisecond
	c.LeaderLeaseTimout = 225 * time.Millisecond // the default, 9/10 of HeartbeatTimeout: a leader stalled by a loaded machine under -race steps down only after 225 ms
	c.ApplyTimeout = 2 * time.Second
	c.ScheduleTick = 10 * time.Millisecond
	c.CommitEvery = 20 * time.Millisecond
}

// newCluster starts n voters n1..nN bootstrapped together.
func newCluster(t testing.TB, n int, tweak func(*Config)) *tcluster {
	c := &tcluster{t: t, dirs: map[string]string{}, trans: map[string]*raft.InmemTransport{},
		nodes: map[string]*Node{}, cut: map[string]bool{}, tweak: tweak}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		c.ids = append(c.ids, id)
		c.dirs[id] = t.TempDir()
	}
	for _, id := range c.ids {
		c.start(id, true)
	}
	t.Cleanup(c.closeAll)
	return c
}

func (c *tcluster) servers() []raft.Server {
	var s []raft.Server
	for _, id := range c.ids {
		s = append(s, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id)})
	}
	return s
}

func (c *tcluster) config(id string, bootstrap bool) Config {
	cfg := Config{ID: id, Dir: c.dirs[id], Transport: c.transport(id)}
	if bootstrap {
		cfg.Bootstrap = c.servers()
	}
	cfg.Probe = func(pid, addr, _ string) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.nodes[pid]; !ok || c.cut[pid] {
			return fmt.Errorf("%s at %s does not answer", pid, addr)
		}
		return nil
	}
	fastConfig(&cfg)
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

// transport makes a fresh transport for id and connects it both ways with
// every node not cut off.
func (c *tcluster) transport(id string) *raft.InmemTransport {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, tr := raft.NewInmemTransportWithTimeout(raft.ServerAddress(id), 200*time.Millisecond)
	c.trans[id] = tr
	for pid, p := range c.trans {
		if pid == id || c.cut[pid] {
			continue
		}
		tr.Connect(raft.ServerAddress(pid), p)
		p.Connect(raft.ServerAddress(id), tr)
	}
	return tr
}

func (c *tcluster) start(id string, bootstrap bool) *Node {
	c.t.Helper()
	n, err := Open(c.config(id, bootstrap))
	require.NoError(c.t, err)
	c.mu.Lock()
	c.nodes[id] = n
	c.mu.Unlock()
	return n
}

// addID registers a new (not yet member) node id with its own directory.
func (c *tcluster) addID(id string) {
	dir := c.t.TempDir()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
	c.dirs[id] = dir
}

// kill stops a node as a crash would look to the others: its transport is
// cut, then it is closed.
func (c *tcluster) kill(id string) {
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	tr := c.trans[id]
	delete(c.trans, id)
	for _, p := range c.trans {
		p.Disconnect(raft.ServerAddress(id))
	}
	c.mu.Unlock()
	if tr != nil {
		tr.DisconnectAll()
	}
	if n != nil {
		_ = n.Close()
	}
}

// restart starts a killed node again on its directory.
func (c *tcluster) restart(id string) *Node { return c.start(id, false) }

// isolate cuts id off from every other node, both ways.
func (c *tcluster) isolate(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut[id] = true
	for pid, p := range c.trans {
		if pid != id {
			p.Disconnect(raft.ServerAddress(id))
		}
	}
	if tr := c.trans[id]; tr != nil {
		tr.DisconnectAll()
	}
}

// heal reconnects id to every live node.
func (c *tcluster) heal(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cut, id)
	tr := c.trans[id]
	for pid, p := range c.trans {
		if pid == id || c.cut[pid] || tr == nil {
			continue
		}
		tr.Connect(raft.ServerAddress(pid), p)
		p.Connect(raft.ServerAddress(id), tr)
	}
}

func (c *tcluster) node(id string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *tcluster) live() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, id := range c.ids {
		if n := c.nodes[id]; n != nil {
			out = append(out, n)
		}
	}
	return out
}

// leader waits until exactly one reachable node runs the leader services.
func (c *tcluster) leader() *Node {
	c.t.Helper()
	var l *Node
	require.Eventually(c.t, func() bool {
		l = nil
		count := 0
		for _, n := range c.live() {
			c.mu.Lock()
			cut := c.cut[n.ID()]
			c.mu.Unlock()
			if !cut && n.IsLeader() {
				l = n
				count++
			}
		}
		return count == 1
	}, 15*time.Second, 5*time.Millisecond, "no single leader")
	return l
}

func (c *tcluster) closeAll() {
	for _, n := range c.live() {
		c.kill(n.ID())
	}
}

// waitConverged waits until every live node's FSM applied the same last
// command (call it after the writes of interest were acknowledged: the
// leader applied them then).
func (c *tcluster) waitConverged() {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		nodes := c.live()
		for _, n := range nodes {
			if n.fsm.lastIndex() != nodes[0].fsm.lastIndex() {
				return false
			}
		}
		return true
	}, 15*time.Second, 5*time.Millisecond, "nodes did not converge")
}

// dump is every message of a node's store, in log order, as comparable
// strings (everything the log assigned included).
func dump(t testing.TB, st *store.Store) []string {
	t.Helper()
	var out []string
	next := st.Stats().LogNext
	for off := st.Stats().LogMin; off < next; off++ {
		m, err := st.ReadAt(off)
		require.NoError(t, err)
		keys := make([]string, 0, len(m.Properties))
		for k, v := range m.Properties {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		out = append(out, fmt.Sprintf("%d %s/%d@%d %s %v %q", m.LogOffset, m.Topic, m.QueueID, m.QueueOffset,
			m.StoredAt.Format(time.RFC3339Nano), keys, m.Body))
	}
	return out
}

// requireIdentical checks that every live node holds the same messages at
// the same offsets with the same timestamps.
func (c *tcluster) requireIdentical() {
	c.t.Helper()
	c.waitConverged()
	nodes := c.live()
	want := dump(c.t, nodes[0].Store())
	for _, n := range nodes[1:] {
		got := dump(c.t, n.Store())
		require.Equal(c.t, len(want), len(got), "node %s holds %d messages, %s %d", n.ID(), len(got), nodes[0].ID(), len(want))
		for i := range want {
			require.Equal(c.t, want[i], got[i], "node %s differs from %s at log offset %d", n.ID(), nodes[0].ID(), i)
		}
	}
}

func msg(topic string, queue int, body string) *store.Message {
	return &store.Message{Topic: topic, QueueID: queue, Body: []byte(body)}
}
