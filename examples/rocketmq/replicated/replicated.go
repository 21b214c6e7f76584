package replicated

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/examples/rocketmq/meta"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/namesrv"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
	"github.com/hashicorp/raft"
)

// Defaults of Config.
const (
	DefaultQueueNums       = 4
	DefaultLockSweepEvery  = time.Second
	DefaultConsumerScanEve = 10 * time.Second
)

// Peer is one of the cluster's initial voters.
type Peer struct {
	ID       string // raft server id
	RaftAddr string // its raft address
	// BrokerAddr is its advertised broker address, "" when not known ahead
	// (a leader replicates its own once it leads).
	BrokerAddr string
	// GRPCAddr is its gRPC endpoint's address, "" when it serves none:
	// gRPC routes list every peer's, and followers forward to the
	// leader's (see grpc.go).
	GRPCAddr string
}

// ParsePeers parses "id=raftAddr[@brokerAddr[@grpcAddr]],…" (the
// program's -peers).
func ParsePeers(s string) ([]Peer, error) {
	var ps []Peer
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, rest, ok := strings.Cut(item, "=")
		if !ok || id == "" || rest == "" {
			return nil, fmt.Errorf("peer %q: want id=raftAddr[@brokerAddr[@grpcAddr]]", item)
		}
		raftAddr, rest, _ := strings.Cut(rest, "@")
		brokerAddr, grpcAddr, _ := strings.Cut(rest, "@")
		if raftAddr == "" {
			return nil, fmt.Errorf("peer %q: no raft address", item)
		}
		if strings.Contains(grpcAddr, "@") {
			return nil, fmt.Errorf("peer %q: want id=raftAddr[@brokerAddr[@grpcAddr]]", item)
		}
		ps = append(ps, Peer{ID: id, RaftAddr: raftAddr, BrokerAddr: brokerAddr, GRPCAddr: grpcAddr})
	}
	return ps, nil
}

// Config configures one node. Dir, ID and RaftAddr (or Transport) are
// required.
type Config struct {
	// Dir holds the replica (Dir/replica) and the topic table
	// (Dir/topics.json).
	Dir string
	// NameSrvAddr and BrokerAddr are the listen addresses; port 0 picks a
	// free port. The broker's is advertised in routes and replicated.
	NameSrvAddr, BrokerAddr string
	// GRPCAddr is the gRPC endpoint's listen address (RocketMQ 5's
	// clients, TLS and plaintext on one port); "" = none. Give it in every
	// peer's Peer.GRPCAddr as well: routes name the peers' addresses.
	GRPCAddr string
	// GRPCLongPolling is the v5 push consumers' long-polling time
	// (grpcapi.Options.LongPolling; 0 = grpcapi's default).
	GRPCLongPolling time.Duration
	// ID is the node's raft id; RaftAddr the address raft listens on.
	ID, RaftAddr string
	// Transport replaces raft's TCP transport (the caller closes it after
	// Close).
	Transport raft.Transport
	// Peers are the initial voters, this node among them; with Bootstrap
	// a node with no raft state yet starts the cluster from them (give
	// every initial node the same Peers and Bootstrap).
	Peers     []Peer
	Bootstrap bool

	QueueNums    int  // queues of an auto-created topic (default 4)
	NoAutoCreate bool // see namesrv.NameServerOptions
	DelayLevels  string
	// LockMaxLiveTime is the orderly lock lease (default lock's).
	LockMaxLiveTime  time.Duration
	ResetNotifyDelay time.Duration
	// HeartbeatTimeout and ElectionTimeout are raft's (0 = replica's
	// defaults, 1 s each).
	HeartbeatTimeout, ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader leads without hearing from a
	// quorum (0 = replica's default: 500 ms, at most 9/10 of
	// HeartbeatTimeout). Longer rides out a machine's stalls without an
	// election; shorter lets a cut-off leader stop refusing sooner.
	LeaderLeaseTimeout time.Duration
	Logger             *slog.Logger
	// Txn configures the transactions the leader runs (txn.go; nil =
	// txn's defaults): check timing and limits. Its Checker defaults to
	// the node's protocols, its ProgressPath to Dir/txn-progress; its Now
	// is Now.
	Txn *txn.Options `json:"-"`
	// Now is the replica's clock (replica.Config.Now: message timestamps,
	// the scheduler, the transactions' due times); nil = time.Now.
	Now func() time.Time `json:"-"`

	// ClusterSecret (at least replica.MinSecretLen bytes, the same on
	// every node) authenticates the raft port (replica.Config.ClusterSecret;
	// a caller's Transport is the caller's to authenticate) and keys the
	// marks of the requests followers forward (acl.go). ACL needs it.
	ClusterSecret []byte
	// InsecureRaft allows a RaftAddr beyond loopback without a
	// ClusterSecret (replica.Config.InsecureRaft).
	InsecureRaft bool
	// ACL, if set, is every listener's access control, as a single
	// broker's (server.Config.ACL): give every node the same rules.
	// ACLFile is the file they were loaded from, which the replicated
	// AUTH_* edits rewrite on every node ("" = in memory only).
	ACL     *acl.Authorizer
	ACLFile string
	// MetricsAddr is the metrics and admin HTTP endpoint's listen address
	// ("" = none; http.go): the node's own metrics, the replicated offsets,
	// and resets through raft on the leader. With ACL on it needs HTTP
	// Basic credentials, as a single broker's; PublicMetrics serves
	// /metrics without them.
	MetricsAddr   string
	PublicMetrics bool
}

