package offset_test

// Black-box acceptance tests of the offset section of ARCHITECTURE.md,
// written from the contract alone, as an outside user of the package would.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/store"
)

// lockedBuf is a slog sink safe for concurrent use.
type lockedBuf = testkit.LogBuffer

func memManager(t *testing.T) *offset.Manager {
	t.Helper()
	m, err := offset.Open(offset.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// fileManager opens a file-backed manager that never flushes in the
// background during the test (only resets, Flush and Close write).
func fileManager(t *testing.T, path string) *offset.Manager {
	t.Helper()
	m, err := offset.Open(offset.Options{Path: path, FlushEvery: time.Hour})
	require.NoError(t, err)
	return m
}

// crashCopy copies the file as it is on disk now into a fresh directory: what
// a restart after a crash (no Flush, no Close) would find.
func crashCopy(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the file must exist on disk")
	dst := filepath.Join(t.TempDir(), "offsets")
	require.NoError(t, os.WriteFile(dst, b, 0o644))
	return dst
}

func TestAcceptZeroOptionsIsAnInMemoryManager(t *testing.T) {
	m := memManager(t)
	_, ok := m.Committed("g", "t", 0)
	assert.False(t, ok)
	require.NoError(t, m.Commit("g", "t", 0, 42))
	off, ok := m.Committed("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(42), off)
	assert.NoError(t, m.Flush())
	assert.NoError(t, m.Close())
}

func TestAcceptCommitAndCommittedPerKey(t *testing.T) {
	m := memManager(t)
	require.NoError(t, m.Commit("g", "t", 0, 10))
	require.NoError(t, m.Commit("g", "t", 1, 20))
	require.NoError(t, m.Commit("g", "u", 0, 30))
	require.NoError(t, m.Commit("h", "t", 0, 40))
	for _, k := range []struct {
		g, t string
		q    int
		want int64
	}{{"g", "t", 0, 10}, {"g", "t", 1, 20}, {"g", "u", 0, 30}, {"h", "t", 0, 40}} {
		off, ok := m.Committed(k.g, k.t, k.q)
		require.True(t, ok)
		assert.Equal(t, k.want, off)
	}
	_, ok := m.Committed("g", "t", 2)
	assert.False(t, ok)
	// A commit backwards without a reset is accepted.
	require.NoError(t, m.Commit("g", "t", 0, 5))
	off, _ := m.Committed("g", "t", 0)
	assert.Equal(t, int64(5), off)
	// Offset 0 is a real commit.
	require.NoError(t, m.Commit("z", "t", 0, 0))
	off, ok = m.Committed("z", "t", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(0), off)
}

func TestAcceptResetBumpsEpochAndSetsOffset(t *testing.T) {
	m := memManager(t)
	e0 := m.Epoch("g", "t", 0)
	require.NoError(t, m.Commit("g", "t", 0, 100))
	e1, err := m.Reset("g", "t", 0, 7)
	require.NoError(t, err)
	assert.Greater(t, e1, e0)
	assert.Equal(t, e1, m.Epoch("g", "t", 0))
	off, ok := m.Committed("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(7), off)

	e2, err := m.Reset("g", "t", 0, 7) // even to the same offset
	require.NoError(t, err)
	assert.Greater(t, e2, e1)
	// Other keys' epochs are untouched.
	assert.Equal(t, uint64(0), m.Epoch("g", "t", 1))
	assert.Equal(t, uint64(0), m.Epoch("h", "t", 0))
	// Reset of a key never committed creates it.
	e, err := m.Reset("new", "t", 3, 9)
	require.NoError(t, err)
	assert.Greater(t, e, uint64(0))
	off, ok = m.Committed("new", "t", 3)
	require.True(t, ok)
	assert.Equal(t, int64(9), off)
}

func TestAcceptCommitFencedWithCurrentEpochCommits(t *testing.T) {
	m := memManager(t)
	require.NoError(t, m.CommitFenced("g", "t", 0, 5, m.Epoch("g", "t", 0)))
	off, ok := m.Committed("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(5), off)
	e, err := m.Reset("g", "t", 0, 1)
	require.NoError(t, err)
	require.NoError(t, m.CommitFenced("g", "t", 0, 3, e))
	off, _ = m.Committed("g", "t", 0)
	assert.Equal(t, int64(3), off)
}

func TestAcceptCommitFencedWithAnyOtherEpochIsStaleAndChangesNothing(t *testing.T) {
	m := memManager(t)
	require.NoError(t, m.Commit("g", "t", 0, 500))
	old := m.Epoch("g", "t", 0)
	e1, err := m.Reset("g", "t", 0, 10)
	require.NoError(t, err)
	e2, err := m.Reset("g", "t", 0, 20)
	require.NoError(t, err)
	for _, ep := range []uint64{old, e1, e2 + 1, e2 + 100, ^uint64(0)} {
		err := m.CommitFenced("g", "t", 0, 999, ep)
		assert.ErrorIs(t, err, offset.ErrStaleEpoch, "epoch %d (current %d)", ep, e2)
		off, ok := m.Committed("g", "t", 0)
		require.True(t, ok)
		assert.Equal(t, int64(20), off, "stale commit changed the offset")
		assert.Equal(t, e2, m.Epoch("g", "t", 0), "stale commit changed the epoch")
	}
	// A never-reset key: a commit carrying an epoch it never had is stale too.
	err = m.CommitFenced("g", "t", 1, 5, 3)
	assert.ErrorIs(t, err, offset.ErrStaleEpoch)
	_, ok := m.Committed("g", "t", 1)
	assert.False(t, ok)
}

func TestAcceptResetIsPersistedAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "offsets.db")
	m := fileManager(t, path)
	defer m.Close()
	require.NoError(t, m.Commit("g", "t", 0, 100))
	require.NoError(t, m.Flush())
	e, err := m.Reset("g", "t", 0, 3)
	require.NoError(t, err)

	// Crash now: no Flush, no Close.
	m2, err := offset.Open(offset.Options{Path: crashCopy(t, path), FlushEvery: time.Hour})
	require.NoError(t, err)
	defer m2.Close()
	assert.Equal(t, e, m2.Epoch("g", "t", 0), "the reset's epoch was not persisted at once")
	off, ok := m2.Committed("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(3), off, "the reset's offset was not persisted at once")
	assert.ErrorIs(t, m2.CommitFenced("g", "t", 0, 100, 0), offset.ErrStaleEpoch,
		"the pre-reset consumer must stay fenced after a restart")
}

func TestAcceptResetToTimeIsPersistedAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	m := fileManager(t, path)
	defer m.Close()
	e, err := m.ResetToTime("g", "t", 2, time.Unix(1000, 0), fixedIndex(77))
	require.NoError(t, err)
	m2, err := offset.Open(offset.Options{Path: crashCopy(t, path), FlushEvery: time.Hour})
	require.NoError(t, err)
	defer m2.Close()
	assert.Equal(t, e, m2.Epoch("g", "t", 2))
	off, _ := m2.Committed("g", "t", 2)
	assert.Equal(t, int64(77), off)
}

func TestAcceptFlushAndClosePersistCommits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "offsets.db")
	m := fileManager(t, path)
	require.NoError(t, m.Commit("g", "t", 0, 11))
	require.NoError(t, m.Flush())
	m2, err := offset.Open(offset.Options{Path: crashCopy(t, path)})
	require.NoError(t, err)
	off, ok := m2.Committed("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(11), off)
	require.NoError(t, m2.Close())

	require.NoError(t, m.Commit("g", "t", 0, 12))
	require.NoError(t, m.Commit("h", "u", 5, 13))
	require.NoError(t, m.Close())
	m3 := fileManager(t, path)
	defer m3.Close()
	off, _ = m3.Committed("g", "t", 0)
	assert.Equal(t, int64(12), off)
	off, _ = m3.Committed("h", "u", 5)
	assert.Equal(t, int64(13), off)
	assert.ElementsMatch(t, []string{"g", "h"}, m3.Groups())

	// The replace is atomic: no temp file is left next to the file.
	_, err = os.Stat(path + ".tmp")
	assert.True(t, os.IsNotExist(err), "temp file left behind: %v", err)
}

func TestAcceptBackgroundFlushEvery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	m, err := offset.Open(offset.Options{Path: path, FlushEvery: 5 * time.Millisecond})
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Commit("g", "t", 0, 21))
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		p := filepath.Join(t.TempDir(), "o")
		if os.WriteFile(p, b, 0o644) != nil {
			return false
		}
		m2, err := offset.Open(offset.Options{Path: p})
		if err != nil {
			return false
		}
		defer m2.Close()
		off, ok := m2.Committed("g", "t", 0)
		return ok && off == 21
	}, 5*time.Second, 5*time.Millisecond)
}

