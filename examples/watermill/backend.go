package brokercore

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	bc "github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Backend is a brokercore.Broker (brokercore.Open: the store, a pop service
// over it woken by every append, the groups' committed offsets persisted
// next to the log) as the Watermill adapter uses it. Publishers and
// subscribers over the same Backend (Config.Store and Config.Pop) share its
// messages, consumer groups and in-flight state.
type Backend struct {
	Store *store.Store
	Pop   *pop.Service
	// Offsets is the offset manager the Broker opened for Pop, or nil when
	// the caller passed its own pop.Options.Offsets.
	Offsets *offset.Manager
	// Broker is the whole broker core; Close closes it.
	Broker *bc.Broker

	closeOnce sync.Once
	closeErr  error
}

// Layout of a Backend's directory: brokercore.Open's.
const (
	// LogDir is the store's directory inside a Backend's directory.
	LogDir = bc.StoreDir
	// OffsetsFile is the committed-offset file (an offset.Manager) inside a
	// Backend's directory.
	OffsetsFile = bc.OffsetsFile
)

// NoMaxAttempts is a pop.Options.MaxAttempts larger than any message's
// deliveries. OpenBackend no longer needs it (it sets
// brokercore.Options.NoDeadLetters instead); it is kept for hosts that
// passed it.
const NoMaxAttempts = math.MaxInt32

// OpenBackend opens the broker core in dir with brokercore.Open: the store
// in dir/LogDir and the pop service over it, committing the groups'
// offsets to dir/OffsetsFile unless popOpts.Offsets is set (so a group
// resumes where it was after a restart). pop.New subscribes to the store's
// arrivals, so every append wakes the service's long polls;
// storeOpts.OnAppend, if set, is called first.
//
// A nacked message is redelivered until it is acked, as Watermill expects
// of a Pub/Sub (its PoisonQueue middleware is the dead-letter policy):
// with neither popOpts.MaxAttempts nor popOpts.DeadLetter set, OpenBackend
// opens the core with brokercore.Options.NoDeadLetters. Set MaxAttempts to have messages
// delivered that many times moved to brokercore's dead-letter topic
// (brokercore.DeadLetterTopic(group)) instead.
func OpenBackend(dir string, storeOpts store.Options, popOpts pop.Options) (*Backend, error) {
	var opts bc.Options
	opts.NoDeadLetters = popOpts.MaxAttempts == 0 && popOpts.DeadLetter == nil
	opts.Store = storeOpts
	opts.Pop = popOpts
	opts.Offset.Logger = popOpts.Logger
	core, err := bc.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("brokercore watermill: open %q: %w", dir, err)
	}
	b := &Backend{Store: core.Store(), Pop: core.Pop(), Broker: core}
	if popOpts.Offsets == nil {
		b.Offsets = core.Offsets()
	}
	return b, nil
}

// Close closes the broker core: the pop service (ending its long polls),
// the offset file (writing it) and the store. It is idempotent: later calls
// return the first call's result.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.Broker.Close() })
	return b.closeErr
}

// sharedBackend is a Backend opened by a constructor from Config.Dir and
// closed when the last of its users (a Publisher, a Subscriber, or the pair
// from NewPubSub) releases it.
type sharedBackend struct {
	*Backend
	refs atomic.Int32
}

// release drops one reference; the last one closes the Backend.
func (s *sharedBackend) release() error {
	if s == nil {
		return nil
	}
	if s.refs.Add(-1) == 0 {
		return s.Close()
	}
	return nil
}

// resolve returns the store and pop service cfg names, opening Dir if needed
// with refs references on it (the caller releases them). cfg must have been
// through withDefaults.
func resolve(cfg Config, refs int32) (*store.Store, *pop.Service, *sharedBackend, error) {
	if cfg.Store != nil {
		return cfg.Store, cfg.Pop, nil, nil
	}
	so, po := cfg.StoreOptions, cfg.PopOptions
	if so.Logger == nil {
		so.Logger = SlogLogger(cfg.Logger).With("component", "store")
	}
	if po.Logger == nil {
		po.Logger = SlogLogger(cfg.Logger).With("component", "pop")
	}
	po = popOptionsFor(cfg, po)
	b, err := OpenBackend(cfg.Dir, so, po)
	if err != nil {
		return nil, nil, nil, err
	}
	sb := &sharedBackend{Backend: b}
	sb.refs.Store(refs)
	return b.Store, b.Pop, sb, nil
}

// popOptionsFor lowers the pop service's MinInvisible clamp (default
// pop.DefaultMinInvisible, one second) when cfg asks for a shorter nack delay,
// so that a nack, and the hand-back of unacked messages on Close, take effect
// as soon as cfg says instead of after the clamp. An explicit
// PopOptions.MinInvisible is kept.
func popOptionsFor(cfg Config, po pop.Options) pop.Options {
	if po.MinInvisible <= 0 && cfg.NackDelay < pop.DefaultMinInvisible {
		po.MinInvisible = max(cfg.NackDelay, minHandBack)
	}
	return po
}

// minHandBack is the invisible time given to a message handed back (nacked
// with a zero delay, or unacked on Close): pop treats a zero duration as "use
// the clamp", so the adapter asks for the shortest positive one it allows.
const minHandBack = time.Millisecond