// Server is one running node.
type Server struct {
	cfg    Config
	log    *slog.Logger
	node   *replica.Node
	core   *core
	topics *broker.Topics
	broker *broker.Broker
	nsrv   *transport.Server
	bsrv   *transport.Server
	nsAddr string
	brAddr string
	fwd    *forwarder

	groups       *meta.Groups
	topicConfigs *meta.Topics
	tables       *tables
	untables     func()
	untopics     func()    // learnTopic's hook (topics.go)
	live         livePeers // the leader's contacts, on a follower (peers.go)

	grpcLn   net.Listener
	grpcAddr string
	httpLn   net.Listener
	httpAddr string
	http     *http.Server // http.go
	grpc     *grpcapi.Server
	gfwd     *gforward
	gate     *gate // forwarded marks, with ACL on (acl.go)

	checker txnChecker // the leader's check-backs (txn.go)
	relay   *relay     // and those of producers on followers (relay.go)

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

// Start opens the node's replica and starts its name server and broker.
func Start(cfg Config) (s *Server, err error) {
	if cfg.Dir == "" || cfg.ID == "" || (cfg.RaftAddr == "" && cfg.Transport == nil) {
		return nil, errors.New("replicated: Dir, ID and RaftAddr (or Transport) are required")
	}
	if cfg.DelayLevels != "" {
		// Checked here: a replica with bad levels would never start its
		// leader services, so the cluster would elect no usable leader.
		if _, err := schedule.ParseLevels(cfg.DelayLevels); err != nil {
			return nil, fmt.Errorf("replicated: delay levels: %w", err)
		}
	}
	if cfg.ACL != nil && len(cfg.ClusterSecret) < replica.MinSecretLen {
		// Without it, anyone who reaches the raft port could append entries
		// (rules included), and forwarded requests could not be told apart.
		return nil, fmt.Errorf("replicated: ACL needs a cluster secret of at least %d bytes", replica.MinSecretLen)
	}
	if cfg.QueueNums <= 0 {
		cfg.QueueNums = DefaultQueueNums
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s = &Server{cfg: cfg, log: cfg.Logger.With("node", cfg.ID), stop: make(chan struct{})}
	bl, err := net.Listen("tcp", orDefault(cfg.BrokerAddr, "127.0.0.1:0"))
	if err != nil {
		return nil, fmt.Errorf("broker listener: %w", err)
	}
	nl, err := net.Listen("tcp", orDefault(cfg.NameSrvAddr, "127.0.0.1:0"))
	if err != nil {
		bl.Close()
		return nil, fmt.Errorf("name server listener: %w", err)
	}
	s.brAddr, s.nsAddr = advertise(bl.Addr()), advertise(nl.Addr())
	if cfg.GRPCAddr != "" {
		if s.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
			bl.Close()
			nl.Close()
			return nil, fmt.Errorf("grpc listener: %w", err)
		}
		s.grpcAddr = advertise(s.grpcLn.Addr())
	}
	if cfg.MetricsAddr != "" {
		if s.httpLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			bl.Close()
			nl.Close()
			if s.grpcLn != nil {
				s.grpcLn.Close()
			}
			return nil, fmt.Errorf("metrics listener: %w", err)
		}
		s.httpAddr = advertise(s.httpLn.Addr())
	}
	if err := s.open(); err != nil {
		bl.Close()
		nl.Close()
		for _, l := range []net.Listener{s.grpcLn, s.httpLn} {
			if l != nil {
				l.Close()
			}
		}
		s.Close()
		return nil, err
	}
	if s.httpLn != nil {
		s.startHTTP(s.httpLn)
	}
	s.serve(s.nsrv, nl)
	s.serve(s.bsrv, bl)
	s.housekeeping()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.tables.loop(s.stop)
	}()
	go func() {
		defer s.wg.Done()
		s.relay.pollPeers(&s.live, s.stop) // peers.go
	}()
	s.log.Info("replicated rocketmq broker started", "namesrv", s.nsAddr, "broker", s.brAddr, "grpc", s.grpcAddr, "http", s.httpAddr, "raft", cfg.RaftAddr)
	return s, nil
}