func TestAcceptFlushEveryCommitWritesSynchronously(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	m, err := offset.Open(offset.Options{Path: path, FlushEvery: offset.FlushEveryCommit})
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Commit("g", "t", 0, 31))
	m2, err := offset.Open(offset.Options{Path: crashCopy(t, path)})
	require.NoError(t, err)
	defer m2.Close()
	off, ok := m2.Committed("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(31), off)
}

func TestAcceptEpochsNeverGoBackwardsAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	m := fileManager(t, path)
	e1, err := m.Reset("g", "t", 0, 1)
	require.NoError(t, err)
	e2, err := m.Reset("g", "t", 0, 2)
	require.NoError(t, err)
	require.Greater(t, e2, e1)
	require.NoError(t, m.Close())

	m = fileManager(t, path)
	assert.Equal(t, e2, m.Epoch("g", "t", 0))
	e3, err := m.Reset("g", "t", 0, 3)
	require.NoError(t, err)
	assert.Greater(t, e3, e2)
	// Crash (no Close): the reset is still there.
	m2, err := offset.Open(offset.Options{Path: crashCopy(t, path)})
	require.NoError(t, err)
	assert.Equal(t, e3, m2.Epoch("g", "t", 0))
	e4, err := m2.Reset("g", "t", 0, 4)
	require.NoError(t, err)
	assert.Greater(t, e4, e3)
	require.NoError(t, m2.Close())
	require.NoError(t, m.Close())
}

