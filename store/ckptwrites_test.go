package store

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/fsx"
	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

// A checkpoint costs O(1) writes whatever the number of queues that
// changed: 2,000 queues with one new entry each are persisted by a handful
// of writes (the index journal, the checkpoint file), not one per queue.
func TestCheckpointWritesDoNotGrowWithTheQueuesThatChanged(t *testing.T) {
	f := &fsxtest.Faulty{}
	s := openT(t, t.TempDir(), Options{Sync: SyncNone, fs: f})
	defer s.Close()
	const queues = 2000
	for round := 0; round < 2; round++ {
		for q := 0; q < queues; q++ {
			require.NoError(t, s.Append(msg(fmt.Sprintf("t%d", q%50), q/50, "x")))
		}
		before := f.Calls(fsxtest.OpWrite)
		require.NoError(t, s.checkpoint())
		writes := f.Calls(fsxtest.OpWrite) - before
		assert.LessOrEqual(t, writes, 4, "round %d: %d writes for %d changed queues", round, writes, queues)
	}
}

// The checkpoint lists every queue in (topic, id) order, whatever the order
// they were created in and however many were added since the last one, and
// a reopen trusts what it lists.
func TestCheckpointListsEveryQueueInOrder(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{Sync: SyncNone})
	add := func(topic string, id, n int) {
		for range n {
			require.NoError(t, s.Append(msg(topic, id, "x")))
		}
	}
	add("m", 3, 1)
	add("b", 7, 2)
	add("m", 1, 3)
	require.NoError(t, s.checkpoint())
	add("a", 0, 1) // before every existing queue
	add("m", 2, 2)
	add("b", 7, 1) // an existing queue changes
	require.NoError(t, s.checkpoint())
	add("z", 9, 1)
	require.NoError(t, s.Close()) // Close checkpoints

	ck, err := readCheckpoint(fsx.OS, dir)
	require.NoError(t, err)
	type row struct {
		topic     string
		id        int
		next, min int64
	}
	var got []row
	for _, q := range ck.queues {
		got = append(got, row{q.topic, q.id, q.next, q.min})
	}
	assert.Equal(t, []row{{"a", 0, 1, 0}, {"b", 7, 3, 0}, {"m", 1, 3, 0}, {"m", 2, 2, 0}, {"m", 3, 1, 0}, {"z", 9, 1, 0}}, got)

	s = openT(t, dir, Options{Sync: SyncNone})
	defer s.Close()
	assert.Equal(t, int64(3), s.MaxOffset("b", 7))
	assert.Equal(t, int64(2), s.MaxOffset("m", 2))
	assert.Equal(t, 6, s.Stats().Queues)
}

// A checkpoint's memory does not follow the number of queues: at 10,000
// queues (one of them changed) it allocates a few KiB, not a copy of every
// queue's state (about 100 bytes each).
func TestCheckpointAllocatesLittleAtManyQueues(t *testing.T) {
	s := openT(t, t.TempDir(), Options{Sync: SyncNone})
	defer s.Close()
	const queues = 10000
	batch := make([]*Message, 0, 100)
	for q := range queues {
		batch = append(batch, msg("t", q, "x"))
		if len(batch) == cap(batch) {
			require.NoError(t, s.Append(batch...))
			batch = batch[:0]
		}
	}
	require.NoError(t, s.checkpoint()) // sizes the buffers
	var before, after runtime.MemStats
	const rounds = 5
	runtime.ReadMemStats(&before)
	for i := range rounds {
		require.NoError(t, s.Append(msg("t", i, "y")))
		require.NoError(t, s.checkpoint())
	}
	runtime.ReadMemStats(&after)
	perCkpt := (after.TotalAlloc - before.TotalAlloc) / rounds
	assert.Less(t, perCkpt, uint64(64<<10), "%d bytes allocated per checkpoint at %d queues", perCkpt, queues)
}

// A queue that took more than 64 KiB of index entries between two
// checkpoints keeps that buffer while it is busy (no regrowth per
// checkpoint), and keeps less than 4 KiB once a checkpoint finds it quiet,
// even with no new entry (its buffer does not keep that capacity for good).
func TestCheckpointReleasesAQueuesLargeIndexBuffer(t *testing.T) {
	s := openT(t, t.TempDir(), Options{Sync: SyncNone})
	defer s.Close()
	for i := range maxBuffered/entrySize + 100 {
		require.NoError(t, s.Append(msg("t", 0, strconv.Itoa(i))))
	}
	bufCap := func() int {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return cap(s.queues["t"][0].idx.buf)
	}
	require.NoError(t, s.checkpoint())
	assert.Greater(t, bufCap(), flushBytes, "busy: kept")
	require.NoError(t, s.Append(msg("u", 0, "other queue")))
	require.NoError(t, s.checkpoint())
	assert.LessOrEqual(t, bufCap(), flushBytes, "quiet: released")
	ms, err := s.Read("t", 0, maxBuffered/entrySize-1, 3)
	require.NoError(t, err)
	require.Len(t, ms, 3)
	assert.Equal(t, strconv.Itoa(maxBuffered/entrySize-1), string(ms[0].Body))
}
