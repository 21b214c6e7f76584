package replica

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
	"github.com/brokercore/brokercore/examples/cluster/internal/fsx/fsxtest"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// gatedFS holds every file Sync until the test lets one through.
type gatedFS struct {
	fsx.FS
	gate  chan struct{} // a receive lets one Sync run
	syncs atomic.Int32  // Syncs started
}

func newGatedFS() *gatedFS { return &gatedFS{FS: fsx.OS, gate: make(chan struct{})} }

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (fsx.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, g: g}, nil
}

type gatedFile struct {
	fsx.File
	g *gatedFS
}

func (f *gatedFile) Sync() error {
	f.g.syncs.Add(1)
	<-f.g.gate
	return f.File.Sync()
}

// store runs StoreLogs and lets its syncs (and any other) through.
func (g *gatedFS) store(s *logStore, logs []*raft.Log) error {
	done := make(chan error, 1)
	go func() { done <- s.StoreLogs(logs) }()
	for {
		select {
		case g.gate <- struct{}{}:
		case err := <-done:
			return err
		}
	}
}

func waitDurableAsync(s *logStore, index uint64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.waitDurable(index) }()
	return ch
}

// requireNotYet fails when ch answers within 20 ms: something that must
// wait for a held sync did not (a window, not an expiry).
func requireNotYet(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal(what)
	case <-time.After(20 * time.Millisecond):
	}
}

// While the node leads, StoreLogs returns before its fdatasync; the
// entries are readable at once and durable only once the syncer's sync is
// through. The next batch is written only after that sync (at most one
// batch is ever unsynced: see TestLogStoreDeferredSyncSurvivesPowerLossAtAnyMoment).
func TestLogStoreDeferredSyncRunsBehindTheWriter(t *testing.T) {
	g := newGatedFS()
	s := openTestLog(t, t.TempDir(), logStoreOptions{FS: g})
	require.NoError(t, g.store(s, entries(1, 3, 1))) // synchronous: not leading yet
	require.Equal(t, int32(1), g.syncs.Load())
	var leading atomic.Bool
	leading.Store(true)
	s.deferSyncWhile(leading.Load)

	done := make(chan error, 1)
	go func() { done <- s.StoreLogs(entries(4, 6, 1)) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("a leader's StoreLogs waited for its sync")
	}
	requireRange(t, s, 1, 6)
	require.Equal(t, uint64(3), s.durableIndex(), "written, not yet durable")
	wait := waitDurableAsync(s, 6)
	require.Eventually(t, func() bool { return g.syncs.Load() == 2 }, 5*time.Second, time.Millisecond, "the syncer started a sync")
	stored := make(chan error, 1)
	go func() { stored <- s.StoreLogs(entries(7, 9, 1)) }()
	select {
	case <-wait:
		t.Fatal("durable before its sync returned")
	case <-stored:
		t.Fatal("a batch was written while the one before it was not synced")
	case <-time.After(20 * time.Millisecond):
	}
	g.gate <- struct{}{}
	require.NoError(t, <-wait)
	require.NoError(t, <-stored, "the next batch is written once the sync before it is through")
	require.GreaterOrEqual(t, s.durableIndex(), uint64(6))
	wait = waitDurableAsync(s, 9)
	g.gate <- struct{}{} // its own sync, behind the writer again
	require.NoError(t, <-wait)
	require.Equal(t, uint64(9), s.durableIndex())

	// Back to follower: StoreLogs syncs before it returns.
	leading.Store(false)
	require.NoError(t, g.store(s, entries(10, 10, 1)))
	require.Equal(t, int32(4), g.syncs.Load())
	require.Equal(t, uint64(10), s.durableIndex())
	close(g.gate)
}

// A deferred sync that fails fails the log: waiters get ErrLogFailed
// (the FSM then applies nothing), so does every later write, and reopened
// the log holds at least what was durable.
func TestLogStoreDeferredSyncFailureFailsTheLog(t *testing.T) {
	dir := t.TempDir()
	ff := &fsxtest.Faulty{}
	s, err := openLogStore(dir, logStoreOptions{FS: ff})
	require.NoError(t, err)
	require.NoError(t, s.StoreLogs(entries(1, 2, 1)))
	s.deferSyncWhile(func() bool { return true })
	ff.Fail(fsxtest.OpSync, 1, fsxtest.ENOSPC)
	require.NoError(t, s.StoreLogs(entries(3, 4, 1)), "the write itself went through")
	err = s.waitDurable(4)
	require.ErrorIs(t, err, ErrLogFailed)
	require.ErrorIs(t, err, fsxtest.ENOSPC)
	require.ErrorIs(t, s.StoreLogs(entries(5, 5, 1)), ErrLogFailed)
	require.ErrorIs(t, s.DeleteRange(4, 4), ErrLogFailed)
	require.Equal(t, uint64(2), s.durableIndex())
	require.NoError(t, s.Close())

	s = openTestLog(t, dir, logStoreOptions{})
	last, err := s.LastIndex()
	require.NoError(t, err)
	require.GreaterOrEqual(t, last, uint64(2))
}

