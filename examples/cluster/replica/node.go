package replica

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Node is one broker of the cluster: a raft member whose FSM feeds a local
// store.Store, plus — while it leads — a pop service and a scheduler over
// that store (see leader.go). brokercore's packages do not know they are
// replicated: they see a store-shaped Log and Offsets whose writes are
// raft entries.
type Node struct {
	cfg   Config
	log   *slog.Logger
	st    *store.Store
	fsm   *fsm
	raft  *raft.Raft
	logs  raft.LogStore    // raft's own log (raftLogStores)
	votes raft.StableStore // raft's term and vote
	raftC []io.Closer      // closes logs and votes
	trans raft.Transport
	auth  *AuthStream // the TCP transport's authentication (Config.ClusterSecret), nil without
	id    identity

	observer *raft.Observer // peers' loss and return (peers.go)
	lostMu   sync.Mutex
	lost     map[raft.ServerID]time.Time // peers the leader lost, and since when (peers.go)
	batch    batcher

	notify  chan bool
	kick    chan struct{} // requestRebuild wakes the leader loop
	rebuild atomic.Bool   // the leader services must be rebuilt from the replicated state
	stop    chan struct{}
	wg      sync.WaitGroup

	termMu sync.RWMutex
	term   *leaderTerm // non-nil while this node leads and its services run

	// Calls waiting on a raft future are counted: raft does not answer a
	// future still queued when it shuts down, so Close lets every waiter
	// finish (raft answers it while running: committed, not leader, or
	// leadership lost) before it shuts raft down, and refuses new ones.
	gateMu   sync.Mutex
	gateCond *sync.Cond
	inflight int
	closing  bool

	closeOnce sync.Once
	closeErr  error
}

// enter admits a call that will wait on a raft future; false once Close
// began.
func (n *Node) enter() bool {
	n.gateMu.Lock()
	defer n.gateMu.Unlock()
	if n.closing {
		return false
	}
	n.inflight++
	return true
}

func (n *Node) leave() {
	n.gateMu.Lock()
	n.inflight--
	if n.inflight == 0 {
		n.gateCond.Broadcast()
	}
	n.gateMu.Unlock()
}

// drain refuses new raft waits and waits for the running ones.
func (n *Node) drain() {
	n.gateMu.Lock()
	n.closing = true
	for n.inflight > 0 {
		n.gateCond.Wait()
	}
	n.gateMu.Unlock()
}

// Open starts a node on cfg.Dir. A directory of another node or cluster is
// refused with ErrForeignDataDir.
func Open(cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	id, err := checkIdentity(cfg.Dir, cfg.ID, cfg.ClusterID)
	if err != nil {
		cfg.Logger.Error("cluster: data directory refused", "dir", cfg.Dir, "err", err)
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.ID), id: id,
		notify: make(chan bool, 64), kick: make(chan struct{}, 1), stop: make(chan struct{})}
	n.batch.n = n
	n.gateCond = sync.NewCond(&n.gateMu)
	n.fsm = newFSM(nil, n.log)
	st, err := store.Open(filepath.Join(cfg.Dir, "store"), store.Options{
		// raft's log is fsynced before an entry commits and is replayed
		// after a crash, so the store need not fsync every append; a
		// snapshot fsyncs it before raft drops the entries it covers.
		Sync:          store.SyncNone,
		SegmentSize:   cfg.StoreSegmentSize,
		KeyProperties: cfg.KeyProperties,
		Now:           n.fsm.now,
		Logger:        n.log,
	})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	n.st, n.fsm.st = st, st
	if err := n.openRaft(); err != nil {
		_ = st.Close()
		return nil, err
	}
	n.observePeers()
	n.wg.Add(2)
	go n.leaderLoop()
	go n.watchContact()
	return n, nil
}

