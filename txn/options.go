package txn

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/internal/fsx"
)

// Topics of transactions (the names Apache RocketMQ uses; brokercore's
// names.go reserves them).
const (
	// HalfTopic holds half (prepared) messages, in queue 0.
	HalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	// OpTopic holds the op records (commit, rollback, check, discard), in
	// queue 0.
	OpTopic = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	// CheckMaxTimeTopic keeps, in queue 0, the halves of transactions that
	// were rolled back because their check-back limit ran out.
	CheckMaxTimeTopic = "TRANS_CHECK_MAX_TIME_TOPIC"
)

// Defaults of Options (Apache's transactionTimeOut, transactionCheckInterval
// and transactionCheckMax).
const (
	// DefaultTransactionTimeout is how long after it was stored an open
	// transaction is first checked back.
	DefaultTransactionTimeout = 6 * time.Second
	// DefaultCheckInterval is the time between two checks of one
	// transaction.
	DefaultCheckInterval = 60 * time.Second
	// DefaultCheckMax is how many times a transaction is checked before it
	// is rolled back.
	DefaultCheckMax = 15
	// DefaultTick is how often a started Manager looks for due checks.
	DefaultTick = time.Second
	// DefaultRemember is how many closed transactions keep their outcome in
	// memory, so that a retried commit or rollback is answered right.
	DefaultRemember = 1 << 16
	// DefaultMaxChecksPerTick bounds the checks one tick sends.
	DefaultMaxChecksPerTick = 1024
)

// Options configure a Manager. The zero value is a working default.
type Options struct {
	// TransactionTimeout is how long after a half was stored its first
	// check is due (0 = DefaultTransactionTimeout). A message's
	// PropCheckImmunityTime (seconds) replaces it for that message.
	TransactionTimeout time.Duration
	// CheckInterval is the time between two checks (0 = DefaultCheckInterval).
	CheckInterval time.Duration
	// CheckMax is how many checks a transaction gets before it is rolled
	// back and kept in CheckMaxTimeTopic (0 = DefaultCheckMax).
	CheckMax int
	// Tick is how often the started driver looks for due checks (0 =
	// DefaultTick).
	Tick time.Duration
	// Remember is how many closed transactions keep their outcome in memory
	// (0 = DefaultRemember). A commit or rollback of an older one answers
	// ErrNotFound.
	Remember int
	// MaxChecksPerTick bounds the checks one tick sends (0 =
	// DefaultMaxChecksPerTick); the rest go at the next tick.
	MaxChecksPerTick int
	// Checker asks a producer of a group about a transaction. nil: checks
	// are still counted (as when no producer of the group is online) and a
	// transaction past CheckMax is rolled back; SetChecker sets it later.
	Checker Checker
	// ProgressPath is the file recording where New may start reading the
	// half and op queues ("" = read them from their oldest record).
	ProgressPath string
	// Now is the clock of every due decision (nil = time.Now).
	Now func() time.Time
	// Logger receives resolutions, refusals, checks and recovery (nil =
	// discard).
	Logger *slog.Logger
	// fs is the file system of the progress file (nil = the OS's); tests
	// set a fault layer through export_test.go, hosts never see it.
	fs fsx.FS
}

func (o Options) withDefaults() (Options, error) {
	if o.TransactionTimeout < 0 || o.CheckInterval < 0 || o.CheckMax < 0 || o.Tick < 0 || o.Remember < 0 || o.MaxChecksPerTick < 0 {
		return o, fmt.Errorf("%w: negative option", ErrInvalid)
	}
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	if o.CheckMax == 0 {
		o.CheckMax = DefaultCheckMax
	}
	if o.Tick == 0 {
		o.Tick = DefaultTick
	}
	if o.Remember == 0 {
		o.Remember = DefaultRemember
	}
	if o.MaxChecksPerTick == 0 {
		o.MaxChecksPerTick = DefaultMaxChecksPerTick
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.fs == nil {
		o.fs = fsx.OS
	}
	return o, nil
}
