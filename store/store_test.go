package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendAssignsDenseOffsetsAndReadsBack(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := openT(t, dir, Options{Now: clk.Now})
	a, b, c := msg("t", 0, "a"), msg("t", 1, "b"), msg("t", 0, "c")
	a.Keys = []string{"k1", "k2"}
	a.Properties = map[string]string{"p": "v"}
	a.Tags = "tag"
	require.NoError(t, s.Append(a, b, c))
	assert.Equal(t, int64(0), a.QueueOffset)
	assert.Equal(t, int64(1), c.QueueOffset)
	assert.Equal(t, int64(0), b.QueueOffset)
	assert.Equal(t, []int64{0, 1, 2}, []int64{a.LogOffset, b.LogOffset, c.LogOffset})
	got, err := s.Read("t", 0, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "c"}, bodies(got))
	assert.Equal(t, a.Keys, got[0].Keys)
	assert.Equal(t, a.Properties, got[0].Properties)
	assert.Equal(t, "tag", got[0].Tags)
	assert.True(t, got[0].StoredAt.Equal(clk.Now()))
	m, err := s.ReadAt(1)
	require.NoError(t, err)
	assert.Equal(t, "b", string(m.Body))
	assert.Equal(t, int64(2), s.MaxOffset("t", 0))
	assert.Equal(t, []string{"t"}, s.Topics())
	assert.Equal(t, []int{0, 1}, s.Queues("t"))
	require.NoError(t, s.Close())

	s = openT(t, dir, Options{Now: clk.Now})
	defer s.Close()
	got, err = s.Read("t", 0, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "c"}, bodies(got))
	require.NoError(t, s.Append(msg("t", 0, "d")))
	got, err = s.Read("t", 0, 1, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "d"}, bodies(got))
	assert.Equal(t, int64(3), got[1].LogOffset)
}

func TestMessageRoundTripsFieldForField(t *testing.T) {
	clk := newClock()
	s := openT(t, t.TempDir(), Options{Now: clk.Now})
	defer s.Close()
	in := &Message{
		Topic: "orders", QueueID: 7, Tags: "paid", Keys: []string{"k1", "k2"},
		Body:       []byte{0, 1, 2, 255},
		Properties: map[string]string{"UNIQ_KEY": "abc", "DELAY": "3"},
		BornAt:     time.Date(2025, 5, 6, 7, 8, 9, 10, time.UTC), ReconsumeTimes: 3,
	}
	require.NoError(t, s.Append(in))
	got, err := s.Read("orders", 7, 0, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, in, got[0], "every field, including the assigned ones and zero times")
	bare := &Message{Topic: "orders", QueueID: 7}
	require.NoError(t, s.Append(bare))
	back, err := s.ReadAt(bare.LogOffset)
	require.NoError(t, err)
	assert.Equal(t, bare, back)
	assert.True(t, back.BornAt.IsZero())
}
