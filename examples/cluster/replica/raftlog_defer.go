package replica

import (
	"io"
	"time"

	"github.com/hashicorp/raft"
)

// A leader's raft log is written in parallel with its replication.
//
// hashicorp/raft's leader stores a batch (StoreLogs) before it sends it to
// the followers, and its leader loop waits for that store, so a produce
// pays the leader's fdatasync and then a follower's one, in series, and
// commits wait behind the leader's next sync. While deferSync says so (the
// node leads), the segment log's StoreLogs writes the batch and returns;
// a syncer goroutine fdatasyncs behind it, while raft replicates the
// batch. The next batch is written only once that sync is through, so at
// most one batch is ever unsynced and a power loss tears at most the last
// one (raftlog_power_test.go). Raft then counts the leader's copy towards the
// majority before it is on the leader's disk, so nothing may treat raft's
// commit index as "on a majority's disks" until the leader's log is
// durable up to it. Two things enforce that:
//
//   - the FSM applies an entry only once the local log holds it durably
//     (fsm.durable = waitDurable): on the leader, a produce is answered
//     after its own and a follower's fdatasync (followers store
//     synchronously before they answer), and a store (SyncNone) never
//     holds an entry the local log could lose;
//   - the commit index the leader sends to followers is cut to the
//     leader's durable index (commitClamp), so no follower applies an
//     entry before a majority has it on disk.
//
// A follower's StoreLogs stays synchronous: its answer to the leader is
// the promise that the entry is on its disk.

// deferSyncWhile makes StoreLogs defer its fdatasync while cond is true
// and starts the syncer. Called once, before the log is used that way.
func (s *logStore) deferSyncWhile(cond func() bool) {
	s.syncOnce.Do(func() {
		s.kick = make(chan struct{}, 1)
		s.stopSync = make(chan struct{})
		s.syncDone = make(chan struct{})
		go s.syncLoop()
	})
	s.deferCond.Store(&cond) // after the channels exist: StoreLogs kicks once it sees it
}

// syncTail fdatasyncs the last segment and the directory (Open: what was
// read becomes what is durable).
func (s *logStore) syncTail() error {
	if len(s.segs) == 0 {
		return nil
	}
	if err := datasync(s.segs[len(s.segs)-1].f); err != nil {
		return err
	}
	return s.fs.SyncDir(s.dir)
}

func (s *logStore) deferring() bool {
	c := s.deferCond.Load()
	return c != nil && (*c)()
}

func (s *logStore) syncLoop() {
	defer close(s.syncDone)
	for {
		select {
		case <-s.kick:
		case <-s.stopSync:
			return
		}
		s.syncDeferred()
	}
}

// syncDeferred fdatasyncs what a deferred StoreLogs wrote and marks it
// durable. It holds syncMu, which keeps the next write (StoreLogs waits
// for it), other syncs and deletions out.
func (s *logStore) syncDeferred() {
	s.wmu.Lock()
	seg, target := s.unsynced, s.lastLocked()
	if seg == nil || s.closed || s.failedErr() != nil {
		s.wmu.Unlock()
		return
	}
	s.unsynced = nil // pending stays set: it clears only under syncMu and wmu
	s.syncMu.Lock()
	s.wmu.Unlock()
	defer s.syncMu.Unlock()
	t0 := time.Now()
	if err := datasync(seg.f); err != nil {
		_ = s.fail("fsync", err)
		return
	}
	s.syncNanos.Add(uint64(time.Since(t0)))
	s.batches.Add(1)
	s.markDurable(target)
}

// syncUnsynced makes deferred writes durable now (under wmu and syncMu):
// before a synchronous write to another segment, a deletion, or Close.
func (s *logStore) syncUnsynced() error {
	seg := s.unsynced
	if seg == nil {
		s.pending.Store(false) // and no sync is in flight: we hold syncMu
		return nil
	}
	if err := datasync(seg.f); err != nil {
		return s.fail("fsync", err)
	}
	s.setUnsynced(nil)
	s.markDurable(s.lastLocked())
	return nil
}

// setUnsynced records the segment a deferred write left unsynced (nil:
// none); under wmu, and under syncMu for nil, when everything written is
// on disk.
func (s *logStore) setUnsynced(seg *segment) {
	s.unsynced = seg
	s.pending.Store(seg != nil)
}

