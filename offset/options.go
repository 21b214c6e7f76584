package offset

import (
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/internal/fsx"
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

	// Bounds, if set, tells where each queue ends (*store.Store satisfies
	// it): Commit, CommitFenced and Reset refuse an offset past MaxOffset
	// with ErrBeyondEnd. nil = no bound is checked. brokercore.Open sets
	// it to its store.
	Bounds Bounds

	// OnReset, if set, is called after every key a Reset, ResetToTime or
	// Clone moved (and a plain Commit on a key a fenced committer serves,
	// which counts as a reset of it): once the new offset and epoch are
	// persisted and visible (Committed and Epoch inside the call already
	// answer them), in the order of the call's keys, never under the
	// manager's locks. A reset that fails calls nothing. brokercore.Open
	// uses it to wake the long-polling pops of the queue, for which a
	// reset makes messages deliverable again.
	OnReset func(group, topic string, queueID int, offset int64, epoch uint64)

	// fs is the file system of the offset file (nil = fsx.OS); tests put a
	// fault-injecting one here.
	fs fsx.FS
}

// Bounds is what a Manager needs to refuse offsets past a queue's end.
// *store.Store satisfies it.
type Bounds interface {
	// MaxOffset is the next offset to be assigned in the queue: every
	// offset up to it (inclusive, "everything consumed") is committable.
	MaxOffset(topic string, queueID int) int64
}

// withDefaults returns o with every zero field that has a default filled
// in.
func (o Options) withDefaults() Options {
	if o.FlushEvery == 0 {
		o.FlushEvery = DefaultFlushEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Logger = orDiscard(o.Logger)
	if o.fs == nil {
		o.fs = fsx.OS
	}
	return o
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

// withDefaults returns o with every zero field that has a default filled
// in.
func (o TableOptions) withDefaults() TableOptions {
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = DefaultMaxBuffered
	}
	if o.MaxBufferedBytes <= 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	o.Logger = orDiscard(o.Logger)
	return o
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
