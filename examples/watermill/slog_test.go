package brokercore_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	wmbc "github.com/brokercore/brokercore/examples/watermill"
)

// TestSlogLinesReachTheWatermillLogger rules out losing the store's and pop's
// log lines (the ones field reports are solved from), their keys or their
// error on the way into a Watermill logger.
func TestSlogLinesReachTheWatermillLogger(t *testing.T) {
	capture := watermill.NewCaptureLogger()
	log := wmbc.SlogLogger(capture).With("component", "pop").WithGroup("req")
	boom := errors.New("boom")

	log.Error("pop failed", "err", boom, "group", "g")
	log.Warn("rejected bad handle", "queue", 3)
	log.Info("lock taken over", slog.Group("lease", "old", "a", "new", "b"))
	log.Debug("waiting")
	log.Log(t.Context(), slog.LevelDebug-4, "very verbose")

	got := capture.Captured()
	require.Len(t, got[watermill.ErrorLogLevel], 1)
	e := got[watermill.ErrorLogLevel][0]
	assert.Equal(t, "pop failed", e.Msg)
	assert.Equal(t, boom, e.Err)
	assert.Equal(t, watermill.LogFields{"component": "pop", "req.group": "g"}, e.Fields)

	require.Len(t, got[watermill.InfoLogLevel], 2)
	assert.Equal(t, watermill.LogFields{"component": "pop", "req.queue": int64(3), "level": "WARN"},
		got[watermill.InfoLogLevel][0].Fields)
	assert.Equal(t, watermill.LogFields{"component": "pop", "req.lease.old": "a", "req.lease.new": "b"},
		got[watermill.InfoLogLevel][1].Fields)
	require.Len(t, got[watermill.DebugLogLevel], 1)
	require.Len(t, got[watermill.TraceLogLevel], 1)
	assert.Equal(t, "very verbose", got[watermill.TraceLogLevel][0].Msg)

	// A nop Watermill logger costs nothing: slog skips the record entirely.
	assert.False(t, wmbc.SlogLogger(watermill.NopLogger{}).Enabled(t.Context(), slog.LevelError))
	assert.False(t, wmbc.SlogLogger(nil).Enabled(t.Context(), slog.LevelError))
}
