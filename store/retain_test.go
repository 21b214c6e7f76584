package store

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fillSegments appends n messages of ~100 bytes to (topic, 0).
func fillSegments(t *testing.T, s *Store, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		require.NoError(t, s.Append(msg(topic, 0, strings.Repeat("b", 100))))
	}
}

func TestRetentionMovesMinOffsetAndOlderReadsAreOffsetTooSmallWithTheMin(t *testing.T) {
	s := openT(t, t.TempDir(), Options{Sync: SyncNone, SegmentSize: 1024, MaxBytes: 2048})
	defer s.Close()
	fillSegments(t, s, "t", 60)
	n, err := s.Retain()
	require.NoError(t, err)
	require.Positive(t, n)
	minOff := s.MinOffset("t", 0)
	require.Positive(t, minOff)
	assert.Equal(t, int64(60), s.MaxOffset("t", 0))

	_, err = s.Read("t", 0, 0, 5)
	require.ErrorIs(t, err, ErrOffsetTooSmall)
	var oe *OffsetError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, minOff, oe.Min)

	got, err := s.Read("t", 0, minOff, 100)
	require.NoError(t, err)
	require.Len(t, got, int(60-minOff))
	assert.Equal(t, minOff, got[0].QueueOffset)
	st := s.Stats()
	assert.LessOrEqual(t, st.Segments, 4)
	_, err = s.ReadAt(0)
	require.ErrorIs(t, err, ErrOffsetTooSmall)
}

func TestQueueRetainedToEmptyKeepsItsOffsetsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	o := Options{Sync: SyncNone, SegmentSize: 1024, MaxBytes: 1500}
	s := openT(t, dir, o)
	fillSegments(t, s, "early", 5)
	fillSegments(t, s, "late", 60)
	_, err := s.Retain()
	require.NoError(t, err)
	require.Equal(t, int64(5), s.MinOffset("early", 0))
	require.Equal(t, int64(5), s.MaxOffset("early", 0))
	require.NoError(t, s.Close())

	s = openT(t, dir, o)
	defer s.Close()
	assert.Equal(t, int64(5), s.MinOffset("early", 0))
	assert.Equal(t, int64(5), s.MaxOffset("early", 0))
	m := msg("early", 0, "again")
	require.NoError(t, s.Append(m))
	assert.Equal(t, int64(5), m.QueueOffset, "offsets must not go backwards for an emptied queue")
	got, err := s.Read("early", 0, 5, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"again"}, bodies(got))
}

func TestRetentionNeverDropsTheSegmentBeingWritten(t *testing.T) {
	s := openT(t, t.TempDir(), Options{Sync: SyncNone, SegmentSize: 1024, MaxBytes: 1})
	defer s.Close()
	fillSegments(t, s, "t", 30)
	_, err := s.Retain()
	require.NoError(t, err)
	assert.Equal(t, 1, s.Stats().Segments)
	got, err := s.Read("t", 0, s.MinOffset("t", 0), 100)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.Equal(t, int64(29), got[len(got)-1].QueueOffset)
}

func TestMaxAgeRetentionReadsTheInjectedClock(t *testing.T) {
	clk := newClock()
	s := openT(t, t.TempDir(), Options{Sync: SyncNone, SegmentSize: 1024, MaxAge: time.Hour, Now: clk.Now})
	defer s.Close()
	fillSegments(t, s, "t", 30)
	n, err := s.Retain()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing is an hour old yet")
	clk.Advance(2 * time.Hour)
	fillSegments(t, s, "t", 1)
	n, err = s.Retain()
	require.NoError(t, err)
	assert.Positive(t, n)
	// Every old segment went; the old messages left share the segment being
	// written with the new one.
	assert.Positive(t, s.MinOffset("t", 0))
	assert.Equal(t, 1, s.Stats().Segments)
}

func TestRetentionRacingAppendsAndReadsNeverReturnsCorruptData(t *testing.T) {
	s := openT(t, t.TempDir(), Options{SegmentSize: 2048, MaxBytes: 6000, Sync: SyncNone})
	defer s.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 150; i++ {
				assert.NoError(t, s.Append(msg("t", w, strings.Repeat("v", 50))))
			}
		}()
	}
	var rg sync.WaitGroup
	rg.Add(2)
	go func() { // reader: below the minimum is refused, above it is intact
		defer rg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for q := 0; q < 3; q++ {
				minOff := s.MinOffset("t", q)
				got, err := s.Read("t", q, minOff, 50)
				if err != nil {
					assert.ErrorIs(t, err, ErrOffsetTooSmall, "retention raced the read; nothing else may fail")
					continue
				}
				for i, m := range got {
					assert.Equal(t, minOff+int64(i), m.QueueOffset)
				}
				s.OffsetAt("t", q, time.Now())
			}
		}
	}()
	go func() {
		defer rg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := s.Retain()
			assert.NoError(t, err)
		}
	}()
	wg.Wait()
	close(stop)
	rg.Wait()
	for q := 0; q < 3; q++ {
		assert.Equal(t, int64(150), s.MaxOffset("t", q))
	}
	assert.Positive(t, s.Stats().Retained)
}