// syncPending makes everything written durable now, waiting for a sync in
// flight. pending (set by every deferred write, cleared only when nothing
// is unsynced and no sync is in flight) makes it free when there is
// nothing to do.
func (s *logStore) syncPending() error {
	if !s.pending.Load() {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	return s.syncUnsynced()
}

// syncedReads is the log raft is given when the leader's syncs are
// deferred. hashicorp/raft's follower answers an AppendEntries whose
// entries it already holds without storing them again: it only reads
// them (GetLog, raft.go's appendEntries) to compare their terms, and its
// success then counts them on this node's disk. A node that has just
// stopped leading may hold such entries unsynced. So while the node does
// not lead, a read first makes any deferred write durable (it wraps
// raft's LogCache, so cached reads are covered too).
type syncedReads struct {
	raft.LogStore
	ls *logStore
}

func (r syncedReads) GetLog(index uint64, l *raft.Log) error {
	if !r.ls.deferring() {
		if err := r.ls.failedErr(); err != nil {
			return err // a failed deferred sync: the entries may not be on disk
		}
		if err := r.ls.syncPending(); err != nil {
			return err
		}
	}
	return r.LogStore.GetLog(index, l)
}

// IsMonotonic implements raft.MonotonicLogStore, as the log does.
func (r syncedReads) IsMonotonic() bool { return r.ls.IsMonotonic() }

// markDurable records that the log holds everything up to index on disk
// and wakes the waiters.
func (s *logStore) markDurable(index uint64) {
	s.mu.Lock()
	if d := s.durable.Load(); index > d {
		s.entries.Add(index - d)
		s.durable.Store(index)
	}
	s.durCond.Broadcast()
	s.mu.Unlock()
}

// durableIndex is the last index the log holds on disk.
func (s *logStore) durableIndex() uint64 { return s.durable.Load() }

// waitDurable waits until the log holds entry index on disk; the log's
// error if it failed or closed first.
func (s *logStore) waitDurable(index uint64) error {
	if s.durable.Load() >= index {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.durable.Load() < index {
		if s.failed != nil {
			return s.failed
		}
		if s.closed {
			return errLogClosed
		}
		s.durCond.Wait()
	}
	return nil
}

// stopSyncer stops the syncer goroutine, if it runs.
func (s *logStore) stopSyncer() {
	if s.stopSync == nil {
		return
	}
	s.stopOnce.Do(func() {
		close(s.stopSync)
		<-s.syncDone
	})
}

// commitClamp is the transport a leader with a deferred log sync sends
// through: every AppendEntries carries a commit index no higher than the
// leader's durable index (see above). Everything else passes through.
type commitClamp struct {
	raft.Transport
	durable func() uint64
}

// clampCommits wraps t (which must support pre-vote, as raft's network and
// in-memory transports do, or t is returned as is and the log must not
// defer its syncs; ok reports which).
func clampCommits(t raft.Transport, durable func() uint64) (raft.Transport, bool) {
	if _, ok := t.(raft.WithPreVote); !ok {
		return t, false
	}
	return &commitClamp{Transport: t, durable: durable}, true
}

// clamp writes req only when it must: raft's heartbeat sends one request
// value again and again, and an in-memory transport hands the receiver a
// pointer to it, which it may still be reading when the next heartbeat
// goes out (a data race for a write of the same value).
func (c *commitClamp) clamp(req *raft.AppendEntriesRequest) {
	if d := c.durable(); req.LeaderCommitIndex > d {
		req.LeaderCommitIndex = d
	}
}

func (c *commitClamp) AppendEntries(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	c.clamp(req)
	return c.Transport.AppendEntries(id, target, req, resp)
}

func (c *commitClamp) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := c.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &clampedPipeline{AppendPipeline: p, c: c}, nil
}

func (c *commitClamp) RequestPreVote(id raft.ServerID, target raft.ServerAddress, req *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return c.Transport.(raft.WithPreVote).RequestPreVote(id, target, req, resp)
}

// Close closes the wrapped transport when it can be closed (raft closes
// its transport on shutdown).
func (c *commitClamp) Close() error {
	if cl, ok := c.Transport.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

type clampedPipeline struct {
	raft.AppendPipeline
	c *commitClamp
}

func (p *clampedPipeline) AppendEntries(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.c.clamp(req)
	return p.AppendPipeline.AppendEntries(req, resp)
}