func TestAcceptEpochsAreNeverReusedAfterRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	m := fileManager(t, path)
	e1, err := m.Reset("g", "t", 0, 1)
	require.NoError(t, err)
	m.Remove("g")
	assert.ErrorIs(t, m.CommitFenced("g", "t", 0, 9, e1), offset.ErrStaleEpoch,
		"a consumer from before the Remove must stay fenced")
	e2, err := m.Reset("g", "t", 0, 1)
	require.NoError(t, err)
	assert.Greater(t, e2, e1, "re-created key reused an epoch")

	m.Remove("g")
	require.NoError(t, m.Close())
	m = fileManager(t, path)
	defer m.Close()
	e3, err := m.Reset("g", "t", 0, 1)
	require.NoError(t, err)
	assert.Greater(t, e3, e2, "re-created key after restart reused an epoch")
}

func TestAcceptLagIsMaxMinusCommittedNeverNegative(t *testing.T) {
	m := memManager(t)
	require.NoError(t, m.Commit("g", "t", 0, 40))
	assert.Equal(t, int64(60), m.Lag("g", "t", 0, 100))
	assert.Equal(t, int64(0), m.Lag("g", "t", 0, 40))
	assert.Equal(t, int64(0), m.Lag("g", "t", 0, 10), "never negative")
	_, err := m.Reset("g", "t", 0, 90)
	require.NoError(t, err)
	assert.Equal(t, int64(10), m.Lag("g", "t", 0, 100))
	assert.GreaterOrEqual(t, m.Lag("g", "t", 1, 5), int64(0))
	assert.GreaterOrEqual(t, m.Lag("g", "t", 1, -5), int64(0))
}

type fixedIndex int64

func (f fixedIndex) OffsetAt(string, int, time.Time) int64 { return int64(f) }

type recIndex struct {
	topic string
	queue int
	at    time.Time
	ret   int64
}

func (r *recIndex) OffsetAt(topic string, queueID int, t time.Time) int64 {
	r.topic, r.queue, r.at = topic, queueID, t
	return r.ret
}

func TestAcceptResetToTimeUsesTheTimeIndex(t *testing.T) {
	m := memManager(t)
	var _ offset.TimeIndex = (*store.Store)(nil)
	require.NoError(t, m.Commit("g", "t", 4, 500))
	before := m.Epoch("g", "t", 4)
	idx := &recIndex{ret: 123}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e, err := m.ResetToTime("g", "t", 4, at, idx)
	require.NoError(t, err)
	assert.Equal(t, "t", idx.topic)
	assert.Equal(t, 4, idx.queue)
	assert.True(t, idx.at.Equal(at))
	assert.Greater(t, e, before)
	assert.Equal(t, e, m.Epoch("g", "t", 4))
	off, _ := m.Committed("g", "t", 4)
	assert.Equal(t, int64(123), off)
	assert.ErrorIs(t, m.CommitFenced("g", "t", 4, 501, before), offset.ErrStaleEpoch)

	_, err = m.ResetToTime("g", "t", 4, at, nil)
	assert.ErrorIs(t, err, offset.ErrInvalid)
	assert.Equal(t, e, m.Epoch("g", "t", 4), "rejected ResetToTime changed the epoch")
}

func TestAcceptGroupsAndRemove(t *testing.T) {
	m := memManager(t)
	assert.Empty(t, m.Groups())
	require.NoError(t, m.Commit("g1", "t", 0, 1))
	require.NoError(t, m.Commit("g1", "u", 1, 1))
	require.NoError(t, m.Commit("g2", "t", 0, 1))
	_, err := m.Reset("g3", "t", 0, 1)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"g1", "g2", "g3"}, m.Groups())

	m.Remove("g1")
	assert.ElementsMatch(t, []string{"g2", "g3"}, m.Groups())
	_, ok := m.Committed("g1", "t", 0)
	assert.False(t, ok)
	_, ok = m.Committed("g1", "u", 1)
	assert.False(t, ok)
	off, ok := m.Committed("g2", "t", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(1), off)
	m.Remove("nope")
	m.Remove("")
	assert.ElementsMatch(t, []string{"g2", "g3"}, m.Groups())
}

