// Package server composes the RocketMQ-compatible program: it opens the
// broker core, starts the name server and broker listeners (remoting
// protocol), the metrics and admin HTTP endpoint, and any extra protocol
// listener, and closes them all in reverse order.
//
// # Adding a protocol listener (the gRPC engineer's hook)
//
// Set Config.GRPCAddr and Config.GRPC. Start calls Config.GRPC(s, addr) once
// the core is open, the topic table loaded and the remoting listeners are
// up, so the listener can use s.Core(), s.Topics(), s.Logger() and
// s.BrokerAddr(). The Service it returns is closed by Close before the
// remoting listeners and the core. s.GRPCAddr() reports Service.Addr().
// main.go sets Config.GRPC to the gRPC package's constructor; rmqtest does
// the same, so tests get the gRPC endpoint too. Nothing in this package
// imports the gRPC package.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/meta"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/namesrv"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

// Defaults of Config.
const (
	DefaultNameSrvAddr = "127.0.0.1:9876"
	DefaultBrokerAddr  = "127.0.0.1:10911"
	DefaultMetricsAddr = "127.0.0.1:9100"
	DefaultQueueNums   = 4
)

// Service is an extra protocol listener started by Config.GRPC.
type Service interface {
	Addr() string
	Close() error
}

// Config configures a Server. Zero values are working defaults except Dir,
// which is required.
type Config struct {
	// Dir holds the data: the core under Dir, the topic table in
	// Dir/topics.json.
	Dir string
	// NameSrvAddr and BrokerAddr are the listen addresses (defaults
	// DefaultNameSrvAddr, DefaultBrokerAddr); port 0 picks a free port.
	NameSrvAddr, BrokerAddr string
	// MetricsAddr serves /metrics and /admin/ (default DefaultMetricsAddr;
	// "-" turns it off).
	MetricsAddr string
	// GRPCAddr and GRPC: see the package doc. GRPC nil = no gRPC listener.
	GRPCAddr string
	GRPC     func(s *Server, addr string) (Service, error)
	// QueueNums is the queue count of auto-created topics (default 4).
	QueueNums int
	// NoAutoCreate: route lookups of unknown topics answer TOPIC_NOT_EXIST
	// (producers then create topics through TBW102 on their first send).
	NoAutoCreate bool
	// LockMaxLiveTime is the orderly queue lock's lease (default
	// lock.DefaultMaxLiveTime, 60 s, Apache's lockMaxLiveTime).
	LockMaxLiveTime time.Duration
	// Flush is the store's durability: "sync" (default: a send is answered
	// after its fsync, shared by concurrent sends — group commit) or "async"
	// (Apache RocketMQ's default ASYNC_FLUSH: answered once written to the
	// log file, fsynced every second; a process crash loses nothing, a
	// machine crash up to a second).
	Flush string
	// DelayLevels overrides the scheduler's levels ("" = RocketMQ's 18).
	DelayLevels string
	// ResetNotifyDelay: see broker.BrokerOptions.
	ResetNotifyDelay time.Duration
	// Core is passed to brokercore.Open (advanced; Logger and the fields
	// set above win over it).
	Core brokercore.Options
	// Logger receives every component's lines (nil = discard).
	Logger *slog.Logger
	// ACL, if set, is the access control of every listener: remoting and
	// gRPC requests are authenticated and authorized, admin calls and
	// /metrics need HTTP Basic credentials (see auth.go). Nil = off, and
	// then every listen address must be loopback unless
	// InsecureAllowRemote.
	ACL *acl.Authorizer
	// ACLFile is the file ACL was loaded from: Apache's user and ACL admin
	// requests (createUser, createAcl, …) write their changes there
	// ("" = in memory only). See authadmin.go.
	ACLFile             string
	InsecureAllowRemote bool
	// PublicMetrics serves /metrics without credentials while ACL is on.
	PublicMetrics bool
}

