package offset

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openT(t *testing.T, opts Options) *Manager {
	t.Helper()
	m, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func TestZeroOptionsIsAWorkingInMemoryManager(t *testing.T) {
	m := openT(t, Options{})
	_, ok := m.Committed("g", "t", 0)
	assert.False(t, ok)
	require.NoError(t, m.Commit("g", "t", 0, 42))
	off, ok := m.Committed("g", "t", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(42), off)
	assert.Equal(t, uint64(0), m.Epoch("g", "t", 0))
	require.NoError(t, m.Flush())
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
}

func TestFencedCommitFromBeforeResetCannotOverwriteTheReset(t *testing.T) {
	m := openT(t, Options{})
	require.NoError(t, m.CommitFenced("g", "t", 1, 100, 0))
	e, err := m.Reset("g", "t", 1, 10)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), e)
	assert.Equal(t, e, m.Epoch("g", "t", 1))

	err = m.CommitFenced("g", "t", 1, 150, 0) // the consumer that has not seen the reset
	require.ErrorIs(t, err, ErrStaleEpoch)
	off, _ := m.Committed("g", "t", 1)
	assert.Equal(t, int64(10), off, "a stale commit changes nothing")

	require.ErrorIs(t, m.CommitFenced("g", "t", 1, 11, e+1), ErrStaleEpoch, "a future epoch is not current either")
	require.NoError(t, m.CommitFenced("g", "t", 1, 11, e))
	off, _ = m.Committed("g", "t", 1)
	assert.Equal(t, int64(11), off)
	assert.Equal(t, uint64(2), m.Stats().StaleEpochRejected)

	require.ErrorIs(t, m.CommitFenced("g", "t", 9, 1, 3), ErrStaleEpoch, "an unknown key is at epoch 0")
	_, ok := m.Committed("g", "t", 9)
	assert.False(t, ok, "a refused commit creates nothing")
}

func TestResetEpochSurvivesCrashWithoutFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	m, err := Open(Options{Path: path, FlushEvery: time.Hour})
	require.NoError(t, err)
	require.NoError(t, m.Commit("g", "t", 0, 5))
	e1, err := m.Reset("g", "t", 0, 3)
	require.NoError(t, err)
	require.NoError(t, m.Commit("g", "t", 0, 9)) // not flushed: lost by the crash
	crash(m)

	m2 := openT(t, Options{Path: path, FlushEvery: time.Hour})
	assert.Equal(t, e1, m2.Epoch("g", "t", 0), "a reset is written before Reset returns")
	off, _ := m2.Committed("g", "t", 0)
	assert.Equal(t, int64(3), off)
	e2, err := m2.Reset("g", "t", 0, 4)
	require.NoError(t, err)
	assert.Greater(t, e2, e1)
}

func TestEpochOfKeyRecreatedAfterRemoveNeverRepeatsAnOldEpoch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	m, err := Open(Options{Path: path})
	require.NoError(t, err)
	var last uint64
	for i := range 3 {
		last, err = m.Reset("g", "t", 0, int64(i))
		require.NoError(t, err)
	}
	m.Remove("g")
	_, ok := m.Committed("g", "t", 0)
	require.False(t, ok)
	assert.Empty(t, m.Groups())
	// An old consumer still holding epoch `last` must not commit into the new life of the key.
	require.ErrorIs(t, m.CommitFenced("g", "t", 0, 7, last), ErrStaleEpoch)
	require.NoError(t, m.Close())

	m2 := openT(t, Options{Path: path})
	e, err := m2.Reset("g", "t", 0, 0)
	require.NoError(t, err)
	assert.Greater(t, e, last, "the removed epoch floor is persisted")
}

func TestBackwardCommitIsAcceptedAndLogged(t *testing.T) {
	log, buf := newTestLogger()
	m := openT(t, Options{Logger: log})
	require.NoError(t, m.Commit("g", "t", 2, 100))
	require.NoError(t, m.Commit("g", "t", 2, 90))
	off, _ := m.Committed("g", "t", 2)
	assert.Equal(t, int64(90), off)
	assert.Equal(t, uint64(1), m.Stats().BackwardCommits)
	assert.Contains(t, buf.String(), "backwards")
	assert.Contains(t, buf.String(), "old_offset=100")
}

