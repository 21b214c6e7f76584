package offset

import (
	"log/slog"
	"time"
)

// Defaults applied to zero fields of Options and TableOptions.
const (
	// DefaultFlushEvery is the period of the background flush when
	// Options.FlushEvery is 0.
	DefaultFlushEvery = 5 * time.Second

	// FlushEveryCommit, used as Options.FlushEvery (any negative value works),
	// writes the file synchronously on every Commit and CommitFenced instead
	// of in the background. It is durable and slow: one fsync per commit.
	FlushEveryCommit time.Duration = -1

	// DefaultMaxBuffered is the per-queue message limit of a QueueTable when
	// TableOptions.MaxBuffered is 0 (RocketMQ's pullThresholdForQueue).
	DefaultMaxBuffered = 1000

	// DefaultMaxBufferedBytes is the per-queue body-byte limit of a
	// QueueTable when TableOptions.MaxBufferedBytes is 0 (RocketMQ's
	// pullThresholdSizeForQueue, 100 MiB).
	DefaultMaxBufferedBytes int64 = 100 << 20
)

// Options configures a Manager. The zero value is a working default: an
// in-memory manager.
type Options struct {
	// Path is the offset file. "" keeps offsets in memory only. Next to it
	// the manager keeps Path+".bak" (the previous good file) and uses
	// Path+".tmp" while writing. Open creates the directory if needed.
	Path string

	// FlushEvery is the period of the background flush of a file-backed
	// manager: 0 means DefaultFlushEvery, a negative value (FlushEveryCommit)
	// means a synchronous flush on every commit. Resets are always written
	// at once, whatever this says.
	FlushEvery time.Duration

	// Now is the clock (nil = time.Now). The manager makes no expiry
	// decisions; it stamps flushes (Stats.LastFlush, the file header) with it.
	Now func() time.Time

	// Logger receives recovery, backwards commits, rejected requests, resets
	// and flush failures (nil = discard).
	Logger *slog.Logger

	// FallbackToBackup lets Open load Path+".bak" when Path is corrupt or
	// missing while a backup exists. The fallback is logged. Without it,
	// such an Open fails with ErrCorrupt.
	FallbackToBackup bool
}

// TableOptions configures a QueueTable. The zero value is a working default.
type TableOptions struct {
	// MaxBuffered is the most messages a process queue buffers before
	// Deliver reports ErrBackpressure (0 = DefaultMaxBuffered).
	MaxBuffered int

	// MaxBufferedBytes is the most body bytes a process queue buffers before
	// Deliver reports ErrBackpressure (0 = DefaultMaxBufferedBytes).
	MaxBufferedBytes int64

	// Logger receives drops, rejected deliveries and bad input (nil = discard).
	Logger *slog.Logger
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
