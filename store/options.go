package store

import (
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/internal/fsx"
)

// SyncPolicy says when appended records are fsynced.
type SyncPolicy int

const (
	// SyncGroup (the default): Append returns after its records are fsynced;
	// concurrent appends share one fsync (group commit). Records become
	// readable only once they are durable.
	SyncGroup SyncPolicy = iota
	// SyncInterval: records are readable as soon as they are written and are
	// fsynced every Options.SyncEvery; a crash may lose the last interval.
	SyncInterval
	// SyncNone: fsync only on Sync, at segment roll and on Close.
	SyncNone
)

// String names the policy.
func (p SyncPolicy) String() string {
	switch p {
	case SyncGroup:
		return "group"
	case SyncInterval:
		return "interval"
	case SyncNone:
		return "none"
	}
	return "unknown"
}

// Defaults applied for zero Options fields.
const (
	// DefaultSyncEvery is the fsync period under SyncInterval.
	DefaultSyncEvery = time.Second
	// DefaultSegmentSize is the size at which a log segment is closed and a
	// new one started. Open reads the tail segment once (tidwall/wal checks
	// it), so this also bounds Open's transient memory.
	DefaultSegmentSize = 16 << 20
	// DefaultRetainEvery is the period of the background retention pass.
	DefaultRetainEvery = time.Minute
	// DefaultMaxMessageSize bounds a message's Body.
	DefaultMaxMessageSize = 4 << 20
	// MaxMetadataSize bounds the rest of a message: topic, tags, keys and
	// properties together.
	MaxMetadataSize = 1 << 20
	// MaxBatchBytes bounds the bodies and metadata of one Append batch
	// together (and MaxMessageSize).
	MaxBatchBytes = 256 << 20
	// DefaultCheckpointBytes bounds how much log a recovery replays: a
	// checkpoint is written once this many bytes were appended since the
	// last one (and at every segment roll, every DefaultCheckpointEvery and
	// on Close).
	DefaultCheckpointBytes = 4 << 20
	// DefaultCheckpointEvery is the longest time between two checkpoints
	// while records are being appended.
	DefaultCheckpointEvery = 10 * time.Second
	// MaxReadBatch is the most messages one Read returns; a larger max is
	// clamped (callers page by QueueOffset).
	MaxReadBatch = 1024
	// DefaultMaxOpenFiles is how many index files the store keeps open at
	// most by default, whatever the number of queues: with the log's
	// segments, the lock file and the checkpoint it fits well under a
	// process limit of 1,024 descriptors.
	DefaultMaxOpenFiles = 256
)

// Options configure a Store. The zero value is a working default.
type Options struct {
	// Sync is the durability policy (default SyncGroup).
	Sync SyncPolicy
	// SyncEvery is the fsync period under SyncInterval (default
	// DefaultSyncEvery).
	SyncEvery time.Duration
	// SegmentSize is the log segment size in bytes (default
	// DefaultSegmentSize).
	SegmentSize int
	// MaxAge drops whole segments whose newest record is older than this
	// (0 = no age limit).
	MaxAge time.Duration
	// MaxBytes drops the oldest whole segments while the log is larger than
	// this (0 = no size limit). The segment being written is never dropped.
	MaxBytes int64
	// RetainEvery is the period of the background retention pass (default
	// DefaultRetainEvery; negative = only on demand through Retain). It runs
	// only when MaxAge or MaxBytes is set.
	RetainEvery time.Duration
	// MaxMessageSize bounds each message's Body (default
	// DefaultMaxMessageSize).
	MaxMessageSize int
	// CheckpointBytes and CheckpointEvery bound the log a recovery replays
	// (defaults DefaultCheckpointBytes and DefaultCheckpointEvery).
	CheckpointBytes int64
	CheckpointEvery time.Duration
	// MaxOpenFiles bounds the index files kept open (default
	// DefaultMaxOpenFiles; at least 2): every (topic, queue) has one, opened
	// when used and closed, least recently used first, to stay within the
	// budget. Each log segment keeps one more descriptor for reads.
	MaxOpenFiles int
	// Now is the clock for StoredAt and MaxAge (nil = time.Now).
	Now func() time.Time
	// Logger receives recovery, retention, failures and rejected requests
	// (nil = discard).
	Logger *slog.Logger
	// OnAppend is called once per (topic, queue) of each appended batch with
	// the queue's new MaxOffset, after the records are readable (after the
	// fsync under SyncGroup), never while a store lock is held. It runs on
	// the appending goroutine just before Append returns, so it may append
	// again; it should not block for long. It runs under whatever locks the
	// caller of Append holds: a host that appends under a lock of its own
	// must not have a hook (or anything a hook waits for) take that lock.
	OnAppend func(topic string, queueID int, next int64)
	// NoKeyIndex turns the key index (LookupKey) off: no key files, no
	// memory per key. The zero value keeps it on.
	NoKeyIndex bool
	// KeyProperties names properties whose values the key index takes as
	// keys too, besides Keys (a RocketMQ host names "UNIQ_KEY", the
	// message id its clients query).
	KeyProperties []string

	// fs is where the store writes every file that is not the log (index
	// files, checkpoint, quarantine); nil = the operating system. Tests set
	// it (export_test.go) to a fault layer.
	fs fsx.FS
	// afterFixedRead runs after a read verified the tail or repaired an
	// index entry, before it tries again (tests append there).
	afterFixedRead func()
	// keyHash replaces the key index's hash (tests force collisions).
	keyHash func(topic, key string) uint64
}

func (o Options) withDefaults() Options {
	if o.SyncEvery <= 0 {
		o.SyncEvery = DefaultSyncEvery
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.RetainEvery == 0 {
		o.RetainEvery = DefaultRetainEvery
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.CheckpointBytes <= 0 {
		o.CheckpointBytes = DefaultCheckpointBytes
	}
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = DefaultCheckpointEvery
	}
	if o.MaxOpenFiles <= 0 {
		o.MaxOpenFiles = DefaultMaxOpenFiles
	}
	o.MaxOpenFiles = max(o.MaxOpenFiles, 2)
	if o.fs == nil {
		o.fs = fsx.OS
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
