package replica

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// view is what readers see of a topic on a node: per queue its MinOffset,
// MaxOffset and the bodies from MinOffset on.
func view(t testing.TB, n *Node, topic string, queues int) []string {
	t.Helper()
	var out []string
	for q := range queues {
		lo, hi := n.Store().MinOffset(topic, q), n.Store().MaxOffset(topic, q)
		msgs, err := n.Read(topic, q, lo, 1024)
		require.NoError(t, err)
		var bodies []string
		for _, m := range msgs {
			bodies = append(bodies, fmt.Sprintf("%d:%s", m.QueueOffset, m.Body))
		}
		out = append(out, fmt.Sprintf("q%d [%d,%d) %v", q, lo, hi, bodies))
	}
	return out
}

// requireSameView checks that every live node shows topic the same way
// and returns that view.
func (c *tcluster) requireSameView(topic string, queues int) []string {
	c.t.Helper()
	c.waitConverged()
	nodes := c.live()
	want := view(c.t, nodes[0], topic, queues)
	for _, n := range nodes[1:] {
		require.Equal(c.t, want, view(c.t, n, topic, queues), "node %s differs from %s on %s", n.ID(), nodes[0].ID(), topic)
	}
	return want
}

func produceSpread(t testing.TB, l *Node, topic string, queues, n int, prefix string) {
	t.Helper()
	for i := range n {
		_, err := l.Produce(msg(topic, i%queues, fmt.Sprintf("%s%d", prefix, i)))
		require.NoError(t, err)
	}
}

// A deleted topic is released at the same point of the log on every node:
// its messages are gone for readers everywhere, its offsets with them,
// and what is sent to it afterwards goes on from the old queue offsets
// and is read alike everywhere — after a restart too.
func TestDeletedTopicIsReleasedIdenticallyOnEveryNode(t *testing.T) {
	c := newCluster(t, 3, steadyConfig)
	l := c.leader()
	produceSpread(t, l, "gone", 2, 6, "old")
	produceSpread(t, l, "kept", 2, 4, "k")
	require.NoError(t, l.ResetOffset("g", "gone", 0, 2))
	require.NoError(t, l.ResetOffset("g", "kept", 0, 1))

	_, err := l.DeleteTopic("gone")
	require.NoError(t, err)
	produceSpread(t, l, "gone", 2, 2, "new")
	c.requireIdentical()
	want := []string{"q0 [3,4) [3:new0]", "q1 [3,4) [3:new1]"}
	require.Equal(t, want, c.requireSameView("gone", 2))
	kept := c.requireSameView("kept", 2)
	require.Equal(t, []string{"q0 [0,2) [0:k0 1:k2]", "q1 [0,2) [0:k1 1:k3]"}, kept)
	for _, n := range c.live() {
		_, ok := n.Committed("g", "gone", 0)
		require.False(t, ok, "node %s keeps the deleted topic's offset", n.ID())
		off, ok := n.Committed("g", "kept", 0)
		require.True(t, ok, "node %s", n.ID())
		require.Equal(t, int64(1), off, "node %s", n.ID())
	}

	// A follower restarts: raft replays the release over a store that is
	// past it already, and the node ends as the others.
	f := c.ids[0]
	if f == l.ID() {
		f = c.ids[1]
	}
	c.kill(f)
	produceSpread(t, l, "gone", 2, 2, "later")
	c.restart(f)
	c.requireIdentical()
	require.Equal(t, []string{"q0 [3,5) [3:new0 4:later0]", "q1 [3,5) [3:new1 4:later1]"}, c.requireSameView("gone", 2))
	require.Equal(t, kept, c.requireSameView("kept", 2))
}

