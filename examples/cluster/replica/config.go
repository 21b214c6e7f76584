package replica

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
	"github.com/hashicorp/raft"
)

// Defaults for zero Config fields.
const (
	DefaultApplyTimeout      = 5 * time.Second
	DefaultCommitEvery       = 100 * time.Millisecond // consumer offsets: the redelivery bound after a failover
	DefaultSnapshotThreshold = 8192                   // raft entries between snapshots
	DefaultTrailingLogs      = 10240                  // raft entries kept after a snapshot
	DefaultHeartbeatTimeout  = 1000 * time.Millisecond
	DefaultElectionTimeout   = 1000 * time.Millisecond
	DefaultLeaderLease       = 500 * time.Millisecond
	DefaultLevels            = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
	// DefaultStoreSegmentSize is the local store's segment size
	// (store.Options.SegmentSize), a quarter of the store's own default:
	// see Config.StoreSegmentSize.
	DefaultStoreSegmentSize = 4 << 20
)

// Config configures one node. ID and Dir are required; the zero value of
// every other field is a working default.
type Config struct {
	ID  string // raft server id, stable across restarts
	Dir string // data directory: store/, raftlog/ (or raft.db), snapshots/, node.json

	// LogStore is raft's log: LogStoreSegment (this module's, one fsync
	// per batch) or LogStoreBolt (raft-boltdb). "" = the one Dir already
	// holds, LogStoreSegment for a new Dir.
	LogStore string

	// RaftAddr is the TCP address raft listens on (and advertises), used
	// when Transport is nil.
	RaftAddr string
	// Addr is the address clients reach this node at (the host's own
	// protocol: its HTTP API, its RocketMQ port), replicated so that a
	// follower can name the leader's (NotLeaderError.LeaderAddr).
	Addr string
	// Transport replaces the TCP transport (tests use raft's in-memory one).
	Transport raft.Transport
	// ClusterSecret, when set (at least MinSecretLen bytes, the same on
	// every member: LoadSecret reads a file of it), authenticates every
	// connection of the TCP transport RaftAddr listens on with a mutual
	// challenge–response before any raft RPC is read (auth.go); a peer
	// without it is refused and counted (RaftRefused). A caller's
	// Transport is the caller's to authenticate (NewAuthStream).
	ClusterSecret []byte
	// InsecureRaft allows a RaftAddr beyond loopback without a
	// ClusterSecret (anyone who reaches the port could then append raft
	// entries); without it such an address is refused with ErrInsecureRaft.
	InsecureRaft bool

	// Bootstrap lists the initial voters (including this node) of a new
	// cluster. A node with existing raft state ignores it.
	Bootstrap []raft.Server
	// BootstrapAddrs maps the Bootstrap voters' ids to their client
	// addresses (Addr), so that a follower can name any of them as the
	// leader as soon as it knows who leads (the first leader also records
	// them in the replicated state, for members that join later).
	BootstrapAddrs map[string]string
	// ClusterID, when set, is the cluster this node must belong to: a data
	// directory of another cluster is refused with ErrForeignDataDir. A
	// bootstrapping node with no ClusterID gets a random one.
	ClusterID string

	// Now is the clock of produce timestamps and the scheduler; nil =
	// time.Now. Only the leader reads it: followers take the timestamps
	// from the entries.
	Now    func() time.Time
	Logger *slog.Logger

	// Levels are the scheduler's delay levels (schedule.ParseLevels).
	Levels string
	// ScheduleTick is the scheduler's re-check period (0 = its default).
	ScheduleTick time.Duration
	// DeadLetterQueue is the queue of the dead-letter topics ("%DLQ%G")
	// that this node's pop writes to (0 by default). OpenGroups sets group
	// g's to g, so that dead letters follow the routing rule (GroupOf).
	DeadLetterQueue int
	// CommitEvery is how often acknowledged consumer offsets are committed
	// through raft, in one entry for all queues.
	CommitEvery time.Duration

	// StoreSegmentSize is the local store's segment size (0 =
	// DefaultStoreSegmentSize). The FSM appends every entry to the store
	// on raft's one FSM goroutine, where each of the store's segment rolls
	// and each growth of tidwall/wal's in-memory segment buffer (one copy
	// of the whole buffer, which the Go runtime cannot preempt: it keeps
	// its core for the whole copy) stalls the node's applies — on the
	// leader, every produce waiting to be answered; nodes sharing cores
	// stall each other. Smaller segments make many small stalls of what
	// 16 MiB ones make a few of 10–40 ms each (BenchmarkProduceTrace's
	// stall-ms); more segments mean more files the store keeps open.
	StoreSegmentSize int
	// KeyProperties names message properties the local store's key index
	// indexes besides Keys (store.Options.KeyProperties): a RocketMQ host
	// passes "UNIQ_KEY" so that messages are found by their id.
	KeyProperties []string

	// Transactions, when not nil, runs RocketMQ's transactional messages
	// on the leader: every leader term builds a txn.Manager with these
	// options over the replica (txn.go, Node.Transactions). Its Now is
	// replaced by Now (the records' StoredAt are Now's readings and due
	// times count from them), its Logger defaults to Logger; ProgressPath,
	// when set, is written by every term's Manager in turn (it is only a
	// hint where reading may start).
	Transactions *txn.Options

	ApplyTimeout time.Duration
	// HeartbeatTimeout is how long a follower waits without hearing from
	// its leader before it starts an election (raft's election timeout;
	// the node checks it every HeartbeatTimeout/16, see contact.go);
	// ElectionTimeout is how long a candidate waits for votes.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// LeaderLeaseTimout is how long a leader leads without hearing from a
	// quorum (default: DefaultLeaderLease, at most 9/10 of
	// HeartbeatTimeout). It must be below HeartbeatTimeout for a follower
	// to start an election as soon as its leader has been silent for
	// HeartbeatTimeout; equal to it, raft's own check decides, one to
	// three heartbeat timeouts after the last contact.
	LeaderLeaseTimout time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration

	// Probe checks that a node about to be added answers, as the node it
	// is added as, and belongs to no other cluster (the host asks it over
	// its own protocol at addr); an error refuses the change with
	// ErrUnreachable. nil = no check.
	Probe func(id, raftAddr, addr string) error

	// raftAuthTimeout bounds the raft handshake (tests; 0 = 10 s).
	raftAuthTimeout time.Duration

	// beforePropose is a test hook run before every scheduler delivery is
	// proposed (the field report's slow append).
	beforePropose func()

	// Stage tracing (benchmarks only): wrapLogStore and wrapFSM wrap what
	// raft is given as its log store and FSM; traceEntry is told, for
	// every entry this node proposed, its index, when it was proposed and
	// when raft answered.
	wrapLogStore func(raft.LogStore) raft.LogStore
	// syncLeaderLog keeps the leader's StoreLogs synchronous (benchmarks
	// compare it with the deferred sync of raftlog_defer.go).
	syncLeaderLog bool
	wrapFSM       func(raft.FSM) raft.FSM
	traceEntry    func(index uint64, proposed, answered time.Time)
}