func (n *Node) openRaft() (err error) {
	cfg := n.cfg
	n.logs, n.votes, n.raftC, err = openRaftStores(cfg.Dir, cfg.LogStore, n.log)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			n.closeRaftStores()
		}
	}()
	snaps, err := raft.NewFileSnapshotStore(cfg.Dir, 2, io.Discard)
	if err != nil {
		return fmt.Errorf("open snapshots: %w", err)
	}
	n.trans = cfg.Transport
	if n.trans == nil && len(cfg.ClusterSecret) > 0 {
		if n.auth, err = listenAuth(cfg.RaftAddr, cfg.ClusterSecret, cfg.raftAuthTimeout, n.log); err != nil {
			return fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
		}
		n.trans = raft.NewNetworkTransport(n.auth, 4, 10*time.Second, io.Discard)
	}
	if n.trans == nil {
		n.trans, err = raft.NewTCPTransport(cfg.RaftAddr, nil, 4, 10*time.Second, io.Discard)
		if err != nil {
			return fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
		}
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimout
	rc.CommitTimeout = min(rc.CommitTimeout, cfg.HeartbeatTimeout/4)
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.NotifyCh = n.notify
	rc.BatchApplyCh = true
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft-" + cfg.ID, Output: io.Discard, Level: hclog.Off})
	if os.Getenv("CLUSTER_RAFT_LOG") != "" {
		rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft-" + cfg.ID, Output: os.Stderr, Level: hclog.Info})
	}
	var inner raft.LogStore = n.logs
	if cfg.wrapLogStore != nil {
		inner = cfg.wrapLogStore(inner)
	}
	logs, err := raft.NewLogCache(1024, inner)
	if err != nil {
		return err
	}
	if len(cfg.Bootstrap) > 0 {
		has, err := raft.HasExistingState(logs, n.votes, snaps)
		if err != nil {
			return err
		}
		if !has {
			if err := raft.BootstrapCluster(rc, logs, n.votes, snaps, n.trans, raft.Configuration{Servers: cfg.Bootstrap}); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
			n.log.Info("cluster: bootstrapped", "voters", len(cfg.Bootstrap))
		}
	}
	// The segment log defers the leader's fdatasync (raftlog_defer.go).
	trans := n.trans
	ls, deferSync := n.logs.(*logStore)
	deferSync = deferSync && !cfg.syncLeaderLog
	if deferSync {
		if trans, deferSync = clampCommits(trans, ls.durableIndex); deferSync {
			n.fsm.durable = ls.waitDurable
		}
	}
	var fsm raft.FSM = n.fsm
	if cfg.wrapFSM != nil {
		fsm = cfg.wrapFSM(fsm)
	}
	var raftLogs raft.LogStore = logs
	if deferSync {
		raftLogs = syncedReads{LogStore: logs, ls: ls}
	}
	r, err := raft.NewRaft(rc, fsm, raftLogs, n.votes, snaps, trans)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	if deferSync {
		ls.deferSyncWhile(func() bool { return r.State() == raft.Leader })
	}
	return nil
}

// Close stops the node's services, raft, and the store. Idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.wg.Wait()
		n.raft.DeregisterObserver(n.observer)
		n.drain()
		n.endTerm("close")
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
		if nt, ok := n.trans.(*raft.NetworkTransport); ok && n.cfg.Transport == nil {
			nt.CloseStreams() // pooled connections: the peers' handlers end
			_ = nt.Close()
		}
		errs = append(errs, n.closeRaftStores(), n.st.Close())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// ID is the node's raft server id.
func (n *Node) ID() string { return n.cfg.ID }

// Store is the node's local replica (read-only for callers: writes go
// through Produce).
func (n *Node) Store() *store.Store { return n.st }

// Raft exposes the raft instance (tests, status).
func (n *Node) Raft() *raft.Raft { return n.raft }

// IsLeader reports whether this node leads and its leader services run.
func (n *Node) IsLeader() bool {
	n.termMu.RLock()
	defer n.termMu.RUnlock()
	return n.term != nil
}

// leaderLoop turns raft's leadership notifications into starting and
// stopping the leader's services. A periodic check covers notifications
// coalesced in the channel and retries a failed start.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	t := time.NewTicker(max(n.cfg.HeartbeatTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.notify:
		case <-n.kick:
		case <-t.C:
		}
		n.reconcile()
	}
}

func (n *Node) reconcile() {
	if n.raft.State() != raft.Leader {
		n.endTerm("lost leadership")
		n.saveClusterID()
		return
	}
	if t := n.currentTerm(); t != nil {
		// A term's services are only as good as the leadership they were
		// built under: lost and regained in between (another leader may
		// have delivered and committed meanwhile), or a delivery refused
		// as stale, and they are rebuilt from the replicated state.
		if t.raftTerm == n.raft.CurrentTerm() && !n.rebuild.Load() {
			return
		}
		n.endTerm("rebuild")
	}
	n.rebuild.Store(false)
	term := n.raft.CurrentTerm()
	// Everything committed by earlier leaders must be applied here before
	// consumption or the scheduler start from the replicated state.
	if err := n.barrier(); err != nil {
		n.log.Warn("cluster: barrier as new leader failed, will retry", "err", err)
		return
	}
	if err := n.claimCluster(); err != nil {
		n.log.Warn("cluster: could not record cluster identity, will retry", "err", err)
		return
	}
	if err := n.beginTerm(term); err != nil {
		n.log.Error("cluster: leader services did not start, will retry", "err", err)
	}
}

