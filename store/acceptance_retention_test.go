package store_test

// Acceptance tests of the store: retention by age and size, in the background,
// racing readers and writers, and offsets that never go back after it.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

// retainedStore builds a store with small segments where queue t/0 has lost
// its oldest messages to MaxAge retention (driven by the injected clock).
func retainedStore(t *testing.T, clk *fakeClock) (*store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := openT(t, dir, store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: -1})
	body := strings.Repeat("o", 500)
	for i := 0; i < 40; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	clk.Advance(2 * time.Hour)
	for i := 0; i < 3; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	n, err := s.Retain()
	require.NoError(t, err)
	require.Greater(t, n, 0, "old whole segments dropped")
	return s, dir
}

func TestAcceptRetainMaxAgeDropsOldWholeSegmentsOnlyOnDemandWithInjectedClock(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	s := openT(t, dir, store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: -1})
	body := strings.Repeat("o", 500)
	for i := 0; i < 40; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	n, err := s.Retain()
	require.NoError(t, err)
	assert.Equal(t, 0, n, "nothing is older than MaxAge yet")
	assert.Equal(t, int64(0), s.MinOffset("t", 0))

	clk.Advance(2 * time.Hour)
	n, err = s.Retain()
	require.NoError(t, err)
	assert.Greater(t, n, 0)
	min, max := s.MinOffset("t", 0), s.MaxOffset("t", 0)
	assert.Greater(t, min, int64(0))
	assert.LessOrEqual(t, min, max)
	assert.Equal(t, int64(40), max, "MaxOffset does not move")
	// Everything from min on is still readable and dense.
	all := readAll(t, s, "t", 0)
	require.Len(t, all, int(max-min))
	for i, m := range all {
		assert.Equal(t, min+int64(i), m.QueueOffset)
	}
	// Whole segments only: a retained prefix is exact; ReadAt below is too small.
	_, err = s.ReadAt(0)
	assert.ErrorIs(t, err, store.ErrOffsetTooSmall)

	// The segment being written is never dropped, however old.
	require.NoError(t, s.Append(msg("t", 0, body)))
	clk.Advance(10 * time.Hour)
	_, err = s.Retain()
	require.NoError(t, err)
	assert.Equal(t, int64(40), s.MinOffset("t", 0), "the newest record lives in the segment being written")
	got, err := s.Read("t", 0, 40, 1)
	require.NoError(t, err)
	assert.Len(t, got, 1)
}

func TestAcceptRetainMaxBytesKeepsTheLogUnderBudget(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{SegmentSize: 4096, MaxBytes: 16 << 10, RetainEvery: -1})
	body := strings.Repeat("b", 500)
	for i := 0; i < 200; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	n, err := s.Retain()
	require.NoError(t, err)
	assert.Greater(t, n, 0)
	min, max := s.MinOffset("t", 0), s.MaxOffset("t", 0)
	assert.Greater(t, min, int64(0))
	assert.Equal(t, int64(200), max)
	assert.Less(t, max-min, int64(200))
	assert.Greater(t, max-min, int64(0), "never the segment being written")
}

func TestAcceptRetainEveryRunsRetentionInTheBackground(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: 5 * time.Millisecond})
	body := strings.Repeat("o", 500)
	for i := 0; i < 40; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	clk.Advance(2 * time.Hour)
	require.NoError(t, s.Append(msg("t", 0, body)))
	require.Eventually(t, func() bool { return s.MinOffset("t", 0) > 0 }, 30*time.Second, 5*time.Millisecond)
}

func TestAcceptOffsetsNeverGoBackForAQueueRetainedToEmptyAcrossReopen(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	opts := store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: -1}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	body := strings.Repeat("e", 500)
	for i := 0; i < 30; i++ {
		require.NoError(t, s.Append(msg("gone", 0, body)))
	}
	// Old filler of another queue, so the segment with gone's tail holds
	// only old records, then fresh records in fresh segments.
	for i := 0; i < 20; i++ {
		require.NoError(t, s.Append(msg("filler", 0, body)))
	}
	clk.Advance(2 * time.Hour)
	for i := 0; i < 30; i++ {
		require.NoError(t, s.Append(msg("live", 0, body)))
	}
	lastLog := int64(79)
	_, err = s.Retain()
	require.NoError(t, err)
	require.Equal(t, int64(30), s.MaxOffset("gone", 0))
	require.Equal(t, int64(30), s.MinOffset("gone", 0), "retained to empty")
	got, err := s.Read("gone", 0, 30, 5)
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = s.Read("gone", 0, 0, 5)
	assert.ErrorIs(t, err, store.ErrOffsetTooSmall)
	require.NoError(t, s.Close())

	s2 := openT(t, dir, opts)
	assert.Equal(t, int64(30), s2.MaxOffset("gone", 0), "MaxOffset after reopen")
	assert.Equal(t, int64(30), s2.MinOffset("gone", 0), "MinOffset after reopen")
	_, err = s2.Read("gone", 0, 0, 5)
	assert.ErrorIs(t, err, store.ErrOffsetTooSmall, "still too small after reopen")
	m := msg("gone", 0, "again")
	require.NoError(t, s2.Append(m))
	assert.Equal(t, int64(30), m.QueueOffset, "queue offset never reused")
	assert.Greater(t, m.LogOffset, lastLog, "log offset never reused")
	got, err = s2.Read("gone", 0, 30, 5)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "again", string(got[0].Body))
}

