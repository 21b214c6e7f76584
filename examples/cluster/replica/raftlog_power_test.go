package replica

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
	"github.com/brokercore/brokercore/examples/cluster/internal/testkit"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// powerFS remembers, per file, the batches written since its last Sync
// began: what a power loss may take away, any of their sectors in any
// order. Zeros (preallocation) are not batches. A batch written while
// another is still unsynced is a violation: a power loss could then keep
// the later batch and lose part of the earlier one, a damaged frame
// followed by an intact batch, which openLogStore refuses as corruption.
type powerFS struct {
	fsx.FS
	mu         sync.Mutex
	dirty      map[string][][2]int64 // path -> unsynced batch ranges
	violations []string
	hold       atomic.Bool   // Syncs wait for gate
	gate       chan struct{} // closed: held Syncs go on
	held       chan struct{} // a Sync is held (one send per held Sync)
	release    sync.Once
	failSync   atomic.Bool // Syncs fail
}

// letGo lets held Syncs (and all later ones) through.
func (p *powerFS) letGo() {
	p.hold.Store(false)
	p.release.Do(func() { close(p.gate) })
}

func newPowerFS() *powerFS {
	return &powerFS{FS: fsx.OS, dirty: map[string][][2]int64{}, gate: make(chan struct{}), held: make(chan struct{}, 64)}
}

func (p *powerFS) OpenFile(name string, flag int, perm os.FileMode) (fsx.File, error) {
	f, err := p.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &powerFile{File: f, p: p}, nil
}

type powerFile struct {
	fsx.File
	p *powerFS
}

func (f *powerFile) WriteAt(b []byte, off int64) (int, error) {
	if !allZero(b) {
		f.p.mu.Lock()
		if d := f.p.dirty[f.Name()]; len(d) > 0 {
			f.p.violations = append(f.p.violations, fmt.Sprintf("batch at %d written while the batch at %d is not synced", off, d[0][0]))
		}
		f.p.dirty[f.Name()] = append(f.p.dirty[f.Name()], [2]int64{off, off + int64(len(b))})
		f.p.mu.Unlock()
	}
	return f.File.WriteAt(b, off)
}

func (f *powerFile) Sync() error {
	f.p.mu.Lock()
	n := len(f.p.dirty[f.Name()]) // what this sync covers
	f.p.mu.Unlock()
	if f.p.hold.Load() {
		f.p.held <- struct{}{}
		<-f.p.gate
	}
	err := f.File.Sync()
	if f.p.failSync.Load() {
		err = errors.New("injected sync failure")
	}
	if err == nil {
		f.p.mu.Lock()
		f.p.dirty[f.Name()] = f.p.dirty[f.Name()][n:]
		f.p.mu.Unlock()
	}
	return err
}

// image copies dir as a power loss now could leave it: every unsynced
// batch loses a random choice of its 512-byte sectors: each keeps what it
// held before, zeros (preallocation) where the batch went.
func (p *powerFS) image(t *testing.T, dir string, rng *rand.Rand) string {
	to := t.TempDir()
	require.NoError(t, testkit.CopyCrashImage(dir, to))
	p.mu.Lock()
	defer p.mu.Unlock()
	for path, ranges := range p.dirty {
		if len(ranges) == 0 {
			continue
		}
		f, err := os.OpenFile(filepath.Join(to, filepath.Base(path)), os.O_RDWR, 0)
		require.NoError(t, err)
		for _, r := range ranges {
			for s := r[0] &^ 511; s < r[1]; s += 512 {
				if rng.IntN(2) == 0 { // this sector keeps its old bytes: zeros where the batch went
					from, to := max(s, r[0]), min(s+512, r[1])
					_, err := f.WriteAt(make([]byte, to-from), from)
					require.NoError(t, err)
				}
			}
		}
		require.NoError(t, f.Close())
	}
	return to
}

// A leader's log defers its fdatasyncs, but never has two batches
// unsynced at once: a power loss at any moment — here, while the sync of
// the last batch is held and the next batch is being stored — leaves at
// most a torn last batch, which Open cuts, and everything that was
// durable survives it.
func TestLogStoreDeferredSyncSurvivesPowerLossAtAnyMoment(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		p := newPowerFS()
		o := logStoreOptions{FS: p}
		if round%2 == 1 {
			o.SegmentBytes = 2 << 10 // batches roll segments: a new one must not come before the last batch's sync
		}
		s := openTestLog(t, t.TempDir(), o)
		t.Cleanup(p.letGo) // before the log's Close, which syncs
		s.deferSyncWhile(func() bool { return true })
		next := uint64(1)
		batch := func() []*raft.Log {
			n := 1 + uint64(rng.IntN(8))
			next += n
			return entries(next-n, next-1, 1)
		}
		store := func() error { return s.StoreLogs(batch()) }
		for range 1 + rng.IntN(30) { // the first batch of a segment is synced at once
			require.NoError(t, store())
		}
		require.NoError(t, s.waitDurable(next-1))
		p.hold.Store(true)
		held := make(chan error, 1)
		a := batch()
		go func() { held <- s.StoreLogs(a) }() // its sync (the syncer's, or its own for a new segment's first batch) is held
		<-p.held
		durable := s.durableIndex()
		done := make(chan error, 1)
		b := batch()
		go func() { done <- s.StoreLogs(b) }() // the next batch comes while it is held
		stored := false
		select {
		case err := <-done: // only a log that lets two batches be unsynced gets here
			require.NoError(t, err)
			stored = true
		case <-time.After(50 * time.Millisecond):
		}
		img := p.image(t, s.dir, rng)
		p.mu.Lock()
		violations := slices.Clone(p.violations)
		p.mu.Unlock()
		require.Empty(t, violations, "round %d", round)

		r, err := openLogStore(img, logStoreOptions{})
		require.NoError(t, err, "round %d: the power-loss image opens", round)
		last, err := r.LastIndex()
		require.NoError(t, err)
		require.GreaterOrEqual(t, last, durable, "round %d: nothing durable is lost", round)
		for i := uint64(1); i <= last; i++ {
			requireEntry(t, r, testEntry(i, 1))
		}
		require.NoError(t, r.Close())
		p.letGo()
		require.NoError(t, <-held)
		if !stored {
			require.NoError(t, <-done) // with the held sync through, the next batch is stored
		}
		require.NoError(t, s.waitDurable(next-1))
	}
}

