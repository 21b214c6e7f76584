package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// newTestFSM is an FSM over a fresh store, driven directly.
func newTestFSM(t *testing.T) *fsm {
	f := newFSM(nil, slog.New(slog.DiscardHandler))
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone, Now: f.now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	f.st = st
	return f
}

func applyEntry(f *fsm, index uint64, e *entry) applyResult {
	r, _ := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: encodeEntry(e)}).(applyResult)
	return r
}

// A scheduler whose delivery timed out (or whose leadership was lost while
// the entry was in flight) retries the same batch; if the first attempt
// committed after all, the retry must deliver nothing. The FSM applies a
// delivery only on top of the progress it started from.
func TestRetriedDeliveryWhoseFirstAttemptCommittedIsRefused(t *testing.T) {
	f := newTestFSM(t)
	at := time.Unix(1_700_000_000, 0)
	d := &entry{Kind: kindDeliver, At: at, Msgs: []*store.Message{msg("real", 0, "x")}, Progress: []byte("p1")}
	require.NoError(t, applyEntry(f, 1, d).err)
	again := *d
	again.Msgs = []*store.Message{msg("real", 0, "x")}
	require.ErrorIs(t, applyEntry(f, 2, &again).err, ErrStaleProgress)
	require.Equal(t, int64(1), f.st.MaxOffset("real", 0), "delivered once")

	next := &entry{Kind: kindDeliver, At: at, Msgs: []*store.Message{msg("real", 0, "y")}, Progress: []byte("p2"), Prev: []byte("p1")}
	require.NoError(t, applyEntry(f, 3, next).err)
	require.Equal(t, []byte("p2"), f.loadProgress())
	require.Equal(t, int64(2), f.st.MaxOffset("real", 0))
}

// After a restart raft replays entries the store already holds: they are
// counted, not appended again.
func TestReplayedEntriesAreNotAppendedTwice(t *testing.T) {
	dir := t.TempDir()
	open := func() *fsm {
		f := newFSM(nil, slog.New(slog.DiscardHandler))
		st, err := store.Open(dir, store.Options{Sync: store.SyncNone, Now: f.now})
		require.NoError(t, err)
		f.st = st
		return f
	}
	at := time.Unix(1_700_000_000, 0)
	entries := []*entry{
		{Kind: kindProduce, At: at, Msgs: []*store.Message{msg("t", 0, "a"), msg("t", 0, "b")}},
		{Kind: kindCommit, At: at, Commits: []commitItem{{Group: "g", Topic: "t", Offset: 1}}},
		{Kind: kindProduce, At: at.Add(time.Second), Msgs: []*store.Message{msg("t", 0, "c")}},
	}
	f := open()
	for i, e := range entries[:2] {
		require.NoError(t, applyEntry(f, uint64(i+1), e).err)
	}
	require.NoError(t, f.st.Close())

	f = open() // raft replays from index 1 (no snapshot)
	defer f.st.Close()
	for i, e := range entries {
		require.NoError(t, applyEntry(f, uint64(i+1), e).err)
	}
	msgs, err := f.st.Read("t", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	require.Equal(t, "c", string(msgs[2].Body))
	require.Equal(t, at.Add(time.Second).UTC(), msgs[2].StoredAt, "the leader's timestamp")
	require.Equal(t, offsetState{offset: 1, committed: true}, f.committed(offsetKey{"g", "t", 0}))
}

// A store that holds more than the log accounts for (another cluster's, or
// damaged) stops the node from applying instead of serving different data.
func TestStoreOutOfStepWithTheLogStopsApplying(t *testing.T) {
	f := newTestFSM(t)
	require.NoError(t, f.st.Append(msg("t", 0, "stray")))
	f.applied = 0
	r := applyEntry(f, 1, &entry{Kind: kindProduce, Msgs: []*store.Message{msg("t", 0, "a"), msg("t", 0, "b")}})
	require.ErrorIs(t, r.err, ErrDiverged)
	require.ErrorIs(t, applyEntry(f, 2, &entry{Kind: kindProduce, Msgs: []*store.Message{msg("t", 0, "c")}}).err, ErrDiverged)
}