// barrier waits until everything committed so far is applied here.
func (n *Node) barrier() error {
	if !n.enter() {
		return ErrClosed
	}
	defer n.leave()
	if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("%v: %w", err, ErrNotLeader)
	}
	return nil
}

// requestRebuild asks the leader loop to rebuild the leader services.
func (n *Node) requestRebuild() {
	n.rebuild.Store(true)
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *Node) currentTerm() *leaderTerm {
	n.termMu.RLock()
	defer n.termMu.RUnlock()
	return n.term
}

// claimCluster makes sure the replicated state names the cluster and this
// node's client address.
func (n *Node) claimCluster() error {
	if n.fsm.clusterID() == "" {
		id := n.cfg.ClusterID
		if id == "" {
			id = n.id.ClusterID
		}
		if id == "" {
			id = randomID()
		}
		if _, err := n.apply(&entry{Kind: kindInit, Text: id}); err != nil {
			return err
		}
	}
	if n.cfg.Addr != "" && n.fsm.member(n.cfg.ID) != n.cfg.Addr {
		if _, err := n.apply(&entry{Kind: kindMember, Text: n.cfg.ID, Text2: n.cfg.Addr}); err != nil {
			return err
		}
	}
	// The bootstrap voters' addresses, for members that did not
	// bootstrap (they have no BootstrapAddrs of their own).
	ids := make([]string, 0, len(n.cfg.BootstrapAddrs))
	for id := range n.cfg.BootstrapAddrs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if a := n.cfg.BootstrapAddrs[id]; id != n.cfg.ID && a != "" && n.fsm.member(id) == "" {
			if _, err := n.apply(&entry{Kind: kindMember, Text: id, Text2: a}); err != nil {
				return err
			}
		}
	}
	n.saveClusterID()
	return nil
}

// saveClusterID records the cluster id in node.json once it is known.
func (n *Node) saveClusterID() {
	c := n.fsm.clusterID()
	if c == "" || n.id.ClusterID == c {
		return
	}
	if n.id.ClusterID != "" {
		n.log.Error("cluster: replicated cluster id differs from the data directory's", "dir_cluster", n.id.ClusterID, "cluster", c)
		return
	}
	id := identity{NodeID: n.cfg.ID, ClusterID: c}
	if err := saveIdentity(n.cfg.Dir, id); err != nil {
		n.log.Warn("cluster: node.json not written", "err", err)
		return
	}
	n.id = id
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// apply proposes e and waits until it is committed and applied here. It
// answers ErrNotLeader at once on a follower, so nothing is proposed (nor
// applied locally) outside raft.
func (n *Node) apply(e *entry) (applyResult, error) {
	p, err := n.propose(e)
	if err != nil {
		return applyResult{}, err
	}
	return n.await(p)
}

// proposal is an entry handed to raft and not answered yet.
type proposal struct {
	kind kind
	f    raft.ApplyFuture
	at   time.Time
}

// propose hands e to raft without waiting (await waits): ErrNotLeader at
// once on a follower.
func (n *Node) propose(e *entry) (proposal, error) {
	if !n.enter() {
		return proposal{}, fmt.Errorf("%s entry: %w", e.Kind, ErrClosed)
	}
	if n.raft.State() != raft.Leader {
		n.leave()
		return proposal{}, n.notLeader()
	}
	e.At = n.cfg.Now()
	at := time.Now()
	return proposal{kind: e.Kind, f: n.raft.Apply(encodeEntry(e), n.cfg.ApplyTimeout), at: at}, nil
}

// await waits until p is committed and applied here.
func (n *Node) await(p proposal) (applyResult, error) {
	defer n.leave()
	err := p.f.Error()
	if n.cfg.traceEntry != nil && err == nil {
		n.cfg.traceEntry(p.f.Index(), p.at, time.Now())
	}
	if err != nil {
		return applyResult{}, fmt.Errorf("%s entry: %v: %w", p.kind, err, ErrNotCommitted)
	}
	res, _ := p.f.Response().(applyResult)
	return res, res.err
}

func (n *Node) notLeader() error {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return &NotLeaderError{Node: n.cfg.ID}
	}
	return &NotLeaderError{Node: n.cfg.ID, LeaderID: string(id), LeaderRaftAddr: string(addr), LeaderAddr: n.memberAddr(string(id))}
}

// LeaderAddr returns the client address of the current leader, "" if
// unknown.
func (n *Node) LeaderAddr() string {
	_, addr := n.Leader()
	return addr
}

