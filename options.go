package brokercore

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// Defaults applied by Open to zero fields of Options.
const (
	// DefaultLockSweepEvery is how often Open's housekeeping drops expired
	// leases from the lock table (lock.Table.Sweep). Expired leases are free
	// for TryLock at once; the sweep only reclaims memory and logs expiries.
	DefaultLockSweepEvery = 10 * time.Second
	// DefaultConsumerScanEvery is how often Open's housekeeping expires
	// silent consumer channels (consumer.Registry.Scan), RocketMQ's
	// ClientHousekeepingService period.
	DefaultConsumerScanEvery = 10 * time.Second
)

// Names of the files and directories Open keeps under its directory.
const (
	// StoreDir is the store's directory under the broker's.
	StoreDir = "store"
	// OffsetsFile is the offset manager's file (offset.Options.Path).
	OffsetsFile = "offsets"
	// ScheduleDir holds the scheduler's progress file (and what the
	// scheduler keeps beside it).
	ScheduleDir = "schedule"
	// ProgressFile is the scheduler's progress file inside ScheduleDir
	// (schedule.Options.ProgressPath).
	ProgressFile = "progress"
	// HandleKeyFile holds the key that signs pop's receipt handles, so that
	// handles issued before a restart are recognised as stale, not forged.
	HandleKeyFile = "handle.key"
	// TxnProgressFile is where the transaction manager records where its
	// rebuild may start reading (txn.Options.ProgressPath).
	TxnProgressFile = "txn.progress"
)

// HandleKeySize is the length in bytes of the generated receipt-handle key.
const HandleKeySize = 32

// Options configure Open. The zero value is a working default: every
// package's own zero Options, with the paths under the broker's directory
// filled in and the pieces wired to each other.
//
// A field Open fills is only filled when it is zero, so a host can still
// override any of them: Offset.Path, Offset.Bounds, Schedule.ProgressPath, Txn.ProgressPath, Pop.Offsets,
// Pop.DeadLetter, Pop.HandleKey, Lock.TokenBase, and every Now and Logger.
type Options struct {
	// Store configures the store opened under dir/StoreDir.
	Store store.Options
	// Pop configures the pop service. Offsets defaults to the broker's
	// offset manager, DeadLetter to appending to DeadLetterPrefix+group,
	// HandleKey to the key kept in dir/HandleKeyFile.
	Pop pop.Options
	// Offset configures the offset manager; Path defaults to
	// dir/OffsetsFile and Bounds to the store.
	Offset offset.Options
	// Schedule configures the scheduler; ProgressPath defaults to
	// dir/ScheduleDir/ProgressFile.
	Schedule schedule.Options
	// Lock configures the lock table. TokenBase defaults to the Unix time
	// in nanoseconds at Open, so fencing tokens keep growing across
	// restarts although the table lives in memory.
	Lock lock.Options
	// Consumer configures the consumer registry.
	Consumer consumer.Options
	// Txn configures the transaction manager; ProgressPath defaults to
	// dir/TxnProgressFile. Its Checker (nil: set it later with
	// Broker.Transactions().SetChecker) asks producers about open
	// transactions.
	Txn txn.Options

	// NoDeadLetters keeps every message in its queue until it is acked: a
	// message past Pop.MaxAttempts is delivered again after each invisible
	// time, never moved to DeadLetterTopic(group). It is for hosts whose
	// consumers handle poison messages themselves (Watermill's contract).
	// Setting it together with Pop.DeadLetter is refused with ErrInvalid.
	NoDeadLetters bool

	// LockSweepEvery is the period of lock.Table.Sweep (0 =
	// DefaultLockSweepEvery, negative = never).
	LockSweepEvery time.Duration
	// ConsumerScanEvery is the period of consumer.Registry.Scan (0 =
	// DefaultConsumerScanEvery, negative = never).
	ConsumerScanEvery time.Duration

	// Now is the clock of every package whose own Now is nil (nil =
	// time.Now).
	Now func() time.Time
	// Logger receives the lines of every package whose own Logger is nil,
	// each with a "pkg" attribute naming the package (nil = discard).
	Logger *slog.Logger
}

// withDefaults returns opts with every zero field that Open owns filled in
// for the broker directory dir. Pop's Offsets, DeadLetter and HandleKey are
// filled by Open itself, since they need the opened pieces.
func (o Options) withDefaults(dir string) Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LockSweepEvery == 0 {
		o.LockSweepEvery = DefaultLockSweepEvery
	}
	if o.ConsumerScanEvery == 0 {
		o.ConsumerScanEvery = DefaultConsumerScanEvery
	}
	o.Store.Now = orNow(o.Store.Now, o.Now)
	o.Pop.Now = orNow(o.Pop.Now, o.Now)
	o.Offset.Now = orNow(o.Offset.Now, o.Now)
	o.Schedule.Now = orNow(o.Schedule.Now, o.Now)
	o.Lock.Now = orNow(o.Lock.Now, o.Now)
	o.Consumer.Now = orNow(o.Consumer.Now, o.Now)
	o.Txn.Now = orNow(o.Txn.Now, o.Now)
	o.Store.Logger = orLogger(o.Store.Logger, o.Logger, "store")
	o.Pop.Logger = orLogger(o.Pop.Logger, o.Logger, "pop")
	o.Offset.Logger = orLogger(o.Offset.Logger, o.Logger, "offset")
	o.Schedule.Logger = orLogger(o.Schedule.Logger, o.Logger, "schedule")
	o.Lock.Logger = orLogger(o.Lock.Logger, o.Logger, "lock")
	o.Consumer.Logger = orLogger(o.Consumer.Logger, o.Logger, "consumer")
	o.Txn.Logger = orLogger(o.Txn.Logger, o.Logger, "txn")
	if o.Offset.Path == "" {
		o.Offset.Path = filepath.Join(dir, OffsetsFile)
	}
	if o.Schedule.ProgressPath == "" {
		o.Schedule.ProgressPath = filepath.Join(dir, ScheduleDir, ProgressFile)
	}
	if o.Txn.ProgressPath == "" {
		o.Txn.ProgressPath = filepath.Join(dir, TxnProgressFile)
	}
	if o.Lock.TokenBase == 0 {
		if ns := time.Now().UnixNano(); ns > 0 {
			o.Lock.TokenBase = uint64(ns)
		}
	}
	return o
}

func orNow(own, shared func() time.Time) func() time.Time {
	if own != nil {
		return own
	}
	return shared
}

func orLogger(own, shared *slog.Logger, pkg string) *slog.Logger {
	if own != nil {
		return own
	}
	return shared.With("pkg", pkg)
}
