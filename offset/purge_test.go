package offset

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

func TestPurgeTopicRemovesTheTopicOfEveryGroupAndNothingElse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	m, err := Open(Options{Path: path, FlushEvery: time.Hour})
	require.NoError(t, err)
	for _, g := range []string{"g1", "g2"} {
		for _, tp := range []string{"a", "b"} {
			require.NoError(t, m.Commit(g, tp, 0, 5))
		}
	}
	require.NoError(t, m.PurgeTopic("a"))
	assert.Equal(t, []string{"b"}, m.Topics("g1"))
	assert.Equal(t, []string{"b"}, m.Topics("g2"))
	_, ok := m.Committed("g1", "a", 0)
	assert.False(t, ok)
	crash(m) // no Close: PurgeTopic wrote the file itself
	m2 := openT(t, Options{Path: path})
	_, ok = m2.Committed("g2", "a", 0)
	assert.False(t, ok, "gone after a crash")
	got, ok := m2.Committed("g2", "b", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(5), got)
	require.ErrorIs(t, m2.PurgeTopic(""), ErrInvalid)
	require.NoError(t, m2.Close())
	require.ErrorIs(t, m2.PurgeTopic("b"), ErrClosed)
}

// TestPurgeTopicFaultLeavesAllOrNothing fails each call of the file write
// PurgeTopic makes: it answers the error, and the file on disk holds either
// every offset of the topic or none, other topics always.
func TestPurgeTopicFaultLeavesAllOrNothing(t *testing.T) {
	for _, op := range []fsxtest.Op{fsxtest.OpOpen, fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpRename} {
		for n := 1; n <= 2; n++ {
			t.Run(fmt.Sprint(op, "-", n), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "offsets")
				f := &fsxtest.Faulty{}
				m, err := Open(Options{Path: path, FlushEvery: time.Hour, fs: f})
				require.NoError(t, err)
				for q := range 3 {
					require.NoError(t, m.Commit("g", "a", q, 4))
					require.NoError(t, m.Commit("g", "b", q, 4))
				}
				require.NoError(t, m.Flush())
				f.Fail(op, n, fsxtest.ENOSPC)
				perr := m.PurgeTopic("a")
				crash(m)
				f.Heal()
				m2 := openT(t, Options{Path: path})
				left := 0
				for q := range 3 {
					if _, ok := m2.Committed("g", "a", q); ok {
						left++
					}
					_, ok := m2.Committed("g", "b", q)
					require.True(t, ok, "other topics untouched")
				}
				require.Contains(t, []int{0, 3}, left, "all or nothing")
				if left == 3 {
					require.ErrorIs(t, perr, fsxtest.ENOSPC)
				}
			})
		}
	}
}
