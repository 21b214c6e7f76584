package schedule

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// atKey schedules a timer with the given UNIQ_KEY at when and appends it.
func atKey(t *testing.T, s *Scheduler, l Log, key string, when time.Time) {
	t.Helper()
	m, err := s.At(&store.Message{Topic: "orders", Body: []byte(key + "@" + strconv.FormatInt(when.UnixMilli(), 10)), Properties: map[string]string{PropUniqKey: key}}, when)
	require.NoError(t, err)
	require.Equal(t, key, m.Properties[PropUniqKey])
	require.NoError(t, l.Append(m))
}

// TestCancelAtCancelsOnlyTheTimerAtThatTime: CancelAt finds a timer by key
// and time (indexed or not yet), leaves a timer with the same key at
// another time alone, answers ErrTimerNotFound for a time no timer with the
// key has, ErrCancelled and ErrDelivered as Cancel does, falls back to
// Cancel for a time already passed, and its cancel survives a restart.
func TestCancelAtCancelsOnlyTheTimerAtThatTime(t *testing.T) {
	clk := newClock()
	l := newFakeLog(clk.Now)
	opts := Options{Now: clk.Now, ProgressPath: filepath.Join(t.TempDir(), "progress")}
	s, err := New(l, opts)
	require.NoError(t, err)
	now := clk.Now()
	atKey(t, s, l, "k", now.Add(time.Minute))
	atKey(t, s, l, "k", now.Add(2*time.Hour)) // same key, another slot
	atKey(t, s, l, "other", now.Add(time.Minute))
	d := drive(s)
	d.timers(now) // indexed
	atKey(t, s, l, "late-indexed", now.Add(5*time.Hour))
	atKey(t, s, l, "past", now.Add(-time.Second))

	require.ErrorIs(t, s.CancelAt("k", now.Add(3*time.Minute)), ErrTimerNotFound, "no timer with the key at that time")
	require.ErrorIs(t, s.CancelAt("", now.Add(time.Minute)), ErrInvalid)
	require.NoError(t, s.CancelAt("k", now.Add(time.Minute)))
	require.ErrorIs(t, s.CancelAt("k", now.Add(time.Minute)), ErrCancelled)
	require.NoError(t, s.CancelAt("late-indexed", now.Add(5*time.Hour)), "a record not indexed yet")
	require.NoError(t, s.CancelAt("past", now.Add(-time.Second)), "a passed time is Cancel")
	d.end(t)
	require.NoError(t, s.Close())

	s2, err := New(l, opts) // the cancels survive a restart
	require.NoError(t, err)
	d2 := drive(s2)
	d2.timers(now.Add(6 * time.Hour))
	assert.Equal(t, map[string]int{"k": 1, "other": 1}, countByKey(l, "orders"), "only k at 2h and other")
	for _, m := range l.delivered("orders") {
		if m.Properties[PropUniqKey] == "k" {
			assert.Equal(t, "k@"+strconv.FormatInt(now.Add(2*time.Hour).UnixMilli(), 10), string(m.Body), "the k delivered is the 2h one")
		}
	}
	require.ErrorIs(t, s2.CancelAt("k", now.Add(2*time.Hour)), ErrDelivered)
	require.ErrorIs(t, s2.CancelAt("k", now.Add(time.Minute)), ErrCancelled)
	d2.end(t)
	assert.EqualValues(t, 3, s.Stats().Timers.Cancelled)
}
