package offset

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/fence"
	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

// fencedConsumer is what pop does with a Manager: read the epoch, then the
// committed offset, then commit its progress under that epoch.
type fencedConsumer struct {
	m            *Manager
	group, topic string
	queue        int
	epoch        uint64
	next         int64
}

func (c *fencedConsumer) load() {
	c.epoch = c.m.Epoch(c.group, c.topic, c.queue)
	c.next, _ = c.m.Committed(c.group, c.topic, c.queue)
}

func (c *fencedConsumer) ack(n int64) error {
	err := c.m.CommitFenced(c.group, c.topic, c.queue, c.next+n, c.epoch)
	if err == nil {
		c.next += n
	}
	return err
}

// The reproduction: a host commits 8 on a queue that pop serves
// (state built at 0), then pop's next ack commits 2. Before, the 2 silently
// overwrote the 8; now the plain commit fences pop out.
func TestPlainCommitOnAPopServedQueueIsNotOverwrittenBackwards(t *testing.T) {
	for _, name := range []string{"never committed", "committed before"} {
		t.Run(name, func(t *testing.T) {
			m := openT(t, Options{})
			if name == "committed before" {
				require.NoError(t, m.Commit("g", "t", 0, 0))
			}
			pop := &fencedConsumer{m: m, group: "g", topic: "t"}
			pop.load() // first pop of the queue: state at 0

			require.NoError(t, m.Commit("g", "t", 0, 8))
			err := pop.ack(2)
			require.ErrorIs(t, err, ErrStaleEpoch, "the served queue's old progress is refused")
			off, _ := m.Committed("g", "t", 0)
			assert.Equal(t, int64(8), off)

			pop.load() // pop sees the new epoch on its next pop, as after a reset
			assert.Equal(t, int64(8), pop.next)
			require.NoError(t, pop.ack(1))
			off, _ = m.Committed("g", "t", 0)
			assert.Equal(t, int64(9), off)
			assert.Equal(t, uint64(1), m.Stats().FencingCommits)
		})
	}
}

// A plain commit on a key no fenced committer serves stays a plain commit:
// no epoch change, no synchronous write.
func TestPlainCommitWithoutAFencedCommitterKeepsTheEpoch(t *testing.T) {
	m := openT(t, Options{Path: filepath.Join(t.TempDir(), "offsets"), FlushEvery: time.Hour})
	require.NoError(t, m.Commit("g", "t", 0, 3))
	require.NoError(t, m.Commit("g", "t", 0, 8))
	require.NoError(t, m.Commit("g", "t", 0, 2)) // backwards: accepted and logged
	off, epoch, ok := m.Position("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(2), off)
	assert.Zero(t, epoch)
	s := m.Stats()
	assert.Zero(t, s.FencingCommits)
	assert.Zero(t, s.Flushes, "plain commits wait for the background flush")
	assert.Equal(t, uint64(1), s.BackwardCommits)
}

// A fencing commit is a reset: written before Commit returns, so a crash
// right after it keeps the offset and the fence.
func TestFencingCommitIsDurableAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	m, err := Open(Options{Path: path, FlushEvery: time.Hour})
	require.NoError(t, err)
	pop := &fencedConsumer{m: m, group: "g", topic: "t"}
	pop.load()
	require.NoError(t, m.Commit("g", "t", 0, 8))
	crash(m)

	m2 := openT(t, Options{Path: path})
	off, epoch, ok := m2.Position("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(8), off)
	assert.Equal(t, uint64(1), epoch)
	require.ErrorIs(t, m2.CommitFenced("g", "t", 0, 2, pop.epoch), ErrStaleEpoch)
}

// The race the claim protocol closes: a fenced committer that (re)builds
// its state concurrently with a plain commit either reads the plain commit's
// offset or is fenced by it — after the plain Commit returns, the committed
// offset never goes below it again.
func TestPlainCommitRacingAFencedCommitterNeverGoesBackwards(t *testing.T) {
	for round := range 200 {
		m := openT(t, Options{})
		var wg sync.WaitGroup
		done := make(chan struct{})
		wg.Go(func() {
			pop := &fencedConsumer{m: m, group: "g", topic: "t"}
			for {
				select {
				case <-done:
					return
				default:
				}
				pop.load()
				for range 3 {
					if pop.ack(1) != nil {
						break
					}
				}
			}
		})
		const host = 1 << 40
		if round%2 == 0 {
			time.Sleep(time.Duration(round%7) * time.Microsecond)
		}
		require.NoError(t, m.Commit("g", "t", 0, host))
		for range 50 {
			off, _ := m.Committed("g", "t", 0)
			require.GreaterOrEqual(t, off, int64(host), "round %d: a fenced commit went back below a plain commit", round)
		}
		close(done)
		wg.Wait()
		off, _ := m.Committed("g", "t", 0)
		require.GreaterOrEqual(t, off, int64(host))
	}
}

// Remove forgets the claims of the removed keys with them.
func TestRemoveForgetsClaims(t *testing.T) {
	m := openT(t, Options{})
	m.Epoch("g", "t", 0) // claimed while missing
	m.Remove("g")
	require.NoError(t, m.Commit("g", "t", 0, 4))
	assert.Zero(t, m.Stats().FencingCommits)
}

// queueEnds is a Bounds over fixed ends.
type queueEnds map[string]int64

func (q queueEnds) MaxOffset(topic string, _ int) int64 { return q[topic] }

func TestOffsetsBeyondTheQueueEndAreRefusedByCommitAndResetAlike(t *testing.T) {
	m := openT(t, Options{Bounds: queueEnds{"t": 5}})
	require.NoError(t, m.Commit("g", "t", 0, 3))

	errCommit := m.Commit("g", "t", 0, 99)
	_, errReset := m.Reset("g", "t", 0, 99)
	errFenced := m.CommitFenced("g", "t", 0, 99, 0)
	for _, err := range []error{errCommit, errReset, errFenced} {
		require.ErrorIs(t, err, ErrBeyondEnd)
		var end *EndError
		require.ErrorAs(t, err, &end)
		assert.Equal(t, int64(5), end.Max)
		assert.Equal(t, int64(99), end.Offset)
	}
	off, epoch, _ := m.Position("g", "t", 0)
	assert.Equal(t, int64(3), off, "nothing changed")
	assert.Zero(t, epoch)
	assert.Equal(t, uint64(3), m.Stats().BeyondEndRejected)

	require.NoError(t, m.Commit("g", "t", 0, 5), "the end itself means everything consumed")
	_, err := m.Reset("g", "t", 0, 5)
	require.NoError(t, err)
	_, err = m.Reset("g", "other", 0, 1)
	require.ErrorIs(t, err, ErrBeyondEnd, "an empty queue ends at 0")
}

func TestErrStaleEpochIsTheSharedFenceValue(t *testing.T) {
	assert.Same(t, fence.ErrStaleEpoch, ErrStaleEpoch)
}

func TestStatsEncodeWithSnakeCaseKeysAndDurationStrings(t *testing.T) {
	m := openT(t, Options{Path: filepath.Join(t.TempDir(), "offsets")})
	require.NoError(t, m.Commit("g", "t", 0, 1))
	require.NoError(t, m.Flush())
	b, err := json.Marshal(m.Stats())
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, float64(1), got["commits"])
	assert.Equal(t, float64(1), got["keys"])
	d, ok := got["last_flush_duration"].(string)
	require.True(t, ok, "duration as a string: %s", b)
	_, err = time.ParseDuration(d)
	require.NoError(t, err)
	for k := range got {
		assert.Regexp(t, `^[a-z_]+$`, k)
	}
	tb, err := json.Marshal(NewQueueTable(TableOptions{}).Stats())
	require.NoError(t, err)
	assert.Contains(t, string(tb), `"buffered_messages":0`)
}