func (c Config) withDefaults() (Config, error) {
	if c.ID == "" || c.Dir == "" {
		return c, fmt.Errorf("config: ID and Dir are required: %w", ErrInvalid)
	}
	if err := checkMember(c.ID, c.Addr); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if c.DeadLetterQueue < 0 || c.DeadLetterQueue > store.MaxQueueID {
		return c, fmt.Errorf("config: DeadLetterQueue %d outside 0..%d: %w", c.DeadLetterQueue, store.MaxQueueID, ErrInvalid)
	}
	if c.Transport == nil && c.RaftAddr == "" {
		return c, fmt.Errorf("config: RaftAddr or Transport is required: %w", ErrInvalid)
	}
	if c.Transport == nil {
		if err := checkRaftAddr(c); err != nil {
			return c, err
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Levels == "" {
		c.Levels = DefaultLevels
	}
	if c.CommitEvery <= 0 {
		c.CommitEvery = DefaultCommitEvery
	}
	if c.StoreSegmentSize <= 0 {
		c.StoreSegmentSize = DefaultStoreSegmentSize
	}
	if c.ApplyTimeout <= 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ElectionTimeout <= 0 {
		c.ElectionTimeout = DefaultElectionTimeout
	}
	if c.LeaderLeaseTimout <= 0 {
		c.LeaderLeaseTimout = min(DefaultLeaderLease, c.HeartbeatTimeout-c.HeartbeatTimeout/10)
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.SnapshotInterval <= 0 {
		c.SnapshotInterval = 2 * time.Minute
	}
	return c, nil
}
