package replica

import (
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// An entry the store refuses that is in the log anyway (an older version's
// leader proposed it, or a check missed it) is a replicated, deterministic
// rejection: every node decides the same, keeps applying, and its
// proposer's producer gets ErrRejected. It stays so across a restart of
// every node (raft replays the entry).
func TestEntryTheStoreRefusesIsRejectedOnEveryNodeAndTheClusterGoesOn(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	long := msg(strings.Repeat("A", 300), 0, "x")
	_, err := l.apply(&entry{Kind: kindProduce, Msgs: []*store.Message{long}})
	require.ErrorIs(t, err, ErrRejected)
	require.ErrorIs(t, err, store.ErrInvalid)

	// One entry joining two producers' batches: only the bad one is refused.
	bigKey := msg("t", 0, "bad")
	bigKey.Keys = []string{strings.Repeat("k", 1100*1000)}
	res, err := l.apply(&entry{Kind: kindProduce, Split: []int{1, 1}, Msgs: []*store.Message{bigKey, msg("t", 0, "good0")}})
	require.NoError(t, err)
	require.ErrorIs(t, res.rejected[0], ErrRejected)
	require.NoError(t, res.rejected[1])
	require.Equal(t, int64(0), res.msgs[1].QueueOffset)

	for i := 1; i <= 3; i++ {
		_, err := l.Produce(msg("t", 0, "good"+string(rune('0'+i))))
		require.NoError(t, err)
	}
	check := func() {
		c.requireIdentical()
		for _, n := range c.live() {
			require.NoError(t, n.fsm.err(), "node %s", n.ID())
			require.Equal(t, int64(4), n.Store().Stats().LogNext, "node %s", n.ID())
		}
	}
	check()

	for _, id := range c.ids {
		c.kill(id)
	}
	for _, id := range c.ids {
		c.restart(id)
	}
	l = c.leader()
	_, err = l.Produce(msg("t", 0, "after restart"))
	require.NoError(t, err)
	c.requireIdentical()
	for _, n := range c.live() {
		require.NoError(t, n.fsm.err(), "node %s", n.ID())
		require.Equal(t, int64(5), n.Store().Stats().LogNext, "node %s", n.ID())
	}
}

// The FSM's decision is the store's rule, made before the replay check: a
// refused entry never counts as messages applied, so a replay after a
// restart does not skip good entries as already there.
func TestFSMRejectionIsDecidedBeforeReplay(t *testing.T) {
	f := newTestFSM(t)
	at := time.Unix(1_700_000_000, 0)
	require.ErrorIs(t, applyEntry(f, 1, &entry{Kind: kindProduce, At: at, Msgs: []*store.Message{msg(strings.Repeat("A", 256), 0, "x")}}).err, ErrRejected)
	require.NoError(t, applyEntry(f, 2, &entry{Kind: kindProduce, At: at, Msgs: []*store.Message{msg("t", 0, "x")}}).err)
	require.ErrorIs(t, applyEntry(f, 3, &entry{Kind: kindDeliver, At: at, Progress: []byte("p"),
		Msgs: []*store.Message{msg("t", -1, "x")}}).err, ErrRejected)
	require.Nil(t, f.loadProgress(), "a refused delivery moves no progress")
	require.NoError(t, f.err())
	require.Equal(t, int64(1), f.applied)
}

// The other entries the FSM keeps only in memory and in snapshots are held
// to names the library accepts, so no entry can grow a snapshot's state
// past what a restore reads: a commit or reset naming a group or topic
// outside the rules, or a member record of an over-long id or address, is
// rejected on every node and changes nothing.
func TestFSMRejectsOffsetsAndMembersOutsideTheNameRules(t *testing.T) {
	f := newTestFSM(t)
	at := time.Unix(1_700_000_000, 0)
	long := strings.Repeat("g", 300)
	res := applyEntry(f, 1, &entry{Kind: kindCommit, At: at, Commits: []commitItem{{Group: long, Topic: "t", Offset: 3}, {Group: "g", Topic: "t", Offset: 2}}})
	require.ErrorIs(t, res.err, ErrRejected)
	require.Equal(t, offsetState{offset: 2, committed: true}, f.committed(offsetKey{"g", "t", 0}), "the good commit of the entry applies")
	require.Len(t, f.offsets, 1)
	require.ErrorIs(t, applyEntry(f, 2, &entry{Kind: kindReset, At: at, Commits: []commitItem{{Group: "g", Topic: "bad topic", Offset: 1}}}).err, ErrRejected)
	require.ErrorIs(t, applyEntry(f, 3, &entry{Kind: kindMember, At: at, Text: "n1", Text2: strings.Repeat("h", 1000)}).err, ErrRejected)
	require.Len(t, f.offsets, 1)
	require.Empty(t, f.members)
}

// An entry raft's log could write but not read back (a frame body over the
// format's limit) would stop every node that restarts on it. The leader
// refuses a produce whose entry would be that large (ErrInvalid, nothing
// proposed), and the log refuses such an entry (ErrInvalid, nothing
// written, the log usable).
func TestEntriesTooLargeForTheRaftLogAreRefused(t *testing.T) {
	// Restored by a cleanup registered before the cluster's, so it runs
	// after every node (whose raft goroutines read the limits) has stopped.
	p, f := maxProposeBytes, maxFrameBody
	t.Cleanup(func() { maxProposeBytes, maxFrameBody = p, f })
	maxProposeBytes, maxFrameBody = 64<<10, 64<<10

	c := newCluster(t, 3, nil)
	l := c.leader()
	before := l.Raft().LastIndex()
	var big []*store.Message
	for range 20 {
		big = append(big, msg("t", 0, strings.Repeat("x", 4<<10)))
	}
	_, err := l.Produce(big...)
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, before, l.Raft().LastIndex(), "nothing proposed")
	_, err = l.Produce(big[:10]...)
	require.NoError(t, err)

	s := openTestLog(t, t.TempDir(), logStoreOptions{})
	require.NoError(t, s.StoreLogs(entries(1, 3, 1)))
	huge := testEntry(4, 1)
	huge.Data = make([]byte, maxFrameBody)
	require.ErrorIs(t, s.StoreLogs([]*raft.Log{testEntry(4, 1), huge}), ErrInvalid)
	requireRange(t, s, 1, 3)
	require.NoError(t, s.StoreLogs(entries(4, 5, 1)))
}
