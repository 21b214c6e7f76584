package store_test

// Acceptance tests of the store: Read and ReadAt.

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

func TestAcceptReadAtMaxOffsetReturnsEmptyNonNilSliceAndNoError(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	require.NoError(t, s.Append(msg("t", 0, "a"), msg("t", 0, "b")))
	got, err := s.Read("t", 0, s.MaxOffset("t", 0), 10)
	require.NoError(t, err)
	assert.NotNil(t, got, "an empty slice, not nil")
	assert.Empty(t, got)
}

func TestAcceptReadOfNeverWrittenQueueIsEmptyNotAnError(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	got, err := s.Read("never", 0, 0, 10)
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)
	require.NoError(t, s.Append(msg("t", 0, "a")))
	got, err = s.Read("t", 7, 0, 10) // topic written, queue never
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)
	assert.Equal(t, int64(0), s.MinOffset("never", 0))
	assert.Equal(t, int64(0), s.MaxOffset("never", 0))
	assert.Empty(t, s.Queues("never"))
}

func TestAcceptReadBadArgumentsAreErrInvalid(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	require.NoError(t, s.Append(msg("t", 0, "a")))
	for _, tc := range []struct {
		name  string
		topic string
		q     int
		max   int
	}{
		{"empty topic", "", 0, 1},
		{"negative queue", "t", -1, 1},
		{"max zero", "t", 0, 0},
		{"max negative", "t", 0, -3},
	} {
		got, err := s.Read(tc.topic, tc.q, 0, tc.max)
		assert.ErrorIs(t, err, store.ErrInvalid, tc.name)
		assert.Empty(t, got, tc.name)
	}
}

func TestAcceptReadPagesAndClampsALargeMax(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{Sync: store.SyncNone})
	const n = 3000
	batch := make([]*store.Message, 0, 100)
	for i := 0; i < n; i++ {
		batch = append(batch, msg("t", 0, strconv.Itoa(i)))
		if len(batch) == cap(batch) {
			require.NoError(t, s.Append(batch...))
			batch = batch[:0]
		}
	}
	got, err := s.Read("t", 0, 0, 1<<30)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.LessOrEqual(t, len(got), n)
	got, err = s.Read("t", 0, 10, 3)
	require.NoError(t, err)
	require.Len(t, got, 3, "max is honoured")
	assert.Equal(t, int64(10), got[0].QueueOffset)
	all := readAll(t, s, "t", 0)
	require.Len(t, all, n)
	for i, m := range all {
		assert.Equal(t, strconv.Itoa(i), string(m.Body))
	}
	// Reading past the end of a partial page returns what there is.
	got, err = s.Read("t", 0, n-2, 10)
	require.NoError(t, err)
	assert.Len(t, got, 2)
}

func TestAcceptReadBelowMinOffsetIsErrOffsetTooSmallWithTheMin(t *testing.T) {
	clk := newFakeClock()
	s, dir := retainedStore(t, clk)
	_ = dir
	min := s.MinOffset("t", 0)
	require.Greater(t, min, int64(0), "retention moved MinOffset up")
	_, err := s.Read("t", 0, 0, 10)
	require.Error(t, err)
	assert.ErrorIs(t, err, store.ErrOffsetTooSmall)
	assert.Contains(t, err.Error(), strconv.FormatInt(min, 10), "the error says the min")
	var oe *store.OffsetError
	if assert.ErrorAs(t, err, &oe) {
		assert.Equal(t, min, oe.Min)
	}
	got, err := s.Read("t", 0, min, 10)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.Equal(t, min, got[0].QueueOffset)
}

func TestAcceptReadOfNegativeOffsetIsAnErrorNotAPanic(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	require.NoError(t, s.Append(msg("t", 0, "a")))
	got, err := s.Read("t", 0, -1, 1)
	require.Error(t, err, "a negative offset is below MinOffset")
	assert.True(t, errors.Is(err, store.ErrOffsetTooSmall) || errors.Is(err, store.ErrInvalid), "%v", err)
	assert.Empty(t, got)
}

func TestAcceptReadAtFetchesByLogOffset(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	var ms []*store.Message
	for i := 0; i < 5; i++ {
		m := msg(fmt.Sprintf("t%d", i%2), i%3, strconv.Itoa(i))
		ms = append(ms, m)
	}
	require.NoError(t, s.Append(ms...))
	for _, m := range ms {
		got, err := s.ReadAt(m.LogOffset)
		require.NoError(t, err)
		assert.Equal(t, m.Body, got.Body)
		assert.Equal(t, m.Topic, got.Topic)
		assert.Equal(t, m.QueueID, got.QueueID)
		assert.Equal(t, m.QueueOffset, got.QueueOffset)
	}
	_, err := s.ReadAt(5)
	assert.Error(t, err, "never written")
	_, err = s.ReadAt(-1)
	assert.Error(t, err)
}
