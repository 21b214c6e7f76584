package schedule_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

func TestStartAndCancelAfterCloseOrOverAClosedStoreAnswerErrClosed(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	s, err := schedule.New(st, schedule.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	require.ErrorIs(t, s.Start(), schedule.ErrClosed)
	require.ErrorIs(t, s.Cancel("k"), schedule.ErrClosed)

	s2, err := schedule.New(st, schedule.Options{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.ErrorIs(t, s2.Start(), schedule.ErrClosed, "a scheduler must not start over a closed store")
	require.NoError(t, s2.Stop())
}