// Server is the running program.
type Server struct {
	cfg     Config
	log     *slog.Logger
	core    *brokercore.Broker
	topics  *broker.Topics
	broker  *broker.Broker
	nsrv    *transport.Server
	bsrv    *transport.Server
	nsAddr  string
	brAddr  string
	http    *http.Server
	httpLn  net.Listener
	grpc    Service
	unhook  []func()
	wg      sync.WaitGroup
	once    sync.Once
	closeEr error

	// groups and topicConfigs: the admin tables (admin.go).
	groups       *meta.Groups
	topicConfigs *meta.Topics
}

// Start opens the core and starts every listener. On error everything
// started is closed again.
func Start(cfg Config) (s *Server, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	s = &Server{cfg: cfg, log: cfg.Logger}
	defer func() {
		if err != nil {
			s.Close()
			s = nil
		}
	}()
	bl, err := net.Listen("tcp", cfg.BrokerAddr)
	if err != nil {
		return s, fmt.Errorf("broker listener: %w", err)
	}
	nl, err := net.Listen("tcp", cfg.NameSrvAddr)
	if err != nil {
		bl.Close()
		return s, fmt.Errorf("name server listener: %w", err)
	}
	s.brAddr, s.nsAddr = advertise(bl.Addr()), advertise(nl.Addr())
	if err := s.open(); err != nil {
		bl.Close()
		nl.Close()
		return s, err
	}
	s.serve(s.nsrv, nl)
	s.serve(s.bsrv, bl)
	if cfg.MetricsAddr != "-" {
		if err := s.startHTTP(); err != nil {
			return s, err
		}
	}
	if cfg.GRPC != nil {
		if s.grpc, err = cfg.GRPC(s, cfg.GRPCAddr); err != nil {
			return s, fmt.Errorf("grpc listener: %w", err)
		}
	}
	s.startTransactions() // server/txn.go
	s.log.Info("rocketmq broker started", "namesrv", s.nsAddr, "broker", s.brAddr, "metrics", s.MetricsAddr(),
		"grpc", s.GRPCAddr(), "dir", cfg.Dir)
	return s, nil
}