func (s *Server) open() (err error) {
	cfg := s.cfg
	rc := replica.Config{ID: cfg.ID, Dir: filepath.Join(cfg.Dir, "replica"), RaftAddr: cfg.RaftAddr,
		Addr: s.brAddr, Transport: cfg.Transport, Levels: cfg.DelayLevels, Logger: cfg.Logger,
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout, LeaderLeaseTimout: cfg.LeaderLeaseTimeout,
		KeyProperties: []string{"UNIQ_KEY"}, // the message id, for QUERY_MESSAGE by unique key
		Now:           cfg.Now, ClusterSecret: cfg.ClusterSecret, InsecureRaft: cfg.InsecureRaft}
	rc.Transactions = s.txnOptions() // txn.go
	if cfg.Bootstrap {
		rc.BootstrapAddrs = map[string]string{}
		for _, p := range cfg.Peers {
			rc.Bootstrap = append(rc.Bootstrap, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
			if p.BrokerAddr != "" {
				rc.BootstrapAddrs[p.ID] = p.BrokerAddr
			}
		}
	}
	if s.node, err = replica.Open(rc); err != nil {
		return err
	}
	if s.topics, err = broker.OpenTopics(filepath.Join(cfg.Dir, "topics.json"), cfg.QueueNums); err != nil {
		return err
	}
	if s.groups, err = meta.OpenGroups(filepath.Join(cfg.Dir, "subscriptionGroup.json")); err != nil {
		return err
	}
	if s.topicConfigs, err = meta.OpenTopics(filepath.Join(cfg.Dir, "topics-config.json")); err != nil {
		return err
	}
	if s.core, err = newCore(s.node, cfg); err != nil {
		return err
	}
	s.broker = broker.NewBroker(s.core, s.topics, broker.BrokerOptions{Addr: s.brAddr,
		ResetNotifyDelay: cfg.ResetNotifyDelay, Writer: writer{s.node}, Logger: cfg.Logger,
		Groups: s.groups, TopicConfigs: s.topicConfigs})
	s.core.late.Store(s.broker)
	s.checker.remoting.Store(s.broker)
	if s.tables, err = newTables(s.node, s.broker, filepath.Join(cfg.Dir, appliedFile), s.log); err != nil {
		return err
	}
	s.tables.auth = s.authService() // nil with ACL off
	s.untables = s.node.Store().Subscribe(s.tables.notify)
	s.untopics = s.node.Store().Subscribe(s.learnTopic)
	s.learnTopics()           // topics.go: what the replica holds already
	s.tables.applyAvailable() // what the replica holds already, before serving
	ns := namesrv.NewNameServer(s.topics, namesrv.NameServerOptions{BrokerAddr: s.brAddr,
		NoAutoCreate: cfg.NoAutoCreate, LeaderAddr: s.node.LeaderAddr, WriteOnly: s.followers, Logger: cfg.Logger,
		TopicConfig: s.routeConfig})
	s.fwd = &forwarder{log: s.log, timeout: DefaultForwardTimeout, idle: map[string][]*fconn{}}
	s.relay = newRelay(cfg.ClusterSecret, cfg.ID, s.brAddr, s.node, s.fwd, s.log)
	s.live.now = time.Now
	s.checker.relay.Store(s.relay)
	h := &handler{b: s.broker, n: s.node, self: s.brAddr, fwd: s.fwd, tables: s.tables, relay: s.relay, stop: s.stop}
	bh, guard := s.setupACL(h)
	s.nsrv = transport.NewServer(guard(ns), transport.ServerOptions{Name: "namesrv", Logger: cfg.Logger})
	s.bsrv = transport.NewServer(bh, transport.ServerOptions{Name: "broker", Logger: cfg.Logger})
	if s.grpcLn != nil {
		return s.startGRPC()
	}
	return nil
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

// housekeeping sweeps the lock table and scans the consumer registry.
func (s *Server) housekeeping() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		sweep := time.NewTicker(DefaultLockSweepEvery)
		defer sweep.Stop()
		scan := time.NewTicker(DefaultConsumerScanEve)
		defer scan.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-sweep.C:
				s.core.locks.Sweep()
			case <-scan.C:
				s.core.consumers.Scan()
			}
		}
	}()
}

