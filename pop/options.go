package pop

import (
	"crypto/rand"
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/store"
)

// Defaults applied for zero fields of Options.
const (
	// DefaultMaxAttempts is the total number of deliveries of a message
	// before it goes to Options.DeadLetter.
	DefaultMaxAttempts = 16
	// DefaultInvisible is the invisible time of a Request whose Invisible is 0.
	DefaultInvisible = time.Minute
	// DefaultMinInvisible is the lower clamp of a non-zero Request.Invisible.
	DefaultMinInvisible = time.Second
	// DefaultMaxInvisible is the upper clamp of Request.Invisible.
	DefaultMaxInvisible = 12 * time.Hour
	// DefaultLockWait bounds how long a FIFO pop with an attempt id and
	// Poll == 0 waits for the group@topic lock.
	DefaultLockWait = 3 * time.Second
	// DefaultLockExpiry is the age after which a group@topic lock whose
	// holder has been abandoned by its caller (its ctx is done) may be
	// taken away. A holder whose ctx is live is never evicted.
	DefaultLockExpiry = 2 * time.Minute
	// DefaultMaxWaitersPerKey caps the long-polling pops per group@topic.
	DefaultMaxWaitersPerKey = 1024
	// DefaultMaxWaiters caps the long-polling pops of the whole service.
	DefaultMaxWaiters = 64 * 1024
	// DefaultTick is the period of the background loop that wakes waiters
	// whose invisible times or FIFO blocks ended and sweeps abandoned locks.
	DefaultTick = 100 * time.Millisecond
	// DefaultDeadLetterRetry is how long a message whose DeadLetter call
	// failed stays parked before the call is tried again.
	DefaultDeadLetterRetry = time.Second
)

// InitialOffset says where a group with no committed offset starts.
type InitialOffset int

const (
	// Earliest starts at the queue's MinOffset (the default).
	Earliest InitialOffset = iota
	// Latest starts at the queue's MaxOffset: only messages appended after
	// the group's first pop of the queue are delivered.
	Latest
)

// Options configures a Service. The zero value is a working default.
type Options struct {
	// Offsets stores committed offsets and epochs; nil = an in-memory
	// MemoryOffsets private to the Service.
	Offsets Offsets
	// InitialOffset for a group with no committed offset (default Earliest).
	InitialOffset InitialOffset
	// MaxAttempts is the total number of deliveries of a message before it
	// goes to DeadLetter (default DefaultMaxAttempts).
	MaxAttempts int
	// DeadLetter receives a message that reached MaxAttempts once its last
	// invisible time ended. Until it returns nil the message is kept and the
	// call retried every DeadLetterRetry, unless the error wraps
	// ErrDeadLetterRefused or store.ErrInvalid (refused for good): then the
	// message is settled without one, at ERROR (Stats.DeadLetterDropped).
	// nil = never dead-letter: messages
	// keep being redelivered. It runs inside a pop, holding the
	// group@topic serialization lock but no mutex: it may append to the
	// store (a dead-letter topic) but must not pop the same group@topic.
	DeadLetter func(group string, m *store.Message) error
	// DeadLetterRetry is how long a message whose DeadLetter call failed
	// waits before the next try (default DefaultDeadLetterRetry).
	DeadLetterRetry time.Duration
	// MinInvisible and MaxInvisible clamp a non-zero Request.Invisible
	// (zero means DefaultInvisible) and the
	// duration of ChangeInvisible (defaults DefaultMinInvisible,
	// DefaultMaxInvisible).
	MinInvisible, MaxInvisible time.Duration
	// LockWait bounds a FIFO pop's wait for the group@topic lock when
	// Request.Poll is 0 (default DefaultLockWait).
	LockWait time.Duration
	// LockExpiry is the backstop age of an abandoned lock hold (default
	// DefaultLockExpiry).
	LockExpiry time.Duration
	// MaxWaitersPerKey and MaxWaiters cap long-polling pops per group@topic
	// and in total (defaults DefaultMaxWaitersPerKey, DefaultMaxWaiters).
	MaxWaitersPerKey, MaxWaiters int
	// HandleKey is the key receipt handles are MAC'd under (any length;
	// the MAC keys are derived from it); nil = 32 random bytes (handles then
	// do not verify across restarts).
	HandleKey []byte
	// Now is the clock of every visibility decision (nil = time.Now).
	Now func() time.Time
	// Logger receives contention, expiry, resets, dead letters and every
	// rejected request with its keys (nil = discard).
	Logger *slog.Logger
	// Tick is the period of the background wake-up loop (default DefaultTick).
	Tick time.Duration
}

func (o Options) withDefaults() Options {
	if o.Offsets == nil {
		o.Offsets = NewMemoryOffsets()
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.DeadLetterRetry <= 0 {
		o.DeadLetterRetry = DefaultDeadLetterRetry
	}
	if o.MinInvisible <= 0 {
		o.MinInvisible = DefaultMinInvisible
	}
	if o.MaxInvisible <= 0 {
		o.MaxInvisible = DefaultMaxInvisible
	}
	if o.MaxInvisible < o.MinInvisible {
		o.MaxInvisible = o.MinInvisible
	}
	if o.LockWait <= 0 {
		o.LockWait = DefaultLockWait
	}
	if o.LockExpiry <= 0 {
		o.LockExpiry = DefaultLockExpiry
	}
	if o.MaxWaitersPerKey <= 0 {
		o.MaxWaitersPerKey = DefaultMaxWaitersPerKey
	}
	if o.MaxWaiters <= 0 {
		o.MaxWaiters = DefaultMaxWaiters
	}
	if len(o.HandleKey) == 0 {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		o.HandleKey = k
	} else {
		o.HandleKey = append([]byte(nil), o.HandleKey...)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	return o
}