func TestAcceptOffsetsNeverGoBackWhenRetentionDropsAllButTheWritingSegment(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	opts := store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: -1}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	body := strings.Repeat("e", 500)
	var last *store.Message
	for i := 0; i < 30; i++ {
		last = msg("t", i%2, body)
		require.NoError(t, s.Append(last))
	}
	clk.Advance(48 * time.Hour)
	_, err = s.Retain()
	require.NoError(t, err)
	max0, max1 := s.MaxOffset("t", 0), s.MaxOffset("t", 1)
	require.NoError(t, s.Close())
	clk.Advance(48 * time.Hour)
	s2 := openT(t, dir, opts)
	_, err = s2.Retain()
	require.NoError(t, err)
	assert.Equal(t, max0, s2.MaxOffset("t", 0))
	assert.Equal(t, max1, s2.MaxOffset("t", 1))
	m := msg("t", 0, "n")
	require.NoError(t, s2.Append(m))
	assert.Equal(t, max0, m.QueueOffset)
	assert.Greater(t, m.LogOffset, last.LogOffset)
}

func TestAcceptRetainWithoutLimitsDropsNothing(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now, SegmentSize: 4096})
	for i := 0; i < 40; i++ {
		require.NoError(t, s.Append(msg("t", 0, strings.Repeat("k", 500))))
	}
	clk.Advance(1000 * time.Hour)
	n, err := s.Retain()
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(0), s.MinOffset("t", 0))
	assert.Len(t, readAll(t, s, "t", 0), 40)
}

func TestAcceptRetentionRacingReadersAndWritersNeverReturnsWrongData(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Second, RetainEvery: time.Millisecond})
	// The writer runs until retention removed records several times (and
	// at least 200 appends), not for a stretch of real time: a loaded
	// machine's slow fsyncs would leave too few appends to retain any.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // writer: bodies encode their queue offset
		defer wg.Done()
		defer cancel() // the readers stop with the writer
		for i := 0; ctx.Err() == nil; i++ {
			if i >= 200 && s.Stats().Retained >= 5 {
				return
			}
			if !assert.NoError(t, s.Append(msg("t", 0, fmt.Sprintf("%06d%s", i, strings.Repeat("w", 300))))) {
				return
			}
			clk.Advance(100 * time.Millisecond)
		}
	}()
	for r := 0; r < 2; r++ {
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				min := s.MinOffset("t", 0)
				got, err := s.Read("t", 0, min, 50)
				if err != nil {
					if !assert.ErrorIs(t, err, store.ErrOffsetTooSmall) {
						return
					}
					var oe *store.OffsetError
					if assert.ErrorAs(t, err, &oe) {
						assert.GreaterOrEqual(t, oe.Min, min, "MinOffset only moves up")
					}
					continue
				}
				for i, m := range got {
					assert.Equal(t, min+int64(i), m.QueueOffset)
					assert.Equal(t, fmt.Sprintf("%06d", m.QueueOffset), string(m.Body[:6]), "wrong record for offset")
				}
				if n := s.MaxOffset("t", 0); n > 0 {
					if m, err := s.ReadAt(n - 1); err == nil {
						assert.Equal(t, "t", m.Topic)
					}
				}
			}
		}()
	}
	wg.Wait()
	assert.GreaterOrEqual(t, s.Stats().Retained, uint64(5), "retention ran during the test")
}

func TestAcceptOffsetsNeverGoBackWhenEverySealedSegmentIsRetained(t *testing.T) {
	// Segments so small that nearly every record rolls one: the segment being
	// written is often empty, so retention can drop every record there is.
	clk := newFakeClock()
	dir := t.TempDir()
	opts := store.Options{Now: clk.Now, SegmentSize: 600, MaxAge: time.Minute, RetainEvery: -1}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	var last *store.Message
	for i := 0; i < 10; i++ {
		last = msg("t", 0, strings.Repeat("r", 500))
		require.NoError(t, s.Append(last))
	}
	clk.Advance(time.Hour)
	_, err = s.Retain()
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for round := 0; round < 2; round++ {
		s2, err := store.Open(dir, opts)
		require.NoError(t, err)
		assert.Equal(t, last.QueueOffset+1, s2.MaxOffset("t", 0), "round %d", round)
		_, err = s2.Retain()
		require.NoError(t, err)
		require.NoError(t, s2.Close())
	}
	s3 := openT(t, dir, opts)
	m := msg("t", 0, "n")
	require.NoError(t, s3.Append(m))
	assert.Equal(t, last.QueueOffset+1, m.QueueOffset, "queue offset never reused")
	assert.Greater(t, m.LogOffset, last.LogOffset, "log offset never reused")
	got, err := s3.Read("t", 0, m.QueueOffset, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "n", string(got[0].Body))
}
