package schedule

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProgressFileRoundTrips(t *testing.T) {
	for _, p := range []map[int]int64{{}, {1: 0}, {1: 5, 2: 1 << 40, 18: 7}} {
		got, err := decodeProgress(encodeProgress(progress{levels: p, timer: timerState{done: noneDone}}))
		require.NoError(t, err)
		assert.Equal(t, p, got.levels)
	}
}

func TestTornOrCorruptProgressFileIsErrCorruptNeverZero(t *testing.T) {
	good := encodeLevels(map[int]int64{1: 10, 2: 20})
	cases := map[string][]byte{
		"empty":         {},
		"torn":          good[:len(good)-3],
		"flipped bit":   append(append([]byte{}, good[:6]...), append([]byte{good[6] ^ 1}, good[7:]...)...),
		"trailing byte": append(append([]byte{}, good...), 0),
		"bad magic":     append([]byte("XXXX"), good[4:]...),
	}
	for name, b := range cases {
		_, err := decodeProgress(b)
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}

	// The same through New and Start: an error, and Start leaves it stopped.
	path := filepath.Join(t.TempDir(), "progress")
	require.NoError(t, os.WriteFile(path, good[:len(good)-1], 0o644))
	l := newFakeLog(time.Now)
	_, err := New(l, Options{ProgressPath: path})
	require.ErrorIs(t, err, ErrCorrupt)

	require.NoError(t, os.Remove(path))
	s, err := New(l, Options{ProgressPath: path, Tick: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	require.ErrorIs(t, s.Start(), ErrCorrupt)
	assert.False(t, s.Stats().Running)
}

func TestProgressPersistsAfterEachBatchAndARestartDeliversNothingTwice(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "progress")
	s, l, clk := newTestScheduler(t, Options{Levels: "1s 5s", ProgressPath: path})
	keys := produce(t, s, l, "t", 1, 4)
	keys = append(keys, produce(t, s, l, "t", 2, 2)...)
	require.NoError(t, s.Start())
	clk.Advance(time.Second)
	waitUntil(t, "level 1", func() bool { return len(l.delivered("t")) == 4 })
	waitUntil(t, "progress file", func() bool {
		p, err := loadProgress(path)
		return err == nil && p[1] == 4
	})
	// A new Scheduler (a restart) over the same file and log.
	s2, err := New(l, Options{Levels: "1s 5s", ProgressPath: path, Now: clk.Now, Tick: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, s.Stop())
	assert.Equal(t, map[int]int64{1: 4, 2: 0}, s2.Progress())
	require.NoError(t, s2.Start())
	clk.Advance(5 * time.Second)
	waitUntil(t, "level 2", func() bool { return len(l.delivered("t")) >= 6 })
	require.NoError(t, s2.Stop())
	counts := countByKey(l, "t")
	for _, k := range keys {
		assert.Equal(t, 1, counts[k], k)
	}
	p, err := loadProgress(path)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 4, 2: 2}, p)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temp files left behind")
}

func TestLoadedProgressIsClampedIntoTheQueueRangeAndTheLossLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress")
	clk := newClock()
	l := newFakeLog(clk.Now)
	s, err := New(l, Options{Levels: "1s 5s", Now: clk.Now})
	require.NoError(t, err)
	produce(t, s, l, "t", 1, 10)
	produce(t, s, l, "t", 2, 3)
	l.trim(Topic, 0, 6) // retention removed 0..5 of level 1
	require.NoError(t, saveProgress(path, map[int]int64{1: 2, 2: 50, 9: 1}))

	var logs bytes.Buffer
	s, err = New(l, Options{Levels: "1s 5s", Now: clk.Now, ProgressPath: path,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 6, 2: 3}, s.Progress(), "below MinOffset -> MinOffset, above MaxOffset -> MaxOffset")
	st := s.Stats()
	assert.EqualValues(t, 4, st.Skipped, "offsets 2..5 were lost to retention")
	assert.Contains(t, logs.String(), "retention removed undelivered messages")
	assert.Contains(t, logs.String(), "lost=4")
	assert.Contains(t, logs.String(), "progress beyond the end of the log")
	assert.Contains(t, logs.String(), "unknown level")
}

func TestRetentionOvertakingDeliverySkipsToMinOffsetAndCounts(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{Levels: "1s"})
	produce(t, s, l, "t", 1, 5)
	require.NoError(t, s.Start())
	l.trim(Topic, 0, 3)
	clk.Advance(time.Second)
	waitUntil(t, "the rest delivered", func() bool { return len(l.delivered("t")) == 2 })
	require.NoError(t, s.Stop())
	assert.EqualValues(t, 3, s.Stats().Skipped)
	assert.Equal(t, map[int]int64{1: 5}, s.Progress())
}

func TestSaveProgressFailsCleanlyInAMissingDirectory(t *testing.T) {
	err := saveProgress(filepath.Join(t.TempDir(), "nope", "progress"), map[int]int64{1: 1})
	require.Error(t, err)
}

func FuzzDecodeProgress(f *testing.F) {
	f.Add(encodeLevels(map[int]int64{}))
	f.Add(encodeLevels(map[int]int64{1: 1, 2: 300, 18: 1 << 40}))
	f.Add(encodeProgress(progress{levels: map[int]int64{1: 2}, timer: timerState{ingested: 9, done: timerKey{due: 1700000000000, off: 3}, index: 77, cancels: []timerKey{{1700000000001, 5}, {1700000000002, 4}}}}))
	f.Add([]byte("BCSP\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeProgress(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		// Whatever decodes must be valid and re-encode to the same bytes.
		for l, off := range p.levels {
			require.Positive(t, l)
			require.GreaterOrEqual(t, off, int64(0))
		}
		if b[4] == progressVersion {
			require.Equal(t, b, encodeProgress(p))
		}
		again, err := decodeProgress(encodeProgress(p))
		require.NoError(t, err)
		require.Equal(t, p, again)
	})
}

// TestUnsavedProgressHoldsBackTheNextBatch rules out a failed progress write
// widening what a crash repeats: until the file is written again, the level
// delivers nothing beyond the batch whose progress is unsaved.
func TestUnsavedProgressHoldsBackTheNextBatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	require.NoError(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "progress")
	s, l, clk := newTestScheduler(t, Options{Levels: "1s", MaxBatch: 2, ProgressPath: path})
	produce(t, s, l, "t", 1, 6)
	require.NoError(t, os.RemoveAll(dir)) // every write fails now
	require.NoError(t, s.Start())
	clk.Advance(time.Second)
	waitUntil(t, "first batch", func() bool { return s.Stats().Delivered == 2 })
	waitUntil(t, "a failed retry of the write", func() bool { return s.Stats().SaveFailed >= 2 })
	assert.EqualValues(t, 2, s.Stats().Delivered, "no batch after the unsaved one")
	require.NoError(t, os.Mkdir(dir, 0o755))
	waitUntil(t, "the rest", func() bool { return s.Stats().Delivered == 6 })
	require.NoError(t, s.Stop())
	p, err := loadProgress(path)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 6}, p)
}
