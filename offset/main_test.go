package offset

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/internal/testkit"
)

// logBuffer is a slog sink safe for concurrent use.
type logBuffer = testkit.LogBuffer

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTestLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// crash stops m like a killed process: the flush loop ends, nothing more is
// written. Reopening the same Path then shows what a restart would see.
func crash(m *Manager) {
	m.closeOnce.Do(func() { m.closeErr = m.shutdown(false) })
}