// A commit fenced by the epoch before the release (an ack of a message
// popped before, a commit the leader had pending) does not bring the
// offset back.
func TestCommitFromBeforeTheReleaseIsStale(t *testing.T) {
	f := newTestFSM(t)
	at := time.Unix(1_700_000_000, 0)
	require.NoError(t, applyEntry(f, 1, &entry{Kind: kindProduce, At: at, Msgs: []*store.Message{msg("gone", 0, "a")}}).err)
	require.NoError(t, applyEntry(f, 2, &entry{Kind: kindCommit, Commits: []commitItem{{Group: "g", Topic: "gone", Offset: 1}}}).err)
	require.NoError(t, applyEntry(f, 3, &entry{Kind: kindRelease, Text: "gone"}).err)
	require.ErrorIs(t, applyEntry(f, 4, &entry{Kind: kindCommit, Commits: []commitItem{{Group: "g", Topic: "gone", Offset: 1}}}).err, ErrStaleEpoch)
	require.False(t, f.committed(offsetKey{"g", "gone", 0}).committed)

	require.NoError(t, applyEntry(f, 5, &entry{Kind: kindCommit, Commits: []commitItem{{Group: "h", Topic: "t", Offset: 0}}}).err)
	require.NoError(t, applyEntry(f, 6, &entry{Kind: kindForget, Text: "h"}).err)
	require.ErrorIs(t, applyEntry(f, 7, &entry{Kind: kindCommit, Commits: []commitItem{{Group: "h", Topic: "t", Offset: 0}}}).err, ErrStaleEpoch)
	require.False(t, f.committed(offsetKey{"h", "t", 0}).committed)

	require.ErrorIs(t, applyEntry(f, 8, &entry{Kind: kindRelease, Text: "bad topic"}).err, ErrRejected)
	require.ErrorIs(t, applyEntry(f, 9, &entry{Kind: kindForget, Text: ""}).err, ErrRejected)
}

// A snapshot carries the release points: a store restored from it,
// whatever prefix it held, ends as the one it was taken from — the
// topic's old messages hidden, the ones after the release visible.
func TestSnapshotCarriesTheReleasePoint(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	history := func(f *fsm, upTo int) {
		for i := range min(upTo, 30) {
			if i == 10 {
				require.NoError(t, applyEntry(f, uint64(i+1), &entry{Kind: kindRelease, Text: "a"}).err)
				continue
			}
			if i == 20 {
				require.NoError(t, applyEntry(f, uint64(i+1), &entry{Kind: kindRelease, Text: "b"}).err)
				continue
			}
			e := &entry{Kind: kindProduce, At: at.Add(time.Duration(i) * time.Millisecond),
				Msgs: []*store.Message{msg("a", i%2, fmt.Sprint(i)), msg("b", 0, fmt.Sprint(i))}}
			require.NoError(t, applyEntry(f, uint64(i+1), e).err)
		}
	}
	src := newTestFSM(t)
	history(src, 30)
	snap, err := src.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.(*snapshot).write(&buf))
	wantA, wantB := storeView(t, src.st, "a", 2), storeView(t, src.st, "b", 1)
	require.Equal(t, "q0 [5,13) [5:12 6:14 7:16 8:18 9:22 10:24 11:26 12:28]", wantA[0], "a's five first messages released")
	require.Equal(t, "q0 [19,28) [19:21 20:22 21:23 22:24 23:25 24:26 25:27 26:28 27:29]", wantB[0], "b's nineteen first released")

	// Prefixes: empty, before the first release, at it, between the two,
	// past both.
	for _, prefix := range []int{0, 5, 10, 11, 15, 21, 30} {
		dst := newTestFSM(t)
		history(dst, prefix)
		require.NoError(t, dst.Restore(readCloser{bytes.NewReader(buf.Bytes())}), "prefix %d", prefix)
		require.Equal(t, wantA, storeView(t, dst.st, "a", 2), "prefix %d", prefix)
		require.Equal(t, wantB, storeView(t, dst.st, "b", 1), "prefix %d", prefix)
		require.Equal(t, src.released, dst.released, "prefix %d", prefix)
	}
}

func storeView(t testing.TB, st *store.Store, topic string, queues int) []string {
	t.Helper()
	var out []string
	for q := range queues {
		lo, hi := st.MinOffset(topic, q), st.MaxOffset(topic, q)
		msgs, err := st.Read(topic, q, lo, 1024)
		require.NoError(t, err)
		var bodies []string
		for _, m := range msgs {
			bodies = append(bodies, fmt.Sprintf("%d:%s", m.QueueOffset, m.Body))
		}
		out = append(out, fmt.Sprintf("q%d [%d,%d) %v", q, lo, hi, bodies))
	}
	return out
}