func TestInvalidInputIsRejectedAndChangesNothing(t *testing.T) {
	log, buf := newTestLogger()
	m := openT(t, Options{Logger: log})
	require.NoError(t, m.Commit("g", "t", 0, 5))
	bad := []struct {
		group, topic string
		q            int
		off          int64
	}{{"", "t", 0, 1}, {"g", "", 0, 1}, {"g", "t", -1, 1}, {"g", "t", 0, -1}}
	for _, b := range bad {
		require.ErrorIs(t, m.Commit(b.group, b.topic, b.q, b.off), ErrInvalid)
		require.ErrorIs(t, m.CommitFenced(b.group, b.topic, b.q, b.off, 0), ErrInvalid)
		_, err := m.Reset(b.group, b.topic, b.q, b.off)
		require.ErrorIs(t, err, ErrInvalid)
	}
	_, err := m.ResetToTime("g", "t", 0, time.Now(), nil)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = m.ResetToTime("g", "t", 0, time.Now(), fixedIndex(-1))
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, m.Clone("g", "g"), ErrInvalid)
	require.ErrorIs(t, m.Clone("", "x"), ErrInvalid)
	m.Remove("")
	m.RemoveTopic("g", "")

	off, _ := m.Committed("g", "t", 0)
	assert.Equal(t, int64(5), off)
	assert.Equal(t, uint64(0), m.Epoch("g", "t", 0))
	assert.Equal(t, uint64(1), m.Stats().Keys)
	assert.Contains(t, buf.String(), "rejected invalid request")
	assert.Equal(t, int64(0), m.Lag("", "t", 0, 10))
}

type fixedIndex int64

func (f fixedIndex) OffsetAt(string, int, time.Time) int64 { return int64(f) }

// timeIndex answers like a store whose message i was stored at base+i seconds.
type timeIndex struct{ base time.Time }

func (x timeIndex) OffsetAt(_ string, _ int, t time.Time) int64 {
	if t.Before(x.base) {
		return 0
	}
	return int64(t.Sub(x.base) / time.Second)
}

func TestResetToTimeResetsToTheIndexedOffset(t *testing.T) {
	m := openT(t, Options{})
	require.NoError(t, m.Commit("g", "t", 0, 500))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e, err := m.ResetToTime("g", "t", 0, base.Add(42*time.Second), timeIndex{base})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), e)
	off, _ := m.Committed("g", "t", 0)
	assert.Equal(t, int64(42), off)
}

func TestCloneIsAResetOfEveryDestinationKey(t *testing.T) {
	m := openT(t, Options{})
	require.NoError(t, m.Commit("src", "a", 0, 10))
	require.NoError(t, m.Commit("src", "a", 1, 11))
	require.NoError(t, m.Commit("src", "b", 0, 12))
	require.NoError(t, m.Commit("dst", "a", 0, 99))
	require.NoError(t, m.Commit("dst", "z", 0, 7))
	require.NoError(t, m.Clone("src", "dst"))

	for _, c := range []struct {
		topic string
		q     int
		off   int64
	}{{"a", 0, 10}, {"a", 1, 11}, {"b", 0, 12}, {"z", 0, 7}} {
		off, ok := m.Committed("dst", c.topic, c.q)
		require.True(t, ok)
		assert.Equal(t, c.off, off, "%s/%d", c.topic, c.q)
	}
	require.ErrorIs(t, m.CommitFenced("dst", "a", 0, 100, 0), ErrStaleEpoch, "dst's consumer has not seen the clone")
	assert.Equal(t, uint64(0), m.Epoch("src", "a", 0), "the source is untouched")
	assert.Equal(t, []string{"a", "b", "z"}, m.Topics("dst"))
	assert.Equal(t, []string{"dst", "src"}, m.Groups())
}