// A suffix deletion makes pending writes durable first and moves the
// durable index back: entries written anew at those indexes wait for
// their own sync.
func TestLogStoreDeferredSyncAndSuffixDeletion(t *testing.T) {
	g := newGatedFS()
	s := openTestLog(t, t.TempDir(), logStoreOptions{FS: g, PreallocBytes: -1})
	var leading atomic.Bool
	leading.Store(true)
	s.deferSyncWhile(leading.Load)
	require.NoError(t, g.store(s, entries(1, 8, 1))) // a new segment: synchronous
	require.Equal(t, uint64(8), s.durableIndex())

	require.NoError(t, s.StoreLogs(entries(9, 10, 1))) // pending
	leading.Store(false)                               // stepped down; the new leader's log differs from 6 on
	done := make(chan error, 1)
	go func() { done <- s.DeleteRange(6, 10) }()
	var err error
	for deleted := false; !deleted; { // the sync of 9..10 (the syncer's or the deletion's), the truncation's
		select {
		case g.gate <- struct{}{}:
		case err = <-done:
			deleted = true
		}
	}
	require.NoError(t, err)
	require.Equal(t, uint64(5), s.durableIndex())
	leading.Store(true)
	require.NoError(t, s.StoreLogs(entries(6, 7, 2)))
	wait := waitDurableAsync(s, 7)
	requireNotYet(t, wait, "a rewritten entry counted as durable before its sync")
	g.gate <- struct{}{}
	require.NoError(t, <-wait)
	requireEntry(t, s, testEntry(7, 2))
	close(g.gate)
}

// Close syncs what was written and not yet synced, and wakes waiters for
// entries never written.
func TestLogStoreCloseSyncsDeferredWrites(t *testing.T) {
	dir := t.TempDir()
	g := newGatedFS()
	close(g.gate) // syncs run freely
	s, err := openLogStore(dir, logStoreOptions{FS: g})
	require.NoError(t, err)
	s.deferSyncWhile(func() bool { return true })
	require.NoError(t, s.StoreLogs(entries(1, 5, 1)))
	never := waitDurableAsync(s, 100)
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-never, errLogClosed)
	require.Equal(t, uint64(5), s.durableIndex())
	s = openTestLog(t, dir, logStoreOptions{})
	requireRange(t, s, 1, 5)
}

// The leader tells followers a commit index no higher than its own
// durable index, on the pipeline and on single AppendEntries.
func TestCommitClampCapsTheLeaderCommitIndex(t *testing.T) {
	_, a := raft.NewInmemTransport("a")
	_, b := raft.NewInmemTransport("b")
	a.Connect("b", b)
	b.Connect("a", a)
	defer a.Close()
	defer b.Close()
	var durable atomic.Uint64
	durable.Store(4)
	tr, ok := clampCommits(a, durable.Load)
	require.True(t, ok)
	seen := make(chan uint64, 4)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case rpc := <-b.Consumer():
				seen <- rpc.Command.(*raft.AppendEntriesRequest).LeaderCommitIndex
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			case <-stop:
				return
			}
		}
	}()
	req := func(commit uint64) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{Term: 1, LeaderCommitIndex: commit}
	}
	require.NoError(t, tr.AppendEntries("b", "b", req(10), &raft.AppendEntriesResponse{}))
	require.Equal(t, uint64(4), <-seen)
	require.NoError(t, tr.AppendEntries("b", "b", req(3), &raft.AppendEntriesResponse{}))
	require.Equal(t, uint64(3), <-seen)

	p, err := tr.AppendEntriesPipeline("b", "b")
	require.NoError(t, err)
	defer p.Close()
	durable.Store(8)
	_, err = p.AppendEntries(req(10), &raft.AppendEntriesResponse{})
	require.NoError(t, err)
	require.Equal(t, uint64(8), <-seen)
	_, pre := tr.(raft.WithPreVote)
	require.True(t, pre, "pre-vote stays available")
}

// A log emptied by a conflicting suffix that was all of it may start again
// lower than it ended; the entries written there are not durable before
// their own sync (found by TestLogStoreMatchesAModel).
func TestLogStoreEmptiedAndRestartedLowerWaitsForItsSync(t *testing.T) {
	g := newGatedFS()
	s := openTestLog(t, t.TempDir(), logStoreOptions{FS: g})
	var leading atomic.Bool
	s.deferSyncWhile(leading.Load)
	require.NoError(t, g.store(s, entries(5, 6, 1)))
	done := make(chan error, 1)
	go func() { done <- s.DeleteRange(5, 6) }()
	for deleted := false; !deleted; {
		select {
		case g.gate <- struct{}{}:
		case err := <-done:
			require.NoError(t, err)
			deleted = true
		}
	}
	leading.Store(true)
	require.NoError(t, g.store(s, entries(2, 3, 2))) // deleted all: a new segment, synchronous
	require.Equal(t, uint64(3), s.durableIndex())
	require.NoError(t, s.StoreLogs(entries(4, 6, 2))) // deferred
	require.Equal(t, uint64(3), s.durableIndex(), "5 and 6 of the deleted log do not count")
	wait := waitDurableAsync(s, 6)
	requireNotYet(t, wait, "durable before its sync")
	g.gate <- struct{}{}
	require.NoError(t, <-wait)
	close(g.gate)
}