// A node that was down while the topic was deleted, and a new member with
// an empty store, catch up from a snapshot taken after the release (the
// raft log below it compacted) and end identical to the others.
func TestNodesRestoredFromASnapshotEndReleasedAlike(t *testing.T) {
	c := newCluster(t, 3, compactingConfig)
	l := c.leader()
	produceSpread(t, l, "gone", 2, 6, "old")
	require.NoError(t, l.ResetOffset("g", "gone", 1, 3))
	down := "n3"
	if l.ID() == down {
		down = "n2"
	}
	c.kill(down)
	produceSpread(t, l, "gone", 2, 2, "more")
	_, err := l.DeleteTopic("gone")
	require.NoError(t, err)
	released := l.fsm.lastIndex()
	produceSpread(t, l, "gone", 2, 2, "new")
	produceMixed(t, l, 0, 20)
	c.waitConverged()
	for _, n := range c.live() {
		require.NoError(t, n.Raft().Snapshot().Error())
	}
	first, err := l.logs.FirstIndex()
	require.NoError(t, err)
	require.Greater(t, first, released, "the release entry was compacted: only the snapshot has it")

	back := c.restart(down)
	require.Eventually(t, func() bool { return back.fsm.restored() > 0 }, 10*time.Second, 5*time.Millisecond)
	c.addID("n4")
	n4 := c.start("n4", false)
	require.NoError(t, l.AddMember("n4", "n4", ""))
	require.Eventually(t, func() bool { return n4.fsm.restored() > 0 }, 10*time.Second, 5*time.Millisecond)
	produceSpread(t, l, "gone", 2, 2, "last")
	c.requireIdentical()
	require.Equal(t, []string{"q0 [4,6) [4:new0 5:last0]", "q1 [4,6) [4:new1 5:last1]"}, c.requireSameView("gone", 2))
	for _, n := range c.live() {
		_, ok := n.Committed("g", "gone", 1)
		require.False(t, ok, "node %s", n.ID())
	}
}

// The host's record of a delete (DeleteTopic's, ForgetGroup's record) is
// stored in the same entry, before the drop: both or neither. A record
// that is not the host's (a client topic) is refused before anything is
// proposed, and a record the store refuses refuses the drop with it.
func TestTheDeleteRecordAndTheDropAreOneEntry(t *testing.T) {
	c := newCluster(t, 3, steadyConfig)
	l := c.leader()
	produceSpread(t, l, "gone", 1, 2, "old")
	require.NoError(t, l.ResetOffset("g", "gone", 0, 1))
	require.NoError(t, l.ResetOffset("h", "kept", 0, 0))
	out, err := l.DeleteTopic("gone", msg("RMQ_SYS_REC", 0, "delete gone"))
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, int64(0), out[0].QueueOffset, "the record as stored")
	out, err = l.ForgetGroup("h", msg("RMQ_SYS_REC", 0, "forget h"))
	require.NoError(t, err)
	require.Equal(t, int64(1), out[0].QueueOffset)
	c.requireIdentical()
	for _, n := range c.live() {
		require.Equal(t, []string{"q0 [2,2) []"}, view(t, n, "gone", 1), "node %s", n.ID())
		require.Equal(t, []string{"q0 [0,2) [0:delete gone 1:forget h]"}, view(t, n, "RMQ_SYS_REC", 1), "node %s", n.ID())
		_, ok := n.Committed("h", "kept", 0)
		require.False(t, ok, "node %s", n.ID())
	}

	_, err = l.DeleteTopic("kept", msg("kept", 0, "not the host's"))
	require.ErrorIs(t, err, ErrInvalid)
	_, err = l.ForgetGroup("g", nil)
	require.ErrorIs(t, err, ErrInvalid)

	f := newTestFSM(t)
	at := time.Unix(1_700_000_000, 0)
	require.NoError(t, applyEntry(f, 1, &entry{Kind: kindProduce, At: at, Msgs: []*store.Message{msg("a", 0, "x")}}).err)
	res := applyEntry(f, 2, &entry{Kind: kindRelease, At: at, Text: "a", Msgs: []*store.Message{{Body: []byte("no topic")}}})
	require.ErrorIs(t, res.err, ErrRejected, "a record without a topic is refused by the store's rule")
	require.Equal(t, int64(0), f.st.MinOffset("a", 0), "and nothing released")
	require.Empty(t, f.released)
}