func (cfg Config) withDefaults() (Config, error) {
	if cfg.Dir == "" {
		return cfg, errors.New("server: Config.Dir is required")
	}
	if cfg.NameSrvAddr == "" {
		cfg.NameSrvAddr = DefaultNameSrvAddr
	}
	if cfg.BrokerAddr == "" {
		cfg.BrokerAddr = DefaultBrokerAddr
	}
	if cfg.MetricsAddr == "" {
		cfg.MetricsAddr = DefaultMetricsAddr
	}
	if cfg.QueueNums <= 0 {
		cfg.QueueNums = DefaultQueueNums
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch cfg.Flush {
	case "", "sync", "async":
	default:
		return cfg, fmt.Errorf("server: Flush %q: want sync or async", cfg.Flush)
	}
	return cfg, cfg.checkListen()
}

// open opens the topic table, the core and the handlers.
func (s *Server) open() (err error) {
	cfg := s.cfg
	if s.topics, err = broker.OpenTopics(filepath.Join(cfg.Dir, "topics.json"), cfg.QueueNums); err != nil {
		return err
	}
	if s.core, err = brokercore.Open(cfg.Dir, coreOptions(cfg)); err != nil {
		return err
	}
	if err := s.openMeta(); err != nil { // admin.go
		return err
	}
	s.broker = broker.NewBroker(s.core, s.topics, broker.BrokerOptions{Addr: s.brAddr,
		ResetNotifyDelay: cfg.ResetNotifyDelay, AsyncFlush: cfg.Flush == "async", Logger: cfg.Logger,
		Groups: s.groups, TopicConfigs: s.topicConfigs})
	// The registry's and the lock table's events reach the broker through
	// the core's hooks after Open; an offset reset wakes the remoting
	// pulls through the core's Arrivals, which Open already wakes.
	s.unhook = append(s.unhook, s.core.OnConsumerEvent(s.broker.OnConsumerEvent), s.core.OnLockEvent(s.broker.OnLockEvent))
	ns := namesrv.NewNameServer(s.topics, namesrv.NameServerOptions{BrokerAddr: s.brAddr,
		NoAutoCreate: cfg.NoAutoCreate, Logger: cfg.Logger, TopicConfig: s.routeConfig})
	s.nsrv = transport.NewServer(s.guard(ns, "namesrv"), transport.ServerOptions{Name: "namesrv", Logger: cfg.Logger})
	s.bsrv = transport.NewServer(s.guard(s.authAdmin(s.broker), "broker"), transport.ServerOptions{Name: "broker", Logger: cfg.Logger})
	return nil
}

// coreOptions are brokercore.Open's options for cfg.
func coreOptions(cfg Config) brokercore.Options {
	co := cfg.Core
	co.Logger = cfg.Logger
	if cfg.LockMaxLiveTime > 0 {
		co.Lock.MaxLiveTime = cfg.LockMaxLiveTime
	}
	if cfg.Flush == "async" {
		co.Store.Sync = store.SyncInterval
	}
	if co.Store.KeyProperties == nil {
		// QUERY_MESSAGE by message id (queryMsgById with -t, the v2
		// client's unique-key query) looks the id up in the key index.
		co.Store.KeyProperties = []string{wire.PropUniqKey}
	}
	if cfg.DelayLevels != "" {
		co.Schedule.Levels = cfg.DelayLevels
	}
	if co.LockSweepEvery == 0 {
		// Expired leases are swept (and their group told) within a second:
		// handover of an orderly queue follows the lease closely.
		co.LockSweepEvery = time.Second
	}
	return co
}

func (s *Server) serve(rs *transport.Server, l net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := rs.Serve(l); err != nil && !errors.Is(err, transport.ErrServerClosed) {
			s.log.Error("listener stopped", "addr", l.Addr().String(), "err", err)
		}
	}()
}

// advertise turns a listener address into one a client can dial.
func advertise(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := ta.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(ta.Port))
}

// Close stops the listeners (extra protocol first), the broker and the
// core, and waits for every goroutine. Idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		var errs []error
		if s.grpc != nil {
			errs = append(errs, s.grpc.Close())
		}
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			errs = append(errs, s.http.Shutdown(ctx))
			cancel()
		}
		if s.nsrv != nil {
			errs = append(errs, s.nsrv.Close())
		}
		if s.bsrv != nil {
			errs = append(errs, s.bsrv.Close())
		}
		s.wg.Wait()
		for _, remove := range s.unhook {
			remove()
		}
		if s.broker != nil {
			errs = append(errs, s.broker.Close())
		}
		if s.core != nil {
			errs = append(errs, s.core.Close())
		}
		s.closeEr = errors.Join(errs...)
		s.log.Info("rocketmq broker stopped", "err", s.closeEr)
	})
	return s.closeEr
}

// Core is the broker core (brokercore.Open).
func (s *Server) Core() *brokercore.Broker { return s.core }

// Topics is the topic table shared by the name server and the broker.
func (s *Server) Topics() *broker.Topics { return s.topics }

// Broker is the remoting broker handler.
func (s *Server) Broker() *broker.Broker { return s.broker }

// Logger is the program's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// NameSrvAddr is the name server's address (127.0.0.1:port).
func (s *Server) NameSrvAddr() string { return s.nsAddr }

// BrokerAddr is the broker's advertised address.
func (s *Server) BrokerAddr() string { return s.brAddr }

// MetricsAddr is the metrics/admin HTTP address, "" when off.
func (s *Server) MetricsAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return advertise(s.httpLn.Addr())
}

// GRPCAddr is the extra listener's address, "" when none.
func (s *Server) GRPCAddr() string {
	if s.grpc == nil {
		return ""
	}
	return s.grpc.Addr()
}
