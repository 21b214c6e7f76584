package store

import (
	"testing"

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