// Close stops the listeners, the broker and the replica. Idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		var errs []error
		if s.nsrv != nil {
			errs = append(errs, s.nsrv.Close())
		}
		if s.bsrv != nil {
			errs = append(errs, s.bsrv.Close())
		}
		if s.grpc != nil {
			errs = append(errs, s.grpc.Close())
		}
		if s.http != nil {
			errs = append(errs, s.http.Close())
		}
		close(s.stop)
		s.wg.Wait()
		if s.untables != nil {
			s.untables()
		}
		if s.untopics != nil {
			s.untopics()
		}
		if s.fwd != nil {
			s.fwd.close()
		}
		if s.gfwd != nil {
			s.gfwd.close()
		}
		if s.broker != nil {
			errs = append(errs, s.broker.Close())
		}
		if s.core != nil {
			errs = append(errs, s.core.close())
		}
		if s.node != nil {
			errs = append(errs, s.node.Close())
		}
		s.err = errors.Join(errs...)
		s.log.Info("replicated rocketmq broker stopped", "err", s.err)
	})
	return s.err
}

// routeConfig is a topic's admin-set queue numbers and permission for the
// name server's routes (the replicated topic configuration).
func (s *Server) routeConfig(topic string) (read, write, perm int, ok bool) {
	c, ok := s.topicConfigs.Get(topic)
	if !ok {
		return 0, 0, 0, false
	}
	return c.ReadQueueNums, c.WriteQueueNums, c.Perm, true
}

// Groups is the node's subscription group table and TopicConfigs its topic
// configuration table: the admin's changes to them are replicated
// (tables.go).
func (s *Server) Groups() *meta.Groups       { return s.groups }
func (s *Server) TopicConfigs() *meta.Topics { return s.topicConfigs }

// followers are the write-only brokers of the routes: the peers with a
// broker address, but the leader, that are up as far as this node can
// tell (peers.go), named BrokerName-ID.
func (s *Server) followers() map[string]string {
	leader := s.node.LeaderAddr()
	lead := s.node.IsLeader()
	var live map[string]bool
	if !lead {
		live = s.live.fresh()
	}
	m := map[string]string{}
	for _, p := range s.cfg.Peers {
		a := p.BrokerAddr
		if p.ID == s.cfg.ID {
			a = s.brAddr
		}
		up := p.ID == s.cfg.ID || (lead && s.node.Reachable(p.ID)) || (!lead && (live == nil || live[p.ID]))
		if a != "" && a != leader && up {
			m[broker.DefaultBrokerName+"-"+p.ID] = a
		}
	}
	return m
}

// Node is the node's replica.
func (s *Server) Node() *replica.Node { return s.node }

// NameSrvAddr is the name server's address.
func (s *Server) NameSrvAddr() string { return s.nsAddr }

// BrokerAddr is the broker's advertised address.
func (s *Server) BrokerAddr() string { return s.brAddr }

// Topics is the node's topic table: every node keeps its own, creates
// topics on its own with the same defaults, and applies the admin's
// replicated changes (tables.go).
func (s *Server) Topics() *broker.Topics { return s.topics }

// Broker is the remoting broker handler.
func (s *Server) Broker() *broker.Broker { return s.broker }

// core is the broker.Core of a node: the replica's store (read only: the
// broker writes through writer), and the node's own consumer registry, lock
// table and offset manager (the broker's epochs and views; the committed
// offsets themselves are replicated by writer).
type core struct {
	late      atomic.Pointer[broker.Broker] // the events' receiver, bound once it exists
	n         *replica.Node                 // its transaction manager while it leads (txn.go)
	st        *store.Store
	arrivals  *brokercore.Arrivals
	unsub     func()
	offsets   *offset.Manager
	locks     *lock.Table
	consumers *consumer.Registry
}

