package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(start)
	assert.Equal(t, start, c.Now())
	c.Advance(time.Minute)
	assert.Equal(t, start.Add(time.Minute), c.Now())
	c.Advance(-2 * time.Minute)
	assert.Equal(t, start.Add(-time.Minute), c.Now())
	c.Set(start)
	assert.Equal(t, start, c.Now())
}

func TestLogBufferKeepsConcurrentWrites(t *testing.T) {
	var b LogBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _ = b.Write([]byte("x")) })
	}
	wg.Wait()
	assert.Equal(t, "xxxxxxxx", b.String())
}

func TestCopyCrashImageCopiesTheTreeAndSkipsVanishedFiles(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(from, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(from, "a", "b", "f"), []byte("data"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(from, "top"), []byte("t"), 0o644))
	require.NoError(t, CopyCrashImage(from, to))
	got, err := os.ReadFile(filepath.Join(to, "a", "b", "f"))
	require.NoError(t, err)
	assert.Equal(t, "data", string(got))
	got, err = os.ReadFile(filepath.Join(to, "top"))
	require.NoError(t, err)
	assert.Equal(t, "t", string(got))

	// A file removed while the walk runs is skipped, not an error.
	from2, to2 := t.TempDir(), t.TempDir()
	for i := 0; i < 200; i++ {
		require.NoError(t, os.WriteFile(filepath.Join(from2, fmt.Sprintf("f%03d", i)), []byte("x"), 0o644))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 199; i >= 0; i-- {
			_ = os.Remove(filepath.Join(from2, fmt.Sprintf("f%03d", i)))
		}
	}()
	require.NoError(t, CopyCrashImage(from2, to2))
	<-done
	assert.Error(t, CopyCrashImage(filepath.Join(from2, "missing-root"), to2), "a missing root is still an error")
}

func TestRepeatCallsUntilStoppedAndStopWaits(t *testing.T) {
	var calls atomic.Int64
	var inCall atomic.Bool
	stop := Repeat(func() {
		inCall.Store(true)
		calls.Add(1)
		inCall.Store(false)
	})
	for calls.Load() < 3 {
		runtime.Gosched()
	}
	stop()
	n := calls.Load()
	require.False(t, inCall.Load(), "stop returns after the call in progress")
	stop() // a second stop is harmless
	require.Equal(t, n, calls.Load(), "no call after stop returned")
}