// A node that has stopped leading answers for entries it holds only once
// they are on its disk: hashicorp/raft's follower reads entries it already
// has (GetLog) instead of storing them, and counts them as stored in its
// answer, so while not leading a read first syncs a deferred write.
func TestLogStoreReadAfterLeadingWaitsForDeferredWrites(t *testing.T) {
	p := newPowerFS()
	s := openTestLog(t, t.TempDir(), logStoreOptions{FS: p})
	t.Cleanup(p.letGo)
	require.NoError(t, s.StoreLogs(entries(1, 3, 1))) // a segment's first batch: synced at once
	var leading atomic.Bool
	leading.Store(true)
	s.deferSyncWhile(leading.Load)
	reads := syncedReads{LogStore: s, ls: s}

	p.hold.Store(true)
	require.NoError(t, s.StoreLogs(entries(4, 6, 1)))
	<-p.held // its sync has started and is held
	var l raft.Log
	require.NoError(t, reads.GetLog(5, &l), "a leader's read does not wait for its sync")
	require.Equal(t, uint64(3), s.durableIndex())

	leading.Store(false) // deposed: entry 5 may be counted on this disk from now on
	got := make(chan error, 1)
	go func() { got <- reads.GetLog(5, &l) }()
	requireNotYet(t, got, "a follower read entry 5 before it was on its disk")
	p.letGo()
	require.NoError(t, <-got)
	require.Equal(t, uint64(6), s.durableIndex())
	require.Equal(t, uint64(5), l.Index)
}

// A new segment is not created while the last batch of the one before it
// is unsynced: a power loss could otherwise keep the new segment's file
// and lose part of that batch, which Open must refuse (damage in a
// segment that is not the last).
func TestLogStoreNewSegmentWaitsForTheDeferredSyncBeforeIt(t *testing.T) {
	p := newPowerFS()
	dir := t.TempDir()
	s := openTestLog(t, dir, logStoreOptions{FS: p, SegmentBytes: 2 << 10})
	t.Cleanup(p.letGo)
	require.NoError(t, s.StoreLogs(entries(1, 2, 1))) // a segment's first batch: synced at once
	s.deferSyncWhile(func() bool { return true })
	p.hold.Store(true)
	require.NoError(t, s.StoreLogs(entries(3, 40, 1))) // deferred; fills the segment past SegmentBytes
	<-p.held
	segments := func() int {
		names, err := segmentFiles(dir)
		require.NoError(t, err)
		return len(names)
	}
	require.Equal(t, 1, segments())
	done := make(chan error, 1)
	go func() { done <- s.StoreLogs(entries(41, 41, 1)) }() // needs a new segment
	select {
	case err := <-done:
		require.NoError(t, err)
		t.Fatal("a new segment was written while the batch before it was unsynced")
	case <-time.After(50 * time.Millisecond):
	}
	require.Equal(t, 1, segments(), "no new segment file while the last batch is unsynced")
	p.letGo()
	require.NoError(t, <-done)
	require.Equal(t, 2, segments())
	require.NoError(t, s.waitDurable(41))
}

// Open calls durable only what is on disk: after a process crash a
// leader's deferred batch may survive only in the page cache, so Open
// syncs the last segment (and the directory) before it reports it durable.
func TestLogStoreOpenSyncsWhatItReads(t *testing.T) {
	dir := t.TempDir()
	s := openTestLog(t, dir, logStoreOptions{})
	require.NoError(t, s.StoreLogs(entries(1, 5, 1)))
	require.NoError(t, s.Close())

	p := newPowerFS()
	p.mu.Lock()
	names, err := segmentFiles(dir)
	require.NoError(t, err)
	last := filepath.Join(dir, segmentName(names[len(names)-1]))
	p.dirty[last] = [][2]int64{{0, 1}} // as if the process died before its sync
	p.mu.Unlock()
	r := openTestLog(t, dir, logStoreOptions{FS: p})
	p.mu.Lock()
	left := len(p.dirty[last])
	p.mu.Unlock()
	require.Zero(t, left, "Open synced the last segment")
	require.Equal(t, uint64(5), r.durableIndex())
}

// A deposed leader whose deferred sync failed does not answer for the
// entries of that batch: a read of its log fails with the log's error.
func TestLogStoreReadAfterAFailedDeferredSyncFails(t *testing.T) {
	p := newPowerFS()
	s := openTestLog(t, t.TempDir(), logStoreOptions{FS: p})
	require.NoError(t, s.StoreLogs(entries(1, 3, 1)))
	var leading atomic.Bool
	leading.Store(true)
	s.deferSyncWhile(leading.Load)
	reads := syncedReads{LogStore: s, ls: s}
	p.failSync.Store(true)
	require.NoError(t, s.StoreLogs(entries(4, 6, 1)), "deferred: the failure comes later")
	require.ErrorIs(t, s.waitDurable(6), ErrLogFailed)
	leading.Store(false)
	var l raft.Log
	require.ErrorIs(t, reads.GetLog(5, &l), ErrLogFailed)
}
