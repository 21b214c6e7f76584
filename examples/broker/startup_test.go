package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/schedule"
)

// TestCorruptOffsetFileRefusesToStartInsteadOfReplayingFromZero: a torn
// offsets file must not turn into "every group starts over"; the operator
// opts into the backup with -offset-backup.
func TestCorruptOffsetFileRefusesToStartInsteadOfReplayingFromZero(t *testing.T) {
	dir := t.TempDir()
	tb := startBroker(t, dir, newFakeClock())
	c, _ := tb.client(t)
	require.NoError(t, c.call(t.Context(), "POST", "/v1/messages", messageIn{Topic: "t", Body: ptr("x")}, nil))
	require.NoError(t, c.call(t.Context(), "POST", "/v1/offsets/commit", commitIn{Group: "g", Topic: "t", Offset: 0}, nil))
	tb.stop(t)
	tb = startBroker(t, dir, newFakeClock()) // a second flush leaves a good .bak behind
	c, _ = tb.client(t)
	require.NoError(t, c.call(t.Context(), "POST", "/v1/messages", messageIn{Topic: "t", Body: ptr("x")}, nil))
	require.NoError(t, c.call(t.Context(), "POST", "/v1/offsets/commit", commitIn{Group: "g", Topic: "t", Offset: 1}, nil))
	tb.stop(t)

	path := filepath.Join(dir, brokercore.OffsetsFile)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw[:len(raw)/2], 0o644)) // torn

	_, err = newBroker(Config{DataDir: dir})
	require.ErrorIs(t, err, offset.ErrCorrupt)

	tb = startBroker(t, dir, newFakeClock(), func(c *Config) { c.OffsetFallback = true })
	c, _ = tb.client(t)
	off := c.offset(t, "g", "t", 0)
	require.NotNil(t, off.Committed, "the backup's offset, not a reset to nothing")
}

// TestStartupFailureLeavesNothingRunning: a data dir that cannot be used
// is an error, and whatever was opened before it is closed (goleak checks
// the goroutines).
func TestStartupFailureLeavesNothingRunning(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err := newBroker(Config{DataDir: file})
	assert.Error(t, err)

	// A corrupt schedule progress file fails the start after the offsets,
	// the store and pop are open: they are closed again, so a fixed
	// directory opens at once.
	dir := t.TempDir()
	progress := filepath.Join(dir, brokercore.ScheduleDir, brokercore.ProgressFile)
	require.NoError(t, os.MkdirAll(filepath.Dir(progress), 0o755))
	require.NoError(t, os.WriteFile(progress, []byte("{not json"), 0o644))
	_, err = newBroker(Config{DataDir: dir})
	require.ErrorIs(t, err, schedule.ErrCorrupt)
	require.NoError(t, os.Remove(progress))
	b, err := newBroker(Config{DataDir: dir})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "Close is idempotent")

	_, err = newBroker(Config{DataDir: t.TempDir(), Sync: "always"})
	assert.ErrorContains(t, err, "want group, interval or none")
	_, err = newBroker(Config{DataDir: t.TempDir(), Levels: "1s soon"})
	assert.Error(t, err)
}
