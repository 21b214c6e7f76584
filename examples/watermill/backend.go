package brokercore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Backend is one store and one pop service over it, wired so that every
// append wakes the pop service's long polls at once, with the groups'
// committed offsets persisted next to the log. Publishers and subscribers over
// the same Backend (Config.Store and Config.Pop) share its messages, consumer
// groups and in-flight state.
type Backend struct {
	Store *store.Store
	Pop   *pop.Service
	// Offsets is the offset file OpenBackend opened for Pop, or nil when the
	// caller passed its own pop.Options.Offsets.
	Offsets *offset.Manager

	closeOnce sync.Once
	closeErr  error
}

// Layout of a Backend's directory.
const (
	// LogDir is the store's directory inside a Backend's directory.
	LogDir = "log"
	// OffsetsFile is the committed-offset file (an offset.Manager) inside a
	// Backend's directory.
	OffsetsFile = "offsets"
)

// OpenBackend opens the store in dir/LogDir and creates the pop service over
// it, committing the groups' offsets to dir/OffsetsFile unless
// popOpts.Offsets is set (so a group resumes where it was after a restart).
//
// The store has to exist before the service (the service reads from it), yet
// the store's OnAppend hook must reach the service: the hook goes through a
// pointer that is set once the service exists. Until then nobody can be
// waiting on the service, so an arrival that finds it unset wakes nobody and
// loses nothing. storeOpts.OnAppend, if set, is called first.
func OpenBackend(dir string, storeOpts store.Options, popOpts pop.Options) (*Backend, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("brokercore watermill: %w", err)
	}
	var arrived atomic.Pointer[pop.Service]
	userHook := storeOpts.OnAppend
	storeOpts.OnAppend = func(topic string, queueID int, next int64) {
		if userHook != nil {
			userHook(topic, queueID, next)
		}
		if svc := arrived.Load(); svc != nil {
			svc.Arrived(topic, queueID)
		}
	}
	st, err := store.Open(filepath.Join(dir, LogDir), storeOpts)
	if err != nil {
		return nil, fmt.Errorf("brokercore watermill: open store in %q: %w", dir, err)
	}
	var offs *offset.Manager
	if popOpts.Offsets == nil {
		offs, err = offset.Open(offset.Options{Path: filepath.Join(dir, OffsetsFile), Logger: popOpts.Logger})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("brokercore watermill: open offsets in %q: %w", dir, err), st.Close())
		}
		popOpts.Offsets = offs
	}
	svc := pop.New(st, popOpts)
	arrived.Store(svc)
	return &Backend{Store: st, Pop: svc, Offsets: offs}, nil
}

// Close closes the pop service (ending its long polls), then the offset
// file (writing it) and the store. It is idempotent: later calls return the
// first call's result.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		errs := []error{b.Pop.Close()}
		if b.Offsets != nil {
			errs = append(errs, b.Offsets.Close())
		}
		b.closeErr = errors.Join(append(errs, b.Store.Close())...)
	})
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
