package offset

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resetCall is one OnReset call, with what the manager answered inside it.
type resetCall struct {
	group, topic string
	queue        int
	offset       int64
	epoch        uint64
	committed    int64
	seenEpoch    uint64
}

// resetRecorder is an OnReset that records its calls. Inside each it reads
// the key back and flushes: a hook called before the reset is applied would
// see the old offset, and one called under persistMu would deadlock.
type resetRecorder struct {
	mu    sync.Mutex
	m     *Manager
	calls []resetCall
}

func (r *resetRecorder) onReset(group, topic string, queueID int, offset int64, epoch uint64) {
	off, _ := r.m.Committed(group, topic, queueID)
	c := resetCall{group, topic, queueID, offset, epoch, off, r.m.Epoch(group, topic, queueID)}
	_ = r.m.Flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *resetRecorder) take() []resetCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

type fixedTimeIndex int64

func (x fixedTimeIndex) OffsetAt(string, int, time.Time) int64 { return int64(x) }

func TestOnResetHearsOfEveryAppliedResetAndOfNoFailedOne(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	rec := &resetRecorder{}
	m, err := Open(Options{Path: filepath.Join(dir, "offsets.db"), OnReset: rec.onReset})
	require.NoError(t, err)
	rec.m = m
	t.Cleanup(func() { _ = m.Close() })
	applied := func(c resetCall) resetCall {
		c.committed, c.seenEpoch = c.offset, c.epoch
		return c
	}

	e, err := m.Reset("g", "t", 0, 5)
	require.NoError(t, err)
	assert.Equal(t, []resetCall{applied(resetCall{group: "g", topic: "t", queue: 0, offset: 5, epoch: e})}, rec.take(), "Reset")

	e, err = m.ResetToTime("g", "t", 1, time.Now(), fixedTimeIndex(3))
	require.NoError(t, err)
	assert.Equal(t, []resetCall{applied(resetCall{group: "g", topic: "t", queue: 1, offset: 3, epoch: e})}, rec.take(), "ResetToTime")

	require.NoError(t, m.Clone("g", "h"))
	calls := rec.take()
	require.Len(t, calls, 2, "Clone: one call per copied key")
	for _, c := range calls {
		assert.Equal(t, "h", c.group)
		assert.Equal(t, m.Epoch("h", "t", c.queue), c.epoch)
		assert.Equal(t, c, applied(c), "Clone of queue %d", c.queue)
	}
	assert.ElementsMatch(t, []int{0, 1}, []int{calls[0].queue, calls[1].queue})

	// A plain commit on a key a fenced committer serves counts as a reset.
	pop := &fencedConsumer{m: m, group: "g", topic: "u"}
	pop.load()
	require.NoError(t, m.Commit("g", "u", 0, 7))
	calls = rec.take()
	require.Len(t, calls, 1, "fencing commit")
	assert.Equal(t, applied(resetCall{group: "g", topic: "u", queue: 0, offset: 7, epoch: m.Epoch("g", "u", 0)}), calls[0])
	require.NoError(t, m.Commit("g", "v", 0, 6)) // (reading Epoch claims a key: the hook's keys are all fenced)
	assert.Empty(t, rec.take(), "a plain commit nobody fenced is no reset")

	_, err = m.Reset("g", "t", 0, -1)
	require.ErrorIs(t, err, ErrInvalid)
	require.NoError(t, os.RemoveAll(dir)) // the file can no longer be written
	_, err = m.Reset("g", "t", 0, 1)
	require.Error(t, err)
	assert.Empty(t, rec.take(), "failed resets")
}