func newCore(n *replica.Node, cfg Config) (*core, error) {
	c := &core{st: n.Store(), n: n}
	// The long polls wake at every append the replica applies (the
	// leader's and every follower's).
	c.arrivals = brokercore.NewArrivals(c.st)
	c.unsub = c.st.Subscribe(c.arrivals.Notify)
	var err error
	// A reset (the admin's INVOKE_BROKER_TO_RESET_OFFSET, POST /admin/reset)
	// is proposed through raft first (writer.ResetOffsets) and moves these
	// local offsets, the connections' epochs, only once raft committed it.
	if c.offsets, err = offset.Open(offset.Options{Logger: cfg.Logger, OnReset: func(_, topic string, queueID int, _ int64, _ uint64) {
		c.arrivals.Wake(topic, queueID)
	}}); err != nil {
		c.unsub()
		c.arrivals.Close()
		return nil, err
	}
	c.locks = lock.New(lock.Options{MaxLiveTime: cfg.LockMaxLiveTime, Logger: cfg.Logger, OnEvent: func(ev lock.Event) {
		if b := c.late.Load(); b != nil {
			b.OnLockEvent(ev)
		}
	}})
	c.consumers = consumer.New(consumer.Options{Logger: cfg.Logger, OnEvent: func(ev consumer.Event) {
		if b := c.late.Load(); b != nil {
			b.OnConsumerEvent(ev)
		}
	}})
	return c, nil
}

func (c *core) Store() *store.Store           { return c.st }
func (c *core) Offsets() *offset.Manager      { return c.offsets }
func (c *core) Locks() *lock.Table            { return c.locks }
func (c *core) Consumers() *consumer.Registry { return c.consumers }

// Scheduler is nil: with a Writer the broker schedules nothing itself (the
// leader's replicated scheduler does).
func (c *core) Scheduler() *schedule.Scheduler { return nil }

// Arrivals wakes the broker's long polls.
func (c *core) Arrivals() *brokercore.Arrivals { return c.arrivals }

// errSendBackByWriter: the broker gives send-backs to the Writer (a
// broker.SendBackWriter), never to the core.
var errSendBackByWriter = errors.New("send back goes through the replica")

// SendBack is never called: the Writer takes send-backs (writer.SendBack).
func (c *core) SendBack(*store.Message, string, int, int) (*store.Message, error) {
	return nil, errSendBackByWriter
}

func (c *core) close() error {
	c.unsub()
	c.arrivals.Close()
	return errors.Join(c.consumers.Close(), c.locks.Close(), c.offsets.Close())
}

// writer is the broker's Writer on a replica.
type writer struct{ n *replica.Node }

var (
	_ broker.SendBackWriter    = writer{}
	_ broker.OffsetResetWriter = writer{}
)

func (w writer) Append(msgs []*store.Message) error {
	out, err := w.n.Produce(msgs...)
	if err != nil {
		return writeErr(err)
	}
	for i, m := range out {
		msgs[i].LogOffset, msgs[i].QueueOffset = m.LogOffset, m.QueueOffset
	}
	return nil
}

// SendBack stores a send-back through raft (replica.Node.SendBack: the
// library's rules, the leader's replicated scheduler for the retry's delay).
func (w writer) SendBack(m *store.Message, group string, delayLevel, maxReconsume int) (*store.Message, error) {
	d, err := w.n.SendBack(m, group, delayLevel, maxReconsume)
	return d, writeErr(err)
}

func (w writer) AppendDelayed(m *store.Message, level int) (*store.Message, error) {
	d, err := w.n.ProduceDelayed(m, level)
	return d, writeErr(err)
}

func (w writer) AppendAt(m *store.Message, at time.Time) (*store.Message, error) {
	d, err := w.n.ProduceAt(m, at)
	return d, writeErr(err)
}

// CommitOffset commits through raft; an offset the replicated state
// already holds is not proposed again (every pull carries one).
func (w writer) CommitOffset(group, topic string, queueID int, off int64) error {
	if cur, ok := w.n.Committed(group, topic, queueID); ok && cur == off {
		return nil
	}
	return writeErr(w.n.ResetOffset(group, topic, queueID, off))
}

// ResetOffsets moves the committed offsets of a reset through raft, in
// one entry (broker.OffsetResetWriter): the broker moves its own offsets
// only once it is committed.
func (w writer) ResetOffsets(group, topic string, offsets map[int]int64) error {
	return writeErr(w.n.ResetOffsets(group, topic, offsets))
}

func (w writer) Committed(group, topic string, queueID int) (int64, bool) {
	return w.n.Committed(group, topic, queueID)
}

// writeErr maps a replica's error onto the broker's: not the leader, not
// committed and closed are "not writable now" (the client retries: a
// produce that was not committed may still be, so a retry may store it
// twice); bad input is the store's ErrInvalid.
func writeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrNotCommitted), errors.Is(err, replica.ErrClosed):
		return fmt.Errorf("%w: %w", broker.ErrNotWritable, err)
	case errors.Is(err, replica.ErrInvalid), errors.Is(err, replica.ErrRejected):
		return fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	return err
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
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
