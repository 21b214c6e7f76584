package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
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
	DataDir string // brokercore.Open's directory: store, offsets, schedule progress, handle key
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
	// OffsetFallback starts from the offsets file's backup (logged) when
	// the offsets file is corrupt; without it such a start fails, so
	// offsets are never silently reset.
	OffsetFallback bool
	// Tick is the scheduler's due-time re-check period and the transaction
	// manager's check round period (0 = their defaults).
	Tick time.Duration
	// Now is handed to every package (nil = time.Now); tests move it.
	Now    func() time.Time
	Logger *slog.Logger
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

// Broker serves one brokercore.Broker (every package, composed by
// brokercore.Open) behind an HTTP API. Create it with newBroker, serve
// Handler (or NewServer), and Close it once the server has stopped.
type Broker struct {
	cfg    Config
	log    *slog.Logger
	levels []time.Duration // the schedule levels, for validation and deliverAt
	core   *brokercore.Broker

	// The core's pieces, for the handlers.
	store     *store.Store
	pop       *pop.Service
	locks     *lock.Table
	sched     *schedule.Scheduler
	consumers *consumer.Registry
	offsets   *offset.Manager
	txns      *txn.Manager
	checks    *checkHub // the txn.Checker: check-backs long-polled by producers

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

// newBroker opens (or creates) the data directory with brokercore.Open:
// the store, offsets, pop (woken by arrivals, signing handles with the key
// kept in the directory), the started scheduler, the lock table and the
// consumer registry, swept and scanned every Config.Housekeep.
func newBroker(cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	policy, err := syncPolicy(cfg.Sync)
	if err != nil {
		return nil, err
	}
	levels, err := schedule.ParseLevels(cfg.Levels)
	if err != nil {
		return nil, err
	}
	var opts brokercore.Options
	opts.Store.Sync = policy
	opts.Schedule.Levels = cfg.Levels
	opts.Schedule.Tick = cfg.Tick
	opts.Offset.FallbackToBackup = cfg.OffsetFallback
	opts.LockSweepEvery = cfg.Housekeep
	opts.ConsumerScanEvery = cfg.Housekeep
	opts.Now = cfg.Now
	opts.Logger = cfg.Logger
	checks := newCheckHub(cfg.Now)
	opts.Txn.Checker = checks
	opts.Txn.Tick = cfg.Tick
	core, err := brokercore.Open(cfg.DataDir, opts)
	if err != nil {
		return nil, err
	}
	b := &Broker{
		cfg:       cfg,
		log:       cfg.Logger,
		levels:    levels,
		core:      core,
		store:     core.Store(),
		pop:       core.Pop(),
		locks:     core.Locks(),
		sched:     core.Scheduler(),
		consumers: core.Consumers(),
		offsets:   core.Offsets(),
		txns:      core.Transactions(),
		checks:    checks,
	}
	b.pollCtx, b.stopPolls = context.WithCancel(context.Background())
	return b, nil
}

// wakePolls ends every long poll: the broker-wide poll context is cancelled
// and the pop service closed. It is safe to call more than once.
func (b *Broker) wakePolls() {
	b.wakeOnce.Do(func() {
		b.stopPolls()
		b.popErr = b.pop.Close()
	})
}

// Close wakes the long polls, then closes the core (brokercore.Broker.Close:
// the scheduler generation stops with in-flight deliveries finished and
// recorded, offsets are flushed, the store closes last). Call it after the
// HTTP server has stopped; it is idempotent.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.wakePolls()
		b.closeErr = errors.Join(wrap("pop close", b.popErr), b.core.Close())
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