// Every step of writing the offset file can fail (a full disk): the write
// is refused with the error, the file on disk stays the last good one, and
// the next write after the fault is gone succeeds.
func TestEveryFailedFileWriteLeavesTheLastGoodFile(t *testing.T) {
	hit := 0
	for _, op := range []fsxtest.Op{fsxtest.OpOpen, fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpRename} {
		for n := 1; n <= 2; n++ { // the backup's write, then the file's
			path := filepath.Join(t.TempDir(), "offsets")
			faulty := &fsxtest.Faulty{}
			m, err := Open(Options{Path: path, FlushEvery: time.Hour, fs: faulty})
			require.NoError(t, err)
			require.NoError(t, m.Commit("g", "t", 0, 1))
			require.NoError(t, m.Flush())
			good, err := os.ReadFile(path)
			require.NoError(t, err)

			faulty.Fail(op, n, fsxtest.ENOSPC)
			require.NoError(t, m.Commit("g", "t", 0, 2))
			flushErr := m.Flush()
			_, resetErr := m.Reset("g", "t", 0, 0)
			if flushErr == nil && resetErr == nil {
				faulty.Heal()
				require.NoError(t, m.Close())
				continue // op n is not reached by one write
			}
			hit++
			require.ErrorIs(t, flushErr, fsxtest.ENOSPC, "%v #%d", op, n)
			require.ErrorIs(t, resetErr, fsxtest.ENOSPC)
			now, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, good, now, "%v #%d: the file is the last good one", op, n)
			off, epoch, _ := m.Position("g", "t", 0)
			assert.Equal(t, int64(2), off, "a failed reset changes nothing")
			assert.Zero(t, epoch)

			faulty.Heal()
			require.NoError(t, m.Close())
			m2 := openT(t, Options{Path: path})
			off, _ = m2.Committed("g", "t", 0)
			assert.Equal(t, int64(2), off, "%v #%d: the closing write after the fault succeeded", op, n)
		}
	}
	assert.GreaterOrEqual(t, hit, 7, "every step of both writes was failed once")
}
