package offset

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logBuffer is a goroutine-safe log sink for asserting on log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newTestLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// crash stops m like a killed process: the flush loop ends, nothing more is
// written. Reopening the same Path then shows what a restart would see.
func crash(m *Manager) {
	m.closeOnce.Do(func() { m.closeErr = m.shutdown(false) })
}