func TestAcceptRemoveIsPersisted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	m := fileManager(t, path)
	require.NoError(t, m.Commit("g1", "t", 0, 1))
	require.NoError(t, m.Commit("g2", "t", 0, 1))
	require.NoError(t, m.Flush())
	m.Remove("g1")
	require.NoError(t, m.Close())
	m = fileManager(t, path)
	defer m.Close()
	assert.Equal(t, []string{"g2"}, m.Groups())
}

func writeGoodFile(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "offsets.db")
	m := fileManager(t, path)
	for i := 0; i < 5; i++ {
		require.NoError(t, m.Commit(fmt.Sprintf("group-%d", i), "topic", i, int64(1000+i)))
	}
	_, err := m.Reset("group-0", "topic", 0, 7)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEmpty(t, b)
	return b
}

func openBytes(t *testing.T, b []byte) (*offset.Manager, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "offsets.db")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	m, err := offset.Open(offset.Options{Path: p, FlushEvery: time.Hour})
	if m != nil {
		t.Cleanup(func() { _ = m.Close() })
	}
	return m, err
}

func TestAcceptTornFileIsReportedNeverSilentlyZero(t *testing.T) {
	good := writeGoodFile(t)
	m, err := openBytes(t, good)
	require.NoError(t, err)
	off, ok := m.Committed("group-3", "topic", 3)
	require.True(t, ok)
	require.Equal(t, int64(1003), off)

	for n := 0; n < len(good); n++ {
		m, err := openBytes(t, good[:n])
		assert.Error(t, err, "file cut to %d of %d bytes opened silently", n, len(good))
		assert.True(t, errors.Is(err, offset.ErrCorrupt), "cut to %d: %v", n, err)
		assert.Nil(t, m, "cut to %d", n)
	}
	_, err = openBytes(t, append(append([]byte(nil), good...), 0, 1, 2, 3))
	assert.Error(t, err, "trailing garbage opened silently")
}

func TestAcceptCorruptFileIsReported(t *testing.T) {
	good := writeGoodFile(t)
	for i := 0; i < len(good); i++ {
		bad := append([]byte(nil), good...)
		bad[i] ^= 0x5a
		_, err := openBytes(t, bad)
		assert.Error(t, err, "byte %d flipped: opened silently", i)
		if err != nil {
			assert.True(t, errors.Is(err, offset.ErrCorrupt) || errors.Is(err, offset.ErrVersion), "byte %d: %v", i, err)
		}
	}
	_, err := openBytes(t, []byte("not an offset file at all\n"))
	assert.Error(t, err)
}

func TestAcceptMissingFileStartsEmptyAndStrayTempIsIgnored(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "offsets.db")
	m := fileManager(t, path)
	assert.Empty(t, m.Groups())
	require.NoError(t, m.Commit("g", "t", 0, 5))
	require.NoError(t, m.Close())
	// A crash in the middle of a later write leaves a torn temp file.
	require.NoError(t, os.WriteFile(path+".tmp", []byte("torn"), 0o644))
	m = fileManager(t, path)
	defer m.Close()
	off, ok := m.Committed("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(5), off)
}

func TestAcceptBadInputIsErrInvalidAndChangesNothing(t *testing.T) {
	m := memManager(t)
	require.NoError(t, m.Commit("g", "t", 0, 5))
	e, err := m.Reset("g", "t", 0, 5)
	require.NoError(t, err)
	type key struct {
		g, t string
		q    int
	}
	bad := []struct {
		k   key
		off int64
	}{
		{key{"", "t", 0}, 1}, {key{"g", "", 0}, 1}, {key{"g", "t", -1}, 1}, {key{"g", "t", 0}, -1},
	}
	for _, b := range bad {
		assert.ErrorIs(t, m.Commit(b.k.g, b.k.t, b.k.q, b.off), offset.ErrInvalid, "%+v", b)
		assert.ErrorIs(t, m.CommitFenced(b.k.g, b.k.t, b.k.q, b.off, e), offset.ErrInvalid, "%+v", b)
		_, err := m.Reset(b.k.g, b.k.t, b.k.q, b.off)
		assert.ErrorIs(t, err, offset.ErrInvalid, "%+v", b)
		if b.off >= 0 {
			_, err = m.ResetToTime(b.k.g, b.k.t, b.k.q, time.Now(), fixedIndex(1))
			assert.ErrorIs(t, err, offset.ErrInvalid, "%+v", b)
		}
	}
	off, ok := m.Committed("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(5), off)
	assert.Equal(t, e, m.Epoch("g", "t", 0))
	assert.Equal(t, []string{"g"}, m.Groups())
	_, ok = m.Committed("g", "t", -1)
	assert.False(t, ok)
}

func TestAcceptCloseIsIdempotentAndLaterCallsAreErrClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	m := fileManager(t, path)
	require.NoError(t, m.Commit("g", "t", 0, 5))
	require.NoError(t, m.Close())
	assert.NoError(t, m.Close(), "second Close")
	assert.ErrorIs(t, m.Commit("g", "t", 0, 6), offset.ErrClosed)
	assert.ErrorIs(t, m.CommitFenced("g", "t", 0, 6, 0), offset.ErrClosed)
	_, err := m.Reset("g", "t", 0, 6)
	assert.ErrorIs(t, err, offset.ErrClosed)
	_, err = m.ResetToTime("g", "t", 0, time.Now(), fixedIndex(1))
	assert.ErrorIs(t, err, offset.ErrClosed)
	assert.ErrorIs(t, m.Flush(), offset.ErrClosed)

	mm, err := offset.Open(offset.Options{})
	require.NoError(t, err)
	require.NoError(t, mm.Close())
	require.NoError(t, mm.Close())
	assert.ErrorIs(t, mm.Commit("g", "t", 0, 1), offset.ErrClosed)

	m2 := fileManager(t, path)
	defer m2.Close()
	off, _ := m2.Committed("g", "t", 0)
	assert.Equal(t, int64(5), off, "a call after Close must not reach the file")
}