func TestRemoveTopicRemovesOnlyThatTopicOfThatGroup(t *testing.T) {
	m := openT(t, Options{})
	for _, g := range []string{"g1", "g2"} {
		for _, tp := range []string{"a", "b"} {
			require.NoError(t, m.Commit(g, tp, 0, 1))
			require.NoError(t, m.Commit(g, tp, 1, 1))
		}
	}
	m.RemoveTopic("g1", "a")
	assert.Equal(t, []string{"b"}, m.Topics("g1"))
	assert.Equal(t, []string{"a", "b"}, m.Topics("g2"))
	assert.Equal(t, uint64(2), m.Stats().Removes)
}

func TestLagIsNeverNegative(t *testing.T) {
	m := openT(t, Options{})
	assert.Equal(t, int64(10), m.Lag("g", "t", 0, 10), "no commit counts as 0")
	require.NoError(t, m.Commit("g", "t", 0, 4))
	assert.Equal(t, int64(6), m.Lag("g", "t", 0, 10))
	assert.Equal(t, int64(0), m.Lag("g", "t", 0, 3))
}

func TestFlushEveryCommitMakesEachCommitSurviveACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	m, err := Open(Options{Path: path, FlushEvery: FlushEveryCommit})
	require.NoError(t, err)
	require.NoError(t, m.Commit("g", "t", 0, 7))
	require.NoError(t, m.CommitFenced("g", "t", 0, 8, 0))
	crash(m)
	m2 := openT(t, Options{Path: path})
	off, _ := m2.Committed("g", "t", 0)
	assert.Equal(t, int64(8), off)
}

func TestDefaultFlushLeavesUnflushedCommitsToTheNextWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	m, err := Open(Options{Path: path}) // FlushEvery 0 = DefaultFlushEvery, not every commit
	require.NoError(t, err)
	require.NoError(t, m.Commit("g", "t", 0, 7))
	require.NoError(t, m.Flush())
	require.NoError(t, m.Commit("g", "t", 0, 8))
	crash(m)
	m2 := openT(t, Options{Path: path})
	off, _ := m2.Committed("g", "t", 0)
	assert.Equal(t, int64(7), off, "only what a write covered survives a crash")
}

func TestCloseWritesTheFileAndRefusesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m, err := Open(Options{Path: path, Now: func() time.Time { return now }})
	require.NoError(t, err)
	require.NoError(t, m.Commit("g", "t", 0, 7))
	require.NoError(t, m.Close())
	assert.Equal(t, now, m.Stats().LastFlush.UTC())
	require.ErrorIs(t, m.Commit("g", "t", 0, 8), ErrClosed)
	require.ErrorIs(t, m.CommitFenced("g", "t", 0, 8, 0), ErrClosed)
	_, err = m.Reset("g", "t", 0, 8)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, m.Flush(), ErrClosed)
	off, _ := m.Committed("g", "t", 0)
	assert.Equal(t, int64(7), off, "reads still answer after Close")

	m2 := openT(t, Options{Path: path})
	off, _ = m2.Committed("g", "t", 0)
	assert.Equal(t, int64(7), off)
}

func TestResetThatCannotBeWrittenFailsAndChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	require.NoError(t, os.Mkdir(dir, 0o755))
	m, err := Open(Options{Path: filepath.Join(dir, "offsets")})
	require.NoError(t, err)
	require.NoError(t, m.Commit("g", "t", 0, 7))
	require.NoError(t, os.RemoveAll(dir)) // every write now fails
	_, err = m.Reset("g", "t", 0, 1)
	require.Error(t, err)
	assert.Equal(t, uint64(0), m.Epoch("g", "t", 0))
	off, _ := m.Committed("g", "t", 0)
	assert.Equal(t, int64(7), off)
	assert.Equal(t, uint64(1), m.Stats().FlushErrors)
	require.Error(t, m.Close(), "the final write fails too, and says so")
}

