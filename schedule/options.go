package schedule

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/internal/fsx"
)

// Topic is where delayed messages wait: level L lives in queue L-1.
const Topic = "SCHEDULE_TOPIC_XXXX"

// TimerTopic is where timer messages (At) wait, in queue 0. The name is
// RocketMQ 5's timer topic, so a protocol layer that already writes there
// (with PropTimerDeliverMS or PropStartDeliverTime set) is understood.
const TimerTopic = "rmq_sys_wheel_timer"

// ProgressTopic is the system topic (queue 0) where a Scheduler without a
// ProgressPath, over a Log that is not a ProgressLog, keeps its progress:
// each record is appended in the same batch as the messages it accounts for,
// so a batch and its progress land together or not at all.
const ProgressTopic = "rmq_sys_schedule_progress"

// DefaultLevels are RocketMQ's 18 delay levels, used when Options.Levels is "".
const DefaultLevels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// DefaultTick is how often, at the latest, a started level re-checks due
// times when Options.Tick is 0.
const DefaultTick = 100 * time.Millisecond

// DefaultMaxBatch is how many due messages one append carries at most when
// Options.MaxBatch is 0 (the store's MaxReadBatch). A crash delivers at most
// this many messages of a level (or of the timers) again.
const DefaultMaxBatch = 1024

// DefaultMaxTimerDelay is how far ahead At accepts a time when
// Options.MaxTimerDelay is 0: one year.
const DefaultMaxTimerDelay = 365 * 24 * time.Hour

// MaxRetryBackoff caps the wait between retries of a failed append. The wait
// starts at one Tick and doubles; it is counted in ticks, so Stop ends it at
// once and tests with a short Tick never sleep long.
const MaxRetryBackoff = 5 * time.Second

// SlotWidth is the span of due times one timer index slot (one file) covers.
// The scheduler holds the pending timers of one slot in memory at a time.
const SlotWidth = time.Hour

// KeepDelivered is how long a slot file is kept after every timer in it was
// delivered, so that Cancel of a delivered timer answers ErrDelivered rather
// than ErrTimerNotFound.
const KeepDelivered = 24 * time.Hour

// Options configure a Scheduler. The zero value is a working default that
// never delivers twice across a restart: see ProgressPath.
type Options struct {
	// Levels is the string form of the delay levels ("1s 5s 1m 2h 1d");
	// "" means DefaultLevels. See ParseLevels.
	Levels string
	// ProgressPath is the progress file (levels' next offsets, the timers'
	// position and their cancels): a journal with one record appended and
	// fsynced per delivered batch, compacted by an atomic replace once it
	// passes 1 MiB; the timer index lives in the directory
	// ProgressPath+".timers" beside it. "" keeps progress in the log itself
	// (records in ProgressTopic, appended atomically with each batch) and
	// the timer index in memory, rebuilt from the log by New: durable, but
	// memory then grows with the number of pending timers. A Log that
	// implements ProgressLog keeps progress through it in either case.
	ProgressPath string
	// Now is the clock every due decision reads; nil means time.Now.
	Now func() time.Time
	// Logger receives lifecycle, recovery, retry and loss lines; nil
	// discards them.
	Logger *slog.Logger
	// Tick is how often a started lane (a level, or the timers) re-checks
	// due times; 0 means DefaultTick.
	Tick time.Duration
	// MaxBatch caps the messages per append; 0 means DefaultMaxBatch.
	MaxBatch int
	// MaxTimerDelay is how far ahead of Now At accepts a time; 0 means
	// DefaultMaxTimerDelay. A timer record appended by hand whose time is
	// further than this after its StoredAt is skipped as malformed.
	MaxTimerDelay time.Duration

	// fs is the file system for the progress file and the timer index;
	// nil = the operating system. Tests set it to a fault layer.
	fs fsx.FS
}

// withDefaults validates o and fills in every zero field.
func (o Options) withDefaults() (Options, []time.Duration, error) {
	if o.Levels == "" {
		o.Levels = DefaultLevels
	}
	levels, err := ParseLevels(o.Levels)
	if err != nil {
		return o, nil, err
	}
	if o.Tick < 0 || o.MaxBatch < 0 || o.MaxTimerDelay < 0 {
		return o, nil, fmt.Errorf("negative Tick %v, MaxBatch %d or MaxTimerDelay %v: %w", o.Tick, o.MaxBatch, o.MaxTimerDelay, ErrInvalid)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Tick == 0 {
		o.Tick = DefaultTick
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxTimerDelay == 0 {
		o.MaxTimerDelay = DefaultMaxTimerDelay
	}
	if o.fs == nil {
		o.fs = fsx.OS
	}
	return o, levels, nil
}