func TestRetentionFreesIndexSpaceButKeepsOffsets(t *testing.T) {
	dir := t.TempDir()
	o := Options{Sync: SyncNone, SegmentSize: 64 << 10, MaxBytes: 128 << 10}
	s := openT(t, dir, o)
	defer s.Close()
	small := make([]*Message, 1000)
	for round := 0; round < 4; round++ {
		for i := range small {
			small[i] = msg("t", 0, "x")
		}
		require.NoError(t, s.Append(small...))
	}
	fillSegments(t, s, "t", 2000) // pushes the small ones out
	require.NoError(t, s.Sync())
	s.mu.Lock()
	q := s.queues["t"][0]
	require.NoError(t, q.idx.flush())
	cq := q.idx.Name()
	s.mu.Unlock()
	before := allocatedBytes(cq)
	_, err := s.Retain()
	require.NoError(t, err)
	if after := allocatedBytes(cq); before > 0 && runtime.GOOS == "linux" {
		assert.Less(t, after, before, "retained index entries keep their disk blocks")
	}
	minOff := s.MinOffset("t", 0)
	require.Greater(t, minOff, int64(4000))
	got, err := s.Read("t", 0, minOff, 10)
	require.NoError(t, err)
	require.Len(t, got, 10)
	assert.Equal(t, minOff, got[0].QueueOffset)
	assert.Equal(t, int64(6000), s.MaxOffset("t", 0))
}

func TestBackgroundRetentionRunsEveryRetainEvery(t *testing.T) {
	s := openT(t, t.TempDir(), Options{Sync: SyncNone, SegmentSize: 1024, MaxBytes: 2048, RetainEvery: 5 * time.Millisecond})
	defer s.Close()
	fillSegments(t, s, "t", 60)
	waitFor(t, func() bool { return s.Stats().Retained > 0 })
	assert.Positive(t, s.MinOffset("t", 0))
}

// A crash inside retention: after it recorded what it removes but before
// wal.TruncateFront ran, and inside TruncateFront (a .START copy left, the
// segments before it already gone). Open finishes the retention either way
// and loses nothing it kept.
func TestOpenFinishesARetentionACrashInterrupted(t *testing.T) {
	build := func(t *testing.T) (string, []*segment) {
		dir := t.TempDir()
		s := openT(t, dir, Options{SegmentSize: 400})
		appendN(t, s, "t", 40)
		require.NoError(t, s.Close())
		segs, err := listSegments(filepath.Join(dir, "log"))
		require.NoError(t, err)
		require.Greater(t, len(segs), 3)
		return dir, segs
	}
	t.Run("recorded, not removed", func(t *testing.T) {
		dir, segs := build(t)
		s := openT(t, dir, Options{SegmentSize: 400})
		s.mu.Lock()
		s.retained = segs[2].start
		s.mu.Unlock()
		require.NoError(t, s.checkpoint())
		crash(t, s)
		s = openT(t, dir, Options{SegmentSize: 400})
		defer s.Close()
		assert.Equal(t, int64(segs[2].start)-1, s.Stats().LogMin)
		assert.Equal(t, int64(segs[2].start)-1, s.MinOffset("t", 0))
		assert.Equal(t, int64(40), s.MaxOffset("t", 0))
	})
	t.Run("inside TruncateFront", func(t *testing.T) {
		dir, segs := build(t)
		s := openT(t, dir, Options{SegmentSize: 400})
		s.mu.Lock()
		s.retained = segs[2].start // what Retain records first
		s.mu.Unlock()
		require.NoError(t, s.checkpoint())
		crash(t, s)
		data, err := os.ReadFile(segs[2].path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(segs[2].path+".START", data, 0o640))
		for _, sg := range segs[:3] {
			require.NoError(t, os.Remove(sg.path))
		}
		s = openT(t, dir, Options{SegmentSize: 400})
		defer s.Close()
		assert.Equal(t, int64(segs[2].start)-1, s.MinOffset("t", 0))
		got, err := s.Read("t", 0, s.MinOffset("t", 0), MaxReadBatch)
		require.NoError(t, err)
		assert.Len(t, got, 40-int(segs[2].start-1))
	})
}

func TestOffsetAtRepairsADamagedIndexEntryOnTheWay(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := openT(t, dir, Options{Now: clk.Now})
	for i := 0; i < 300; i++ {
		require.NoError(t, s.Append(msg("t", 0, "x")))
		clk.Advance(time.Second)
	}
	t0 := clk.Now().Add(-300 * time.Second)
	require.NoError(t, s.Close())
	path := filepath.Join(dir, "index", encodeQueueName("t", 0))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	clear(b[100*entrySize : 200*entrySize])
	require.NoError(t, os.WriteFile(path, b, 0o640))
	s = openT(t, dir, Options{Now: clk.Now})
	defer s.Close()
	assert.Equal(t, int64(150), s.OffsetAt("t", 0, t0.Add(150*time.Second)))
	assert.Positive(t, s.Stats().IndexRepairs)
}