func TestAcceptConcurrentCommitsAndResetsNeverLetAStaleEpochThrough(t *testing.T) {
	m := memManager(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	resets := map[uint64]int64{}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if w == 0 && i%10 == 0 {
					e, err := m.Reset("g", "t", 0, int64(i))
					assert.NoError(t, err)
					mu.Lock()
					resets[e] = int64(i)
					mu.Unlock()
					continue
				}
				e := m.Epoch("g", "t", 0)
				err := m.CommitFenced("g", "t", 0, int64(1_000_000*w+i), e)
				if err != nil {
					assert.ErrorIs(t, err, offset.ErrStaleEpoch)
				}
			}
		}(w)
	}
	wg.Wait()
	assert.Len(t, resets, 20, "every reset got its own epoch")
}

// --- QueueTable ---

func msgs(from, n int64, bodyLen int) []*store.Message {
	out := make([]*store.Message, 0, n)
	for i := int64(0); i < n; i++ {
		out = append(out, &store.Message{Topic: "t", QueueID: 0, QueueOffset: from + i, Body: make([]byte, bodyLen)})
	}
	return out
}

var q0 = offset.Queue{Topic: "t", QueueID: 0}
var q1 = offset.Queue{Topic: "t", QueueID: 1}

func TestAcceptAssignGivesOneLiveProcessQueue(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{})
	assert.Equal(t, 0, tb.Len())
	_, ok := tb.Get(q0)
	assert.False(t, ok)

	pq := tb.Assign(q0, 10, 3)
	require.NotNil(t, pq)
	assert.Equal(t, q0, pq.Queue())
	assert.Equal(t, uint64(3), pq.Epoch())
	assert.Equal(t, int64(10), pq.NextOffset())
	assert.False(t, pq.Dropped())
	n, b := pq.Buffered()
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(0), b)
	got, ok := tb.Get(q0)
	require.True(t, ok)
	assert.Same(t, pq, got)
	assert.Equal(t, 1, tb.Len())

	pq1 := tb.Assign(q1, 0, 0)
	assert.Equal(t, 2, tb.Len())
	assert.NotSame(t, pq, pq1)
}

func TestAcceptAssignDropsAnyPreviousOne(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{})
	old := tb.Assign(q0, 0, 1)
	require.NoError(t, old.Deliver(msgs(0, 3, 10)))
	nu := tb.Assign(q0, 50, 1)
	assert.True(t, old.Dropped())
	assert.False(t, nu.Dropped())
	n, b := old.Buffered()
	assert.Equal(t, 0, n, "dropping releases buffered messages")
	assert.Equal(t, int64(0), b)
	assert.Empty(t, old.Take(10))
	got, _ := tb.Get(q0)
	assert.Same(t, nu, got)
	assert.Equal(t, 1, tb.Len())
	assert.Equal(t, int64(50), nu.NextOffset())
}

func TestAcceptResetDropsAndReplacesAtomically(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{})
	old := tb.Assign(q0, 0, 1)
	require.NoError(t, old.Deliver(msgs(0, 4, 8)))
	nu := tb.Reset(q0, 100, 2)
	require.NotNil(t, nu)
	assert.True(t, old.Dropped())
	n, b := old.Buffered()
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(0), b)
	assert.False(t, nu.Dropped())
	assert.Equal(t, uint64(2), nu.Epoch())
	assert.Equal(t, int64(100), nu.NextOffset())
	got, ok := tb.Get(q0)
	require.True(t, ok)
	assert.Same(t, nu, got)
	assert.Equal(t, 1, tb.Len())

	// The orphan pull answers late: refused, nothing buffered anywhere.
	err := old.Deliver(msgs(4, 2, 8))
	assert.ErrorIs(t, err, offset.ErrDropped)
	n, _ = old.Buffered()
	assert.Equal(t, 0, n)
	n, _ = nu.Buffered()
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(100), nu.NextOffset())
}

