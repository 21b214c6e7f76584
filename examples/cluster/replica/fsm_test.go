package replica

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

// The messages an entry decodes to are answered to producers, while raft
// keeps the entry's bytes (its log cache, a lagging follower's next
// AppendEntries): they share nothing with those bytes, and a producer
// growing one body cannot write into another's.
func TestDecodedMessagesShareNothingWithTheEntry(t *testing.T) {
	e := &entry{Kind: kindProduce, At: time.Unix(1_700_000_000, 0), Msgs: []*store.Message{
		msg("t", 0, "one"), msg("t", 1, "two"), msg("u", 0, ""), msg("t", 2, "three"),
	}}
	b := encodeEntry(e)
	got, err := decodeEntry(b)
	require.NoError(t, err)
	for i := range b {
		b[i] = 0
	}
	require.Equal(t, "one", string(got.Msgs[0].Body))
	require.Equal(t, "three", string(got.Msgs[3].Body))
	require.Equal(t, []string{"t", "t", "u", "t"}, []string{got.Msgs[0].Topic, got.Msgs[1].Topic, got.Msgs[2].Topic, got.Msgs[3].Topic})
	require.NotNil(t, got.Msgs[2].Body, "an empty body stays empty, not nil")
	got.Msgs[0].Body = append(got.Msgs[0].Body, "!!!"...)
	require.Equal(t, "two", string(got.Msgs[1].Body))
	require.Equal(t, "one!!!", string(got.Msgs[0].Body))
}

// A count no entry of that length can hold is refused before anything is
// allocated for it.
func TestDecodeRefusesAMessageCountTheBytesCannotHold(t *testing.T) {
	b := encodeEntry(&entry{Kind: kindProduce, At: time.Unix(1, 0), Msgs: []*store.Message{msg("t", 0, "x")}})
	// kind, at, progress, prev, split count, message count: the count is
	// the byte before the first message's topic length.
	e := &entry{Kind: kindProduce, At: time.Unix(1, 0)}
	head := len(encodeEntry(e)) - 1 // the encoded zero message count
	left := len(b) - head - 1
	bad := append(append([]byte(nil), b[:head]...), byte(left/minMsgBytes+1)) // <= left: the generic count check passes
	bad = append(bad, b[head+1:]...)
	_, err := decodeEntry(bad)
	require.ErrorIs(t, err, errBadEntry)
	require.ErrorContains(t, err, "message count")
}

// BenchmarkFSMApply is the leader's (and every follower's) apply of one
// 64-producer round: an entry of 46 messages of 1 KiB into a store
// (SyncNone), decode included.
func BenchmarkFSMApply(b *testing.B) {
	f := newFSM(nil, slog.New(slog.DiscardHandler))
	st, err := store.Open(b.TempDir(), store.Options{Sync: store.SyncNone, Now: f.now})
	require.NoError(b, err)
	defer st.Close()
	f.st = st
	body := make([]byte, 1024)
	e := &entry{Kind: kindProduce, At: time.Unix(1_700_000_000, 0)}
	for i := range 46 {
		e.Msgs = append(e.Msgs, &store.Message{Topic: "bench", QueueID: i % 8, Body: body})
	}
	data := encodeEntry(e)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeEntry(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("apply", func(b *testing.B) {
		b.ReportAllocs()
		var i uint64
		for b.Loop() {
			i++
			if r := f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: data}).(applyResult); r.err != nil {
				b.Fatal(r.err)
			}
		}
	})
}