// Leader returns the raft id and the client address (Config.Addr) of the
// leader as this node knows it: "" and "" when it knows none, an id and ""
// when the leader's address is known nowhere (a member added with none).
func (n *Node) Leader() (id, addr string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	return string(lid), n.memberAddr(string(lid))
}

// MemberAddr reports whether id is a server of the current raft
// configuration and, if this node knows it, its client address (the
// replicated one, else the bootstrap configuration's; "" when neither).
func (n *Node) MemberAddr(id string) (addr string, member bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return "", false
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == id {
			return n.memberAddr(id), true
		}
	}
	return "", false
}

// memberAddr is a member's client address: the replicated one, else the one
// of the bootstrap configuration, else this node's own.
func (n *Node) memberAddr(id string) string {
	if a := n.fsm.member(id); a != "" {
		return a
	}
	if a := n.cfg.BootstrapAddrs[id]; a != "" {
		return a
	}
	if id == n.cfg.ID {
		return n.cfg.Addr
	}
	return ""
}

// Produce appends msgs as one atomic batch through raft and returns them
// with their assigned offsets once a majority has the entry on disk and
// this node applied it. Only the leader accepts it.
//
// Every message is checked with brokercore.CheckProduce first (a client's
// topic and the store's limits): a produce that passes is never refused by
// the store or the scheduler, and one that does not is refused with
// ErrInvalid before anything is proposed.
func (n *Node) Produce(msgs ...*store.Message) ([]*store.Message, error) {
	for i, m := range msgs {
		if err := brokercore.CheckProduce(m, store.DefaultMaxMessageSize); err != nil {
			n.log.Debug("cluster: produce rejected", "err", err)
			return nil, fmt.Errorf("produce: message %d: %w: %w", i, ErrInvalid, err)
		}
	}
	return n.produce(msgs)
}

// produce proposes msgs after the store's check only: the broker's own
// writes (scheduler, dead letters) go to reserved topics.
func (n *Node) produce(msgs []*store.Message) ([]*store.Message, error) {
	if err := checkBatch(msgs); err != nil {
		n.log.Debug("cluster: produce rejected", "err", err)
		return nil, fmt.Errorf("produce: %w", err)
	}
	out, err := n.batch.produce(msgs)
	if err != nil {
		n.log.Debug("cluster: produce not acknowledged", "err", err)
		return nil, fmt.Errorf("produce: %w", err)
	}
	return out, nil
}

// Read reads the local replica (any node; a follower may lag).
func (n *Node) Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error) {
	return n.st.Read(topic, queueID, offset, max)
}

// ReadLinearizable reads on the leader so that the answer reflects every
// produce acknowledged before the call: a barrier entry is committed in
// this leader's term (which a newer leader's log must then hold before
// anything it acknowledges) and applied here before the local read. (Not
// raft's VerifyLeader: its future can stay unanswered when the leader
// shuts down mid-verification.)
func (n *Node) ReadLinearizable(topic string, queueID int, offset int64, max int) ([]*store.Message, error) {
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	if err := n.barrier(); err != nil {
		return nil, fmt.Errorf("read: barrier: %w", err)
	}
	return n.st.Read(topic, queueID, offset, max)
}

// Status is what /status reports.
type Status struct {
	ID           string   `json:"id"`
	Group        int      `json:"raft_group,omitempty"` // the raft group (Groups.Status), 0 for a Node of its own
	Cluster      string   `json:"cluster"`
	Role         string   `json:"role"`
	Term         uint64   `json:"term"`
	AppliedIndex uint64   `json:"applied_index"`
	CommitIndex  uint64   `json:"commit_index"`
	Leader       string   `json:"leader"`
	LeaderAddr   string   `json:"leader_addr,omitempty"`
	LastApplied  uint64   `json:"last_applied"` // raft index of the last command applied here
	Messages     int64    `json:"messages"`
	Voters       []string `json:"voters"`
	Failed       string   `json:"failed,omitempty"`
}

// Status reports the node's view of the cluster.
func (n *Node) Status() Status {
	_, lid := n.raft.LeaderWithID()
	s := Status{
		ID: n.cfg.ID, Cluster: n.fsm.clusterID(), Role: n.raft.State().String(),
		Term: n.raft.CurrentTerm(), AppliedIndex: n.raft.AppliedIndex(), CommitIndex: n.raft.CommitIndex(),
		Leader: string(lid), LeaderAddr: n.LeaderAddr(), LastApplied: n.fsm.lastIndex(), Messages: n.st.Stats().LogNext,
	}
	if err := n.fsm.err(); err != nil {
		s.Failed = err.Error()
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			if srv.Suffrage == raft.Voter {
				s.Voters = append(s.Voters, string(srv.ID))
			}
		}
	}
	return s
}