func TestAcceptResetOfUnassignedQueueAssignsIt(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{})
	pq := tb.Reset(q1, 7, 4)
	require.NotNil(t, pq)
	assert.False(t, pq.Dropped())
	assert.Equal(t, 1, tb.Len())
	got, ok := tb.Get(q1)
	require.True(t, ok)
	assert.Same(t, pq, got)
	assert.Equal(t, uint64(4), pq.Epoch())
	assert.Equal(t, int64(7), pq.NextOffset())
}

func TestAcceptLatestCallWinsWithoutComparingEpochs(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{})
	a := tb.Reset(q0, 10, 9)
	b := tb.Reset(q0, 5, 2) // lower epoch: still wins
	assert.True(t, a.Dropped())
	assert.False(t, b.Dropped())
	got, _ := tb.Get(q0)
	assert.Same(t, b, got)
	assert.Equal(t, uint64(2), got.Epoch())
	c := tb.Assign(q0, 1, 1)
	assert.True(t, b.Dropped())
	got, _ = tb.Get(q0)
	assert.Same(t, c, got)
	d := tb.Reset(q0, 1, 1) // same epoch: a new instance still
	assert.True(t, c.Dropped())
	assert.NotSame(t, c, d)
}

func TestAcceptRevokeDropsAndRemoves(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{})
	pq := tb.Assign(q0, 0, 1)
	tb.Assign(q1, 0, 1)
	require.NoError(t, pq.Deliver(msgs(0, 2, 5)))
	assert.True(t, tb.Revoke(q0))
	assert.True(t, pq.Dropped())
	n, b := pq.Buffered()
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(0), b)
	_, ok := tb.Get(q0)
	assert.False(t, ok)
	assert.Equal(t, 1, tb.Len())
	assert.False(t, tb.Revoke(q0), "second revoke")
	assert.False(t, tb.Revoke(offset.Queue{Topic: "x", QueueID: 0}))
	assert.ErrorIs(t, pq.Deliver(msgs(2, 1, 5)), offset.ErrDropped)
	n, _ = pq.Buffered()
	assert.Equal(t, 0, n)
	assert.True(t, pq.Dropped(), "a dropped process queue stays dropped")
}

func TestAcceptDeliverTakeAndNextOffset(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{})
	pq := tb.Assign(q0, 10, 1)
	batch := msgs(10, 3, 7)
	require.NoError(t, pq.Deliver(batch))
	assert.Equal(t, int64(13), pq.NextOffset(), "last delivered QueueOffset + 1")
	n, b := pq.Buffered()
	assert.Equal(t, 3, n)
	assert.Equal(t, int64(21), b)

	// Gaps (e.g. filtered messages) still follow the last QueueOffset.
	require.NoError(t, pq.Deliver([]*store.Message{{Topic: "t", QueueOffset: 20, Body: []byte("x")}}))
	assert.Equal(t, int64(21), pq.NextOffset())

	got := pq.Take(2)
	require.Len(t, got, 2)
	assert.Equal(t, int64(10), got[0].QueueOffset, "oldest first")
	assert.Equal(t, int64(11), got[1].QueueOffset)
	n, b = pq.Buffered()
	assert.Equal(t, 2, n)
	assert.Equal(t, int64(8), b)
	got = pq.Take(100)
	require.Len(t, got, 2)
	assert.Equal(t, int64(12), got[0].QueueOffset)
	assert.Equal(t, int64(20), got[1].QueueOffset)
	assert.Empty(t, pq.Take(5))
	n, b = pq.Buffered()
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(0), b)
	assert.Equal(t, int64(21), pq.NextOffset(), "Take does not move the pull offset")
}

func TestAcceptBackpressureOnMessageCount(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{MaxBuffered: 10})
	pq := tb.Assign(q0, 0, 1)
	require.NoError(t, pq.Deliver(msgs(0, 6, 1)))
	err := pq.Deliver(msgs(6, 5, 1))
	assert.ErrorIs(t, err, offset.ErrBackpressure)
	n, _ := pq.Buffered()
	assert.Equal(t, 6, n, "a refused batch buffers nothing")
	assert.Equal(t, int64(6), pq.NextOffset(), "a refused batch does not move the pull offset")
	require.NoError(t, pq.Deliver(msgs(6, 4, 1)), "exactly MaxBuffered is allowed")
	n, _ = pq.Buffered()
	assert.Equal(t, 10, n)
	assert.ErrorIs(t, pq.Deliver(msgs(10, 1, 1)), offset.ErrBackpressure)
	pq.Take(1)
	require.NoError(t, pq.Deliver(msgs(10, 1, 1)))
	assert.Equal(t, int64(11), pq.NextOffset())
}