func TestConcurrentCommitsAndResetsKeepEpochsIncreasing(t *testing.T) {
	m := openT(t, Options{Path: filepath.Join(t.TempDir(), "offsets"), FlushEvery: time.Millisecond})
	var wg sync.WaitGroup
	epochs := make([][]uint64, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				e, err := m.Reset("g", "t", 0, int64(i))
				if assert.NoError(t, err) {
					epochs[w] = append(epochs[w], e)
				}
				_ = m.CommitFenced("g", "t", 0, int64(i+1), e)
				assert.NoError(t, m.Commit("g", "t", 1+w, int64(i)))
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, es := range epochs {
		for i, e := range es {
			assert.False(t, seen[e], "epoch %d handed out twice", e)
			seen[e] = true
			if i > 0 {
				assert.Greater(t, e, es[i-1])
			}
		}
	}
	assert.Equal(t, uint64(200), m.Epoch("g", "t", 0))
}

func TestBackgroundFlushWritesDirtyStateAndCloseStopsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "offsets") // Open creates the directory
	m, err := Open(Options{Path: path, FlushEvery: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, m.Commit("g", "t", 0, 7))
	require.Eventually(t, func() bool { return m.Stats().Flushes > 0 }, 10*time.Second, time.Millisecond)
	crash(m) // no final write: what is on disk came from the background flush
	m2 := openT(t, Options{Path: path})
	off, _ := m2.Committed("g", "t", 0)
	assert.Equal(t, int64(7), off)
	// goleak (TestMain) proves the loop of m is gone.
}

func TestStatsCountCommitsAcrossRemove(t *testing.T) {
	m := openT(t, Options{})
	require.NoError(t, m.Commit("g", "t", 0, 1))
	require.NoError(t, m.CommitFenced("g", "t", 0, 2, 0))
	require.NoError(t, m.CommitFenced("h", "t", 0, 2, 0))
	m.Remove("g")
	require.NoError(t, m.Commit("g", "t", 0, 1))
	s := m.Stats()
	assert.Equal(t, uint64(4), s.Commits)
	assert.Equal(t, uint64(2), s.FencedCommits)
	assert.Equal(t, uint64(2), s.Keys)
	assert.Equal(t, uint64(1), s.Removes)
}

func TestResetIsNeverSeenAsNewEpochWithOldOffset(t *testing.T) {
	m := openT(t, Options{})
	require.NoError(t, m.Commit("g", "t", 0, 1_000_000))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := range 2000 {
			_, err := m.Reset("g", "t", 0, int64(i))
			assert.NoError(t, err)
		}
	})
	for {
		select {
		case <-done:
			wg.Wait()
			return
		default:
		}
		e := m.Epoch("g", "t", 0) // Epoch before Committed, as Position documents
		off, _ := m.Committed("g", "t", 0)
		if e > 0 {
			require.Less(t, off, int64(2000), "epoch %d seen with the pre-reset offset", e)
		}
		off2, e2, ok := m.Position("g", "t", 0)
		require.True(t, ok)
		if e2 > 0 {
			require.Equal(t, int64(e2-1), off2, "Position is one consistent pair")
		}
	}
}

// popOffsets is pop.Offsets, copied (offset may not import pop): the Manager
// must satisfy it exactly.
type popOffsets interface {
	Committed(group, topic string, queueID int) (int64, bool)
	Epoch(group, topic string, queueID int) uint64
	CommitFenced(group, topic string, queueID int, offset int64, epoch uint64) error
}

var (
	_ popOffsets      = (*Manager)(nil)
	_ FencedCommitter = (*Manager)(nil)
)

func TestResetAfterRemovesRacingWithCommitsStartsAboveEveryRemovedEpoch(t *testing.T) {
	m := openT(t, Options{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				q := int(i % 4)
				assert.NoError(t, m.Commit("g", "t", q, i))
				if err := m.CommitFenced("g", "t", q, i, m.Epoch("g", "t", q)); err != nil {
					assert.ErrorIs(t, err, ErrStaleEpoch) // a reset or remove in between
				}
				if w == 0 && i%16 == 0 {
					_, err := m.Reset("g", "t", q, 0)
					assert.NoError(t, err)
				}
			}
		})
	}
	var highest uint64
	for range 200 {
		for q := range 4 {
			highest = max(highest, m.Epoch("g", "t", q))
		}
		m.Remove("g")
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	for q := range 4 {
		highest = max(highest, m.Epoch("g", "t", q))
	}
	m.Remove("g") // every epoch seen is now a removed one
	assert.Positive(t, m.Stats().Removes)
	e, err := m.Reset("g", "t", 0, 0)
	require.NoError(t, err)
	assert.Greater(t, e, highest, "a reset after removals starts above every epoch seen")
}
