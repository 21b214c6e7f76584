package schedule_test

import (
	"testing"
	"time"

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

// After Close every call answers ErrClosed (the composition contract):
// Delay and At too, and the message handed in is left as it was.
func TestDelayAndAtAfterCloseAnswerErrClosedAndLeaveTheMessage(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	defer st.Close()
	s, err := schedule.New(st, schedule.Options{})
	require.NoError(t, err)
	m := &store.Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{"k": "v"}}
	_, err = s.Delay(m, 1)
	require.NoError(t, err, "Delay works before Close")
	require.NoError(t, s.Close())

	out, err := s.Delay(m, 1)
	require.ErrorIs(t, err, schedule.ErrClosed)
	require.Nil(t, out)
	out, err = s.At(m, time.Now().Add(time.Minute))
	require.ErrorIs(t, err, schedule.ErrClosed)
	require.Nil(t, out)
	require.Equal(t, &store.Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{"k": "v"}}, m)

	s2, err := schedule.New(st, schedule.Options{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, err = s2.At(m, time.Now().Add(time.Minute))
	require.ErrorIs(t, err, schedule.ErrClosed, "a timer over a closed store is refused")
	_, err = s2.Delay(m, 1)
	require.ErrorIs(t, err, schedule.ErrClosed)
}