func TestAcceptEmptyBufferAlwaysTakesOneBatch(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{MaxBuffered: 4, MaxBufferedBytes: 100})
	pq := tb.Assign(q0, 0, 1)
	require.NoError(t, pq.Deliver(msgs(0, 9, 1)), "oversized by count")
	n, _ := pq.Buffered()
	assert.Equal(t, 9, n)
	assert.ErrorIs(t, pq.Deliver(msgs(9, 1, 1)), offset.ErrBackpressure)
	pq.Take(100)
	require.NoError(t, pq.Deliver(msgs(9, 1, 1000)), "oversized by bytes")
	_, b := pq.Buffered()
	assert.Equal(t, int64(1000), b)
	assert.ErrorIs(t, pq.Deliver(msgs(10, 1, 1)), offset.ErrBackpressure)
}

func TestAcceptBackpressureOnBytes(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{MaxBufferedBytes: 100})
	pq := tb.Assign(q0, 0, 1)
	require.NoError(t, pq.Deliver(msgs(0, 6, 10))) // 60 bytes
	assert.ErrorIs(t, pq.Deliver(msgs(6, 5, 10)), offset.ErrBackpressure)
	n, b := pq.Buffered()
	assert.Equal(t, 6, n)
	assert.Equal(t, int64(60), b)
	require.NoError(t, pq.Deliver(msgs(6, 4, 10)), "exactly MaxBufferedBytes is allowed")
	_, b = pq.Buffered()
	assert.Equal(t, int64(100), b)
	assert.ErrorIs(t, pq.Deliver(msgs(10, 1, 1)), offset.ErrBackpressure)
}

func TestAcceptDefaultLimits(t *testing.T) {
	assert.Equal(t, 1000, offset.DefaultMaxBuffered)
	tb := offset.NewQueueTable(offset.TableOptions{})
	pq := tb.Assign(q0, 0, 1)
	require.NoError(t, pq.Deliver(msgs(0, 600, 1)))
	assert.ErrorIs(t, pq.Deliver(msgs(600, 401, 1)), offset.ErrBackpressure)
	require.NoError(t, pq.Deliver(msgs(600, 400, 1)))
}

func TestAcceptDeliverOnDroppedBuffersNothingAfterBackpressureToo(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{MaxBuffered: 2})
	pq := tb.Assign(q0, 0, 1)
	require.NoError(t, pq.Deliver(msgs(0, 2, 1)))
	tb.Revoke(q0)
	assert.ErrorIs(t, pq.Deliver(msgs(2, 1, 1)), offset.ErrDropped, "dropped wins over backpressure")
	n, b := pq.Buffered()
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(0), b)
}

func TestAcceptConcurrentResetsLeaveExactlyOneLivePullPerQueue(t *testing.T) {
	const maxBuf = 20
	tb := offset.NewQueueTable(offset.TableOptions{MaxBuffered: maxBuf})
	queues := []offset.Queue{q0, q1}
	var mu sync.Mutex
	var all []*offset.ProcessQueue
	for _, q := range queues {
		all = append(all, tb.Assign(q, 0, 0))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// pullers: keep delivering to whatever process queue they got
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			q := queues[p%2]
			for {
				select {
				case <-stop:
					return
				default:
				}
				pq, ok := tb.Get(q)
				if !ok {
					continue
				}
				next := pq.NextOffset()
				err := pq.Deliver(msgs(next, 3, 2))
				if err != nil && !errors.Is(err, offset.ErrDropped) && !errors.Is(err, offset.ErrBackpressure) {
					t.Errorf("unexpected %v", err)
				}
				if p%2 == 0 {
					pq.Take(2)
				}
				if n, _ := pq.Buffered(); n > maxBuf {
					t.Errorf("buffered %d > %d", n, maxBuf)
				}
			}
		}(p)
	}
	var rw sync.WaitGroup
	for r := 0; r < 8; r++ {
		rw.Add(1)
		go func(r int) {
			defer rw.Done()
			for i := 0; i < 50; i++ {
				q := queues[(r+i)%2]
				var pq *offset.ProcessQueue
				if i%7 == 3 {
					tb.Revoke(q)
					pq = tb.Assign(q, int64(i), uint64(i))
				} else {
					pq = tb.Reset(q, int64(i*10), uint64(r*100+i))
				}
				mu.Lock()
				all = append(all, pq)
				mu.Unlock()
			}
		}(r)
	}
	rw.Wait()
	close(stop)
	wg.Wait()

	assert.Equal(t, len(queues), tb.Len())
	live := 0
	for _, pq := range all {
		if !pq.Dropped() {
			live++
			got, ok := tb.Get(pq.Queue())
			require.True(t, ok)
			assert.Same(t, got, pq, "a live process queue is not the table's")
		} else {
			n, b := pq.Buffered()
			assert.Equal(t, 0, n)
			assert.Equal(t, int64(0), b)
			assert.ErrorIs(t, pq.Deliver(msgs(0, 1, 1)), offset.ErrDropped)
		}
	}
	assert.Equal(t, len(queues), live, "exactly one live process queue per assigned queue")
}

