package replica

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// steadyConfig is for tests that need one leader throughout (they hold
// on to it): timeouts a loaded CI machine under -race does not trip.
func steadyConfig(cfg *Config) {
	cfg.HeartbeatTimeout = time.Second
	cfg.ElectionTimeout = time.Second
	cfg.LeaderLeaseTimout = 500 * time.Millisecond
	cfg.ApplyTimeout = 5 * time.Second
}

func compactingConfig(cfg *Config) {
	steadyConfig(cfg)
	cfg.SnapshotThreshold = 1 << 30 // the test decides when
	cfg.TrailingLogs = 5
}

// produceMixed writes n single messages round-robin over three topics and
// four queues, plus commits of a group's offsets.
func produceMixed(t testing.TB, l *Node, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := l.Produce(msg(fmt.Sprintf("t%d", i%3), i%4, fmt.Sprintf("m%d", i)))
		require.NoError(t, err)
	}
}

func TestNodesCatchUpBySnapshotAfterCompaction(t *testing.T) {
	c := newCluster(t, 3, compactingConfig)
	l := c.leader()
	produceMixed(t, l, 0, 200)
	acked := popN(t, l, "g", "t0", 10)
	require.Len(t, acked, 10)
	for _, d := range acked {
		require.NoError(t, l.Ack(d.Handle))
	}
	require.NoError(t, l.FlushOffsets())

	// n3 goes down; the others go on and compact their raft logs.
	down := "n3"
	if l.ID() == down {
		down = "n2"
	}
	c.kill(down)
	produceMixed(t, l, 200, 200)
	c.waitConverged()
	for _, n := range c.live() {
		require.NoError(t, n.Raft().Snapshot().Error())
	}
	first, err := l.logs.FirstIndex()
	require.NoError(t, err)
	require.Greater(t, first, uint64(100), "the leader's raft log was compacted")

	// The node that was down holds a prefix: it takes the snapshot,
	// keeps what it has and appends the rest.
	back := c.restart(down)
	require.Eventually(t, func() bool { return back.fsm.restored() > 0 }, 10*time.Second, 5*time.Millisecond)

	// A fourth node joins with an empty directory.
	c.addID("n4")
	n4 := c.start("n4", false)
	require.NoError(t, l.AddMember("n4", "n4", ""))
	require.Eventually(t, func() bool { return n4.fsm.restored() > 0 }, 10*time.Second, 5*time.Millisecond)
	produceMixed(t, l, 400, 10)
	c.requireIdentical()
	for _, n := range c.live() {
		off, ok := n.Committed("g", "t0", 0)
		require.True(t, ok, "node %s", n.ID())
		require.Equal(t, int64(10), off, "node %s", n.ID())
	}

	// n4 can lead and serves the same reads.
	require.NoError(t, l.Raft().LeadershipTransferToServer("n4", "n4").Error())
	require.Eventually(t, n4.IsLeader, 10*time.Second, 5*time.Millisecond)
	for q := 0; q < 4; q++ {
		a, err := n4.Read("t1", q, 0, 1024)
		require.NoError(t, err)
		b, err := back.Read("t1", q, 0, 1024)
		require.NoError(t, err)
		require.Equal(t, a, b)
	}
	_, err = n4.Produce(msg("t0", 0, "on n4"))
	require.NoError(t, err)
	c.requireIdentical()
}

// The snapshot format round-trips: a store restored from it holds the
// same messages at the same offsets with the same timestamps.
func TestSnapshotRoundTripsIntoAnEmptyStoreAndSkipsAPrefix(t *testing.T) {
	src := newTestFSM(t)
	at := time.Unix(1_700_000_000, 0)
	for i := 0; i < 50; i++ {
		e := &entry{Kind: kindProduce, At: at.Add(time.Duration(i) * time.Millisecond),
			Msgs: []*store.Message{msg("a", i%2, fmt.Sprint(i)), {Topic: "b", Body: []byte("x"), Keys: []string{"k"}, Properties: map[string]string{"p": "v"}}}}
		require.NoError(t, applyEntry(src, uint64(i+1), e).err)
	}
	applyEntry(src, 60, &entry{Kind: kindCommit, Commits: []commitItem{{Group: "g", Topic: "a", Offset: 3}}})
	snap, err := src.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.(*snapshot).write(&buf))

	for _, prefix := range []int{0, 1, 31, 100} {
		dst := newTestFSM(t)
		for i := 0; i < prefix/2; i++ { // the same history up to a point
			e := &entry{Kind: kindProduce, At: at.Add(time.Duration(i) * time.Millisecond),
				Msgs: []*store.Message{msg("a", i%2, fmt.Sprint(i)), {Topic: "b", Body: []byte("x"), Keys: []string{"k"}, Properties: map[string]string{"p": "v"}}}}
			require.NoError(t, applyEntry(dst, uint64(i+1), e).err)
		}
		require.NoError(t, dst.Restore(readCloser{bytes.NewReader(buf.Bytes())}), "prefix %d", prefix)
		require.Equal(t, dump(t, src.st), dump(t, dst.st), "prefix %d", prefix)
		require.Equal(t, offsetState{offset: 3, committed: true}, dst.committed(offsetKey{"g", "a", 0}))
	}
	// A damaged snapshot is refused.
	dst := newTestFSM(t)
	b := append([]byte(nil), buf.Bytes()...)
	require.Error(t, dst.Restore(readCloser{bytes.NewReader(b[:len(b)/2])}))
	b[0] = 'X'
	require.Error(t, dst.Restore(readCloser{bytes.NewReader(b)}))
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// A snapshot is only written if it can be restored: the small state (the
// offsets of every group, which clients can grow) has one bound, checked
// when the snapshot is written — the snapshot fails, raft keeps its log
// and tries again later, every node keeps running — not only when it is
// read, where a snapshot already taken would keep every node that needs
// it (a follower far behind, any node restarting) from ever starting.
func TestSnapshotStateOverTheBoundIsNotWritten(t *testing.T) {
	defer func(m int) { maxSnapState = m }(maxSnapState)
	f := newTestFSM(t)
	var cs []commitItem
	for i := range 40 {
		cs = append(cs, commitItem{Group: fmt.Sprintf("group-%03d", i), Topic: "t", Offset: 1})
	}
	require.NoError(t, applyEntry(f, 1, &entry{Kind: kindCommit, Commits: cs}).err)
	snap, err := f.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.(*snapshot).write(&buf))
	maxSnapState = buf.Len() - 10 // the state alone is over it now
	require.ErrorIs(t, snap.(*snapshot).write(io.Discard), ErrSnapshotTooLarge)

	maxSnapState = buf.Len()
	require.NoError(t, snap.(*snapshot).write(io.Discard))
	dst := newTestFSM(t)
	require.NoError(t, dst.Restore(readCloser{bytes.NewReader(buf.Bytes())}), "what is written is restored")
	require.Len(t, dst.offsets, 40)
}
