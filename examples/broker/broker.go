package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/internal/fsx"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// Defaults of Config. The zero Config is a working broker on these.
const (
	DefaultAddr      = "127.0.0.1:8080"
	DefaultDataDir   = "./brokercore-data"
	DefaultSync      = "group"
	DefaultName      = "broker-a"
	DefaultMaxBody   = 8 << 20 // a batch of a couple of 4 MiB messages, base64 aside
	DefaultMaxPoll   = 30 * time.Second
	DefaultHousekeep = 10 * time.Second
	// DefaultWriteTimeout bounds writing an answer; a long poll adds its
	// Poll to it.
	DefaultWriteTimeout = 30 * time.Second
)

// Config is what the broker is started with; main fills it from flags.
type Config struct {
	Addr    string // listen address (main only)
	DataDir string // log, offsets and schedule progress live here
	Sync    string // "group" (default), "interval" or "none": store.Options.Sync
	Name    string // broker name used in lock.Queue when a client leaves it out
	Levels  string // schedule delay levels; "" = schedule.DefaultLevels
	MaxBody int64  // request body limit in bytes
	MaxPoll time.Duration
	// WriteTimeout is the server's per-answer write timeout.
	WriteTimeout time.Duration
	// Housekeep is how often silent consumer channels expire and expired
	// queue leases are swept.
	Housekeep time.Duration
	// OffsetFallback starts from offsets.json.bak (logged) when
	// offsets.json is corrupt; without it such a start fails, so offsets
	// are never silently reset.
	OffsetFallback bool
	// Tick is the scheduler's due-time re-check period (0 = its default).
	Tick time.Duration
	// Now is handed to every package (nil = time.Now); tests move it.
	Now    func() time.Time
	Logger *slog.Logger

	fsys fsx.FS // the handle key's file system (nil = fsx.OS); tests inject faults
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Sync == "" {
		c.Sync = DefaultSync
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Levels == "" {
		c.Levels = schedule.DefaultLevels
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxPoll <= 0 {
		c.MaxPoll = DefaultMaxPoll
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Housekeep <= 0 {
		c.Housekeep = DefaultHousekeep
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Broker composes every brokercore package behind one HTTP API. Create it
// with newBroker, serve Handler (or NewServer), and Close it once the server
// has stopped.
type Broker struct {
	cfg       Config
	log       *slog.Logger
	levels    []time.Duration // the schedule levels, for validation and deliverAt
	store     *store.Store
	pop       *pop.Service
	locks     *lock.Table
	sched     *schedule.Scheduler
	consumers *consumer.Registry
	offsets   *offset.Manager

	// popRef is what the store's OnAppend hook calls: the store is opened
	// before the pop service that reads from it exists.
	popRef atomic.Pointer[pop.Service]

	// pollCtx ends every pop in flight when the broker shuts down, on top
	// of pop.Close, so no long poll can hold the HTTP shutdown.
	pollCtx   context.Context
	stopPolls context.CancelFunc
	wakeOnce  sync.Once
	popErr    error

	connSeq   atomic.Uint64
	connIDs   sync.Map // net.Conn -> channel id
	channels  sync.Map // channel id -> struct{}: connections that sent a heartbeat
	httpStats httpStats

	stopHK    chan struct{}
	hkDone    chan struct{}
	closeOnce sync.Once
	closeErr  error
}

func syncPolicy(name string) (store.SyncPolicy, error) {
	switch name {
	case "group":
		return store.SyncGroup, nil
	case "interval":
		return store.SyncInterval, nil
	case "none":
		return store.SyncNone, nil
	}
	return 0, fmt.Errorf("sync %q: want group, interval or none", name)
}

// newBroker opens (or creates) the data directory and starts every piece:
// offsets, store (with OnAppend wired to pop.Arrived), pop, the scheduler
// (its Log is the store), the consumer registry and the lock table.
func newBroker(cfg Config) (_ *Broker, err error) {
	cfg = cfg.withDefaults()
	policy, err := syncPolicy(cfg.Sync)
	if err != nil {
		return nil, err
	}
	levels, err := schedule.ParseLevels(cfg.Levels)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	b := &Broker{
		cfg:    cfg,
		log:    cfg.Logger,
		levels: levels,
		stopHK: make(chan struct{}),
		hkDone: make(chan struct{}),
	}
	b.pollCtx, b.stopPolls = context.WithCancel(context.Background())
	var closers []func() error
	defer func() {
		if err != nil {
			b.stopPolls()
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()

	b.offsets, err = offset.Open(offset.Options{
		Path:             filepath.Join(cfg.DataDir, "offsets.json"),
		FallbackToBackup: cfg.OffsetFallback,
		Now:              cfg.Now,
		Logger:           cfg.Logger.With("pkg", "offset"),
	})
	if err != nil {
		return nil, fmt.Errorf("offsets: %w", err)
	}
	closers = append(closers, b.offsets.Close)

	b.store, err = store.Open(filepath.Join(cfg.DataDir, "log"), store.Options{
		Sync:     policy,
		Now:      cfg.Now,
		Logger:   cfg.Logger.With("pkg", "store"),
		OnAppend: b.arrived,
	})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	closers = append(closers, b.store.Close)

	key, err := handleKey(cfg.fsys, filepath.Join(cfg.DataDir, "handle.key"))
	if err != nil {
		return nil, err
	}
	b.pop = pop.New(b.store, pop.Options{
		Offsets:   b.offsets,
		HandleKey: key,
		Now:       cfg.Now,
		Logger:    cfg.Logger.With("pkg", "pop"),
	})
	b.popRef.Store(b.pop)
	closers = append(closers, b.pop.Close)

	b.sched, err = schedule.New(b.store, schedule.Options{
		Levels:       cfg.Levels,
		ProgressPath: filepath.Join(cfg.DataDir, "schedule-progress.json"),
		Now:          cfg.Now,
		Tick:         cfg.Tick,
		Logger:       cfg.Logger.With("pkg", "schedule"),
	})
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if err := b.sched.Start(); err != nil {
		return nil, fmt.Errorf("scheduler start: %w", err)
	}
	closers = append(closers, b.sched.Stop)

	b.consumers = consumer.New(consumer.Options{
		Now:    cfg.Now,
		Logger: cfg.Logger.With("pkg", "consumer"),
	})
	b.locks = lock.New(lock.Options{
		// Fencing tokens must keep growing across a restart of the
		// broker, and the table lives in memory: starting above the
		// wall clock in nanoseconds is above any token an earlier run
		// could have issued (one per ownership change).
		TokenBase: uint64(time.Now().UnixNano()),
		Now:       cfg.Now,
		Logger:    cfg.Logger.With("pkg", "lock"),
	})
	go b.housekeep()
	return b, nil
}

// handleKeySize is the length of the key that signs receipt handles.
const handleKeySize = 32

// errBadHandleKey: the handle key file exists but is not a key. The broker
// refuses to start rather than replace it, which would turn every handle
// in flight into a forgery.
var errBadHandleKey = errors.New("handle key file is damaged")

// handleKey loads the key that signs receipt handles, creating it on first
// start (atomically and fsynced, through fsx.WriteFile). A key kept across
// restarts lets a handle from before a restart be recognised as stale
// (409) rather than forged (404).
func handleKey(fsys fsx.FS, path string) ([]byte, error) {
	key, err := fsx.ReadFile(fsys, path)
	switch {
	case err == nil && len(key) == handleKeySize:
		return key, nil
	case err == nil:
		return nil, fmt.Errorf("%w: %s holds %d bytes, want %d; restore it from a backup, or remove it to start with a new key "+
			"(every receipt handle issued before then is refused as forged)", errBadHandleKey, path, len(key), handleKeySize)
	case !fsx.IsNotExist(err):
		return nil, fmt.Errorf("handle key: %w", err)
	}
	key = make([]byte, handleKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("handle key: %w", err)
	}
	if err := fsx.WriteFile(fsys, path, key, 0o600); err != nil {
		return nil, fmt.Errorf("handle key %s: %w", path, err)
	}
	return key, nil
}

// arrived is store.Options.OnAppend: new records wake long polls.
func (b *Broker) arrived(topic string, queueID int, _ int64) {
	if p := b.popRef.Load(); p != nil {
		p.Arrived(topic, queueID)
	}
}

// housekeep expires silent consumer channels and sweeps expired leases;
// Close stops it and waits.
func (b *Broker) housekeep() {
	defer close(b.hkDone)
	t := time.NewTicker(b.cfg.Housekeep)
	defer t.Stop()
	for {
		select {
		case <-b.stopHK:
			return
		case <-t.C:
			if n := b.consumers.Scan(); n > 0 {
				b.log.Info("expired silent consumers", "registrations", n)
			}
			if n := b.locks.Sweep(); n > 0 {
				b.log.Info("swept expired queue leases", "leases", n)
			}
		}
	}
}

// wakePolls ends every long poll: the broker-wide poll context is cancelled
// and the pop service closed. It is safe to call more than once.
func (b *Broker) wakePolls() {
	b.wakeOnce.Do(func() {
		b.stopPolls()
		b.popErr = b.pop.Close()
	})
}

// Close shuts the pieces down in dependency order: long polls are woken and
// pop closed, the scheduler generation stopped (in-flight deliveries
// finish and record progress), offsets flushed and closed, the store closed
// last. Call it after the HTTP server has stopped; it is idempotent.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.wakePolls()
		close(b.stopHK)
		<-b.hkDone
		var errs []error
		errs = append(errs, wrap("pop close", b.popErr))
		errs = append(errs, wrap("scheduler stop", b.sched.Stop()))
		errs = append(errs, wrap("offsets flush", b.offsets.Flush()))
		errs = append(errs, wrap("offsets close", b.offsets.Close()))
		errs = append(errs, wrap("store close", b.store.Close()))
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Shutdown stops srv in the order the broker needs: the listeners close
// (no new connections), long polls wake (RegisterOnShutdown in NewServer),
// in-flight requests finish, then the broker itself closes.
func (b *Broker) Shutdown(ctx context.Context, srv *http.Server) error {
	err := srv.Shutdown(ctx)
	if err != nil {
		// The deadline passed with requests still running: cut them off.
		err = errors.Join(err, srv.Close())
	}
	return errors.Join(err, b.Close())
}

type chanKey struct{}

// connContext gives every connection a channel id; a heartbeat on that
// connection registers the consumer under it.
func (b *Broker) connContext(ctx context.Context, c net.Conn) context.Context {
	id := fmt.Sprintf("%s/%d", c.RemoteAddr(), b.connSeq.Add(1))
	b.connIDs.Store(c, id)
	return context.WithValue(ctx, chanKey{}, id)
}

// connState is the fast path of the consumer registry: a connection that
// carried a heartbeat and closes removes its consumers at once.
func (b *Broker) connState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		b.httpStats.OpenConns.Add(1)
	case http.StateClosed, http.StateHijacked:
		b.httpStats.OpenConns.Add(-1)
		v, ok := b.connIDs.LoadAndDelete(c)
		if !ok {
			return
		}
		id := v.(string)
		if _, hb := b.channels.LoadAndDelete(id); !hb {
			return
		}
		b.httpStats.ClosedChans.Add(1)
		groups := b.consumers.ChannelClosed(id)
		b.log.Info("consumer channel closed", "channel", id, "groups", groups)
	}
}

// channelOf returns the connection's channel id. A request served without
// NewServer (a bare Handler in a test) falls back to its remote address;
// such a channel only leaves the registry through expiry.
func channelOf(r *http.Request) string {
	if id, ok := r.Context().Value(chanKey{}).(string); ok {
		return id
	}
	return r.RemoteAddr
}