func TestAcceptResetThatCannotBePersistedFailsAndChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	path := filepath.Join(dir, "offsets.db")
	m := fileManager(t, path)
	require.NoError(t, m.Commit("g", "t", 0, 5))
	e0, err := m.Reset("g", "t", 0, 5)
	require.NoError(t, err)
	// The directory disappears (disk gone, volume unmounted): the reset
	// cannot be written, so it must not take effect either.
	require.NoError(t, os.RemoveAll(dir))
	_, err = m.Reset("g", "t", 0, 1)
	assert.Error(t, err)
	assert.Equal(t, e0, m.Epoch("g", "t", 0), "an unpersisted reset bumped the epoch")
	off, _ := m.Committed("g", "t", 0)
	assert.Equal(t, int64(5), off, "an unpersisted reset moved the offset")
	assert.NoError(t, m.CommitFenced("g", "t", 0, 6, e0))
	_ = m.Close()
}

func TestAcceptConcurrentCommitsFlushesAndResetsPersistTheFinalState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	m := fileManager(t, path)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				switch {
				case w == 3 && i%20 == 0:
					assert.NoError(t, m.Flush())
				case w == 2 && i%25 == 0:
					_, err := m.Reset("g", "t", w, int64(i))
					assert.NoError(t, err)
				default:
					assert.NoError(t, m.Commit("g", "t", w, int64(i)))
				}
			}
		}(w)
	}
	wg.Wait()
	want := map[int]int64{}
	epochs := map[int]uint64{}
	for q := 0; q < 4; q++ {
		want[q], _ = m.Committed("g", "t", q)
		epochs[q] = m.Epoch("g", "t", q)
	}
	require.NoError(t, m.Close())
	m = fileManager(t, path)
	defer m.Close()
	for q := 0; q < 4; q++ {
		off, _ := m.Committed("g", "t", q)
		assert.Equal(t, want[q], off, "queue %d", q)
		assert.Equal(t, epochs[q], m.Epoch("g", "t", q), "queue %d", q)
	}
}

func TestAcceptEmptyDeliverDoesNotMoveNextOffset(t *testing.T) {
	tb := offset.NewQueueTable(offset.TableOptions{})
	pq := tb.Assign(q0, 10, 1)
	_ = pq.Deliver(nil)
	_ = pq.Deliver([]*store.Message{})
	assert.Equal(t, int64(10), pq.NextOffset())
	n, _ := pq.Buffered()
	assert.Equal(t, 0, n)
	assert.NotPanics(t, func() { _ = pq.Deliver([]*store.Message{nil}) })
	n, _ = pq.Buffered()
	assert.Equal(t, 0, n)
}

func TestAcceptRejectedRequestsResetsAndRecoveryAreLogged(t *testing.T) {
	var lb lockedBuf
	log := slog.New(slog.NewTextHandler(&lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	path := filepath.Join(t.TempDir(), "offsets.db")
	m, err := offset.Open(offset.Options{Path: path, FlushEvery: time.Hour, Logger: log})
	require.NoError(t, err)
	require.Error(t, m.Commit("groupBAD", "topicBAD", -1, 0))
	assert.Contains(t, lb.String(), "groupBAD")
	e, err := m.Reset("groupRST", "topicRST", 3, 9)
	require.NoError(t, err)
	assert.Contains(t, lb.String(), "groupRST")
	require.ErrorIs(t, m.CommitFenced("groupRST", "topicRST", 3, 1, e+1), offset.ErrStaleEpoch)
	before := len(lb.String())
	_ = m.CommitFenced("groupRST", "topicRST", 3, 1, e+1)
	assert.Contains(t, lb.String()[before:], "groupRST", "stale commit not logged with its key")
	require.NoError(t, m.Close())

	var lb2 lockedBuf
	m2, err := offset.Open(offset.Options{Path: path, Logger: slog.New(slog.NewTextHandler(&lb2, nil))})
	require.NoError(t, err)
	require.NoError(t, m2.Close())
	assert.Contains(t, lb2.String(), path, "loading the file is logged")
}
