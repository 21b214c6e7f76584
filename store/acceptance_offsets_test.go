package store_test

// Acceptance tests of the store: offsets and the time index — StoredAt,
// OffsetAt, Topics/Queues and offsets across reopen.

import (
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

func TestAcceptStoredAtNeverDecreasesEvenWhenTheClockGoesBack(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now})
	a := msg("t", 0, "a")
	require.NoError(t, s.Append(a))
	clk.Advance(-time.Hour) // NTP step backwards
	b := msg("t", 1, "b")
	require.NoError(t, s.Append(b))
	assert.False(t, b.StoredAt.Before(a.StoredAt), "StoredAt went back: %v then %v", a.StoredAt, b.StoredAt)
	got, err := s.ReadAt(b.LogOffset)
	require.NoError(t, err)
	assert.False(t, got.StoredAt.Before(a.StoredAt))
	// OffsetAt stays consistent: nothing of queue 1 is before a's time.
	assert.Equal(t, int64(0), s.OffsetAt("t", 1, a.StoredAt))
}

func TestAcceptOffsetAtIsFirstOffsetStoredAtOrAfterT(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now})
	// Stored at t0, t0, t0+10s, t0+20s, t0+20s, t0+30s (queue offsets 0..5).
	steps := []time.Duration{0, 0, 10 * time.Second, 10 * time.Second, 0, 10 * time.Second}
	for _, d := range steps {
		clk.Advance(d)
		require.NoError(t, s.Append(msg("t", 0, "x")))
		// Noise in another queue must not matter.
		require.NoError(t, s.Append(msg("t", 1, "noise")))
	}
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	cases := []struct {
		at   time.Time
		want int64
	}{
		{t0.Add(-time.Hour), 0},           // before everything: MinOffset
		{time.Time{}, 0},                  // zero time
		{t0, 0},                           // exactly the first: the first of equal ones
		{t0.Add(time.Nanosecond), 2},      // just after t0
		{sec(10), 2},                      // exact
		{sec(15), 3},                      // between
		{sec(20), 3},                      // first of two equal
		{sec(30), 5},                      // exactly the last
		{sec(30).Add(time.Nanosecond), 6}, // after everything: MaxOffset
		{sec(3600), 6},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, s.OffsetAt("t", 0, c.at), "OffsetAt(%v)", c.at.Sub(t0))
	}
	assert.Equal(t, int64(0), s.OffsetAt("never", 0, t0), "never written")
	assert.Equal(t, int64(0), s.OffsetAt("t", 9, t0), "queue never written")
}

func TestAcceptOffsetAtAfterRetentionIsNeverBelowMinOffset(t *testing.T) {
	clk := newFakeClock()
	s, _ := retainedStore(t, clk)
	min := s.MinOffset("t", 0)
	require.Greater(t, min, int64(0))
	assert.Equal(t, min, s.OffsetAt("t", 0, time.Time{}))
	assert.Equal(t, s.MaxOffset("t", 0), s.OffsetAt("t", 0, clk.Now().Add(time.Hour)))
}

func TestAcceptTopicsAndQueuesListWhatWasWritten(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, store.Options{})
	assert.Empty(t, s.Topics())
	require.NoError(t, s.Append(msg("b", 2, "x"), msg("a", 0, "x"), msg("b", 0, "x"), msg("b", 7, "x")))
	topics := s.Topics()
	sort.Strings(topics)
	assert.Equal(t, []string{"a", "b"}, topics)
	qs := s.Queues("b")
	sort.Ints(qs)
	assert.Equal(t, []int{0, 2, 7}, qs)
	assert.Empty(t, s.Queues("zzz"))
	require.NoError(t, s.Sync())
	require.NoError(t, s.Close())
	s2 := openT(t, dir, store.Options{})
	topics = s2.Topics()
	sort.Strings(topics)
	assert.Equal(t, []string{"a", "b"}, topics, "after reopen")
	qs = s2.Queues("b")
	sort.Ints(qs)
	assert.Equal(t, []int{0, 2, 7}, qs, "after reopen")
}

func TestAcceptReopenContinuesOffsetsWhereTheyWere(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Append(msg("t", 0, "a"), msg("t", 1, "b"), msg("t", 0, "c")))
	require.NoError(t, s.Close())
	s2 := openT(t, dir, store.Options{})
	assert.Equal(t, int64(2), s2.MaxOffset("t", 0))
	m := msg("t", 0, "d")
	require.NoError(t, s2.Append(m))
	assert.Equal(t, int64(2), m.QueueOffset)
	assert.Equal(t, int64(3), m.LogOffset)
	assert.Equal(t, int64(0), s2.Stats().Replayed, "a clean reopen re-reads no log records")
}

func TestAcceptStoredAtNeverDecreasesAcrossReopenWithAnEarlierClock(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{Now: clk.Now})
	require.NoError(t, err)
	a := msg("t", 0, "a")
	require.NoError(t, s.Append(a))
	require.NoError(t, s.Close())
	clk.Advance(-24 * time.Hour)
	s2 := openT(t, dir, store.Options{Now: clk.Now})
	b := msg("t", 0, "b")
	require.NoError(t, s2.Append(b))
	assert.False(t, b.StoredAt.Before(a.StoredAt), "StoredAt went back across a reopen: %v then %v", a.StoredAt, b.StoredAt)
	assert.Equal(t, int64(0), s2.OffsetAt("t", 0, a.StoredAt))
}
