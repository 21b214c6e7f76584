package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
	"github.com/hashicorp/raft"
)

// ErrLogFailed: a write or fsync of raft's log failed; the log refuses
// every later write (what reached the disk is unknown until it is opened
// again, which repairs a torn tail).
var ErrLogFailed = errors.New("raft log failed")

// errLogClosed is answered after Close.
var errLogClosed = errors.New("raft log closed")

// DefaultSegmentBytes is the size past which the raft log starts a new
// segment file.
const DefaultSegmentBytes = 64 << 20

// DefaultPreallocBytes is how far past its end a segment is extended with
// zeros at a time. An append into space already written (with zeros)
// changes no file metadata, so its fdatasync writes the data only: no
// journal commit, which on a disk shared with other writers is what makes
// a sync slow.
const DefaultPreallocBytes = 4 << 20

// logStore is raft's LogStore: append-only segment files of CRC-framed
// entries (raftlog_format.go) with the file position of every entry in
// memory. StoreLogs costs one write and one fsync (plus a directory fsync
// when it starts a segment). Deleting a prefix (compaction) records the
// new first index in a small file replaced atomically, then removes the
// segments it covers whole; deleting a suffix (a new leader's conflicting
// entries) removes and truncates files and fsyncs before it returns, so
// the deleted entries cannot come back after a crash.
type logStore struct {
	dir      string
	fs       fsx.FS
	log      *slog.Logger
	segBytes int64
	prealloc int64

	wmu sync.Mutex // one writer at a time: StoreLogs, DeleteRange, Close
	buf []byte     // frames of the batch being written (under wmu)

	mu        sync.RWMutex // the fields below; writers hold wmu too
	segs      []*segment
	locs      []entryLoc // locs[i] is the entry first+i
	first     uint64
	metaFirst uint64 // entries below it are deleted (the "first" file)
	failed    error
	closed    bool

	batches, entries, syncNanos atomic.Uint64 // logStats

	// Deferred syncs (raftlog_defer.go).
	deferCond atomic.Pointer[func() bool]
	unsynced  *segment      // written by a deferred StoreLogs, not synced yet (under wmu)
	pending   atomic.Bool   // unsynced != nil, read without wmu (syncedReads)
	syncMu    sync.Mutex    // one fdatasync-and-mark at a time; taken after wmu
	durable   atomic.Uint64 // entries up to it are on disk; changed under mu
	durCond   *sync.Cond    // on mu: durable moved, or the log failed or closed
	syncOnce  sync.Once
	stopOnce  sync.Once
	kick      chan struct{}
	stopSync  chan struct{}
	syncDone  chan struct{}
}

// logStats counts the log's writes (benchmarks report them).
type logStats struct {
	Batches   uint64 `json:"batches"`    // fdatasyncs of written entries
	Entries   uint64 `json:"entries"`    // entries they made durable
	SyncNanos uint64 `json:"sync_nanos"` // time spent in their fsyncs
}

func (s *logStore) stats() logStats {
	return logStats{Batches: s.batches.Load(), Entries: s.entries.Load(), SyncNanos: s.syncNanos.Load()}
}

type segment struct {
	first uint64 // index of its first entry: the file name
	path  string
	f     fsx.File
	size  int64 // where its frames end
	alloc int64 // the file's length: zeros from size on
}

type entryLoc struct {
	seg *segment
	off int64
	n   int64
}

// logStoreOptions are openLogStore's knobs; zero values are defaults.
type logStoreOptions struct {
	FS           fsx.FS // nil = fsx.OS
	Logger       *slog.Logger
	SegmentBytes int64
	// PreallocBytes: 0 = DefaultPreallocBytes, negative = none.
	PreallocBytes int64
}

func segmentName(first uint64) string { return fmt.Sprintf("%020d%s", first, segmentSuffix) }

// openLogStore opens (or creates) the log in dir. A torn last batch is
// cut; any other damage is refused with ErrLogCorrupt.
func openLogStore(dir string, o logStoreOptions) (*logStore, error) {
	if o.FS == nil {
		o.FS = fsx.OS
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.PreallocBytes == 0 {
		o.PreallocBytes = DefaultPreallocBytes
	}
	s := &logStore{dir: dir, fs: o.FS, log: o.Logger, segBytes: o.SegmentBytes, prealloc: max(o.PreallocBytes, 0)}
	s.durCond = sync.NewCond(&s.mu)
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	meta, err := loadKV(s.fs, s.firstPath())
	if err != nil {
		return nil, err
	}
	if v := meta["first"]; len(v) == 8 {
		s.metaFirst = binary.LittleEndian.Uint64(v)
	}
	names, err := segmentFiles(dir)
	if err != nil {
		return nil, err
	}
	if err := s.load(names); err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("raft log %s: %w", dir, err)
	}
	// What was read may be only in the page cache (a leader's deferred
	// batch when its process died): make it durable before calling it so.
	if err := s.syncTail(); err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("raft log %s: %w", dir, err)
	}
	s.durable.Store(s.lastLocked())
	return s, nil
}

func (s *logStore) firstPath() string { return filepath.Join(s.dir, "first") }

// segmentFiles lists dir's segments by first index.
func segmentFiles(dir string) ([]uint64, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var firsts []uint64
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), segmentSuffix)
		if !ok || de.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil || segmentName(n) != de.Name() {
			return nil, fmt.Errorf("%s: not a segment name: %w", de.Name(), ErrLogCorrupt)
		}
		firsts = append(firsts, n)
	}
	slices.Sort(firsts)
	return firsts, nil
}

// load scans every segment, cuts a torn tail, drops what the first index
// deleted and builds the index.
func (s *logStore) load(firsts []uint64) error {
	for i, first := range firsts {
		path := filepath.Join(s.dir, segmentName(first))
		data, err := s.fs.ReadFile(path)
		if err != nil {
			return err
		}
		tail := i == len(firsts)-1
		frames, end, torn, err := scanSegment(data, tail)
		if err != nil {
			return fmt.Errorf("%s: %w", segmentName(first), err)
		}
		if len(frames) > 0 && frames[0].index != first {
			return fmt.Errorf("%s starts with entry %d: %w", segmentName(first), frames[0].index, ErrLogCorrupt)
		}
		alloc := int64(len(data))
		if torn {
			if err := s.cut(path, end); err != nil {
				return err
			}
			s.log.Warn("cluster: raft log: torn last batch cut", "segment", segmentName(first), "offset", end, "bytes", int64(len(data))-end)
			alloc = end
		}
		if len(frames) == 0 || frames[len(frames)-1].index < s.metaFirst {
			// Empty after the cut, or wholly deleted by a compaction
			// that stopped before it removed the file.
			if err := s.fs.Remove(path); err != nil {
				return err
			}
			continue
		}
		f, err := s.fs.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		seg := &segment{first: first, path: path, f: f, size: end, alloc: alloc}
		s.segs = append(s.segs, seg)
		for _, fi := range frames {
			if fi.index < s.metaFirst {
				continue
			}
			want := s.first + uint64(len(s.locs))
			if len(s.locs) == 0 {
				s.first = fi.index
			} else if fi.index != want {
				return fmt.Errorf("%s: entry %d where %d was due: %w", segmentName(first), fi.index, want, ErrLogCorrupt)
			}
			s.locs = append(s.locs, entryLoc{seg: seg, off: fi.off, n: fi.n})
		}
	}
	return nil
}

// cut truncates a torn tail off path, durably.
func (s *logStore) cut(path string, end int64) error {
	f, err := s.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(end)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func (s *logStore) closeFiles() {
	for _, seg := range s.segs {
		_ = seg.f.Close()
	}
	s.segs = nil
}

// usable is the error of a closed or failed log (under wmu).
func (s *logStore) usable() error {
	if s.closed {
		return errLogClosed
	}
	return s.failedErr()
}

func (s *logStore) failedErr() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.failed
}

// fail marks the log failed after a write or sync it may have half done.
func (s *logStore) fail(op string, err error) error {
	failed := fmt.Errorf("%s: %w: %w", op, err, ErrLogFailed)
	s.mu.Lock()
	if s.failed == nil {
		s.failed = failed
	}
	s.durCond.Broadcast()
	s.mu.Unlock()
	s.log.Error("cluster: raft log failed", "op", op, "err", err)
	return failed
}

// FirstIndex is the first entry's index, 0 when the log is empty.
func (s *logStore) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, errLogClosed
	}
	if len(s.locs) == 0 {
		return 0, nil
	}
	return s.first, nil
}

// LastIndex is the last entry's index, 0 when the log is empty.
func (s *logStore) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, errLogClosed
	}
	return s.lastLocked(), nil
}

func (s *logStore) lastLocked() uint64 {
	if len(s.locs) == 0 {
		return 0
	}
	return s.first + uint64(len(s.locs)) - 1
}

// GetLog reads entry index into l; raft.ErrLogNotFound when the log does
// not hold it.
func (s *logStore) GetLog(index uint64, l *raft.Log) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return errLogClosed
	}
	if len(s.locs) == 0 || index < s.first || index > s.lastLocked() {
		s.mu.RUnlock()
		return raft.ErrLogNotFound
	}
	loc := s.locs[index-s.first]
	b := make([]byte, loc.n)
	_, err := loc.seg.f.ReadAt(b, loc.off)
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("raft log: read entry %d: %w", index, err)
	}
	return decodeFrame(b, index, l)
}

// StoreLog appends one entry.
func (s *logStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// IsMonotonic tells raft that entries must follow the last one without a
// gap, so after restoring a snapshot raft deletes the whole log instead of
// leaving a gap (raft.MonotonicLogStore).
func (s *logStore) IsMonotonic() bool { return true }

// StoreLogs appends logs as one batch: one write and one fsync (deferred
// to the syncer while the node leads: raftlog_defer.go). The first must
// follow the last entry (any index when the log is empty), the rest follow
// each other. A failed write or fsync fails the log.
func (s *logStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.checkBatch(logs); err != nil {
		return err
	}
	// At most one batch is ever written and not yet synced, so a power
	// loss tears at most the last batch, which Open cuts: with two, it
	// could keep the later one and damage the earlier, which Open must
	// refuse as corruption. So a batch waits for the sync in flight (and
	// syncs a deferred batch the syncer has not reached) before it is
	// written — and before a new segment is created, which would make the
	// unsynced batch's segment one that is not the last.
	s.syncMu.Lock()
	if err := s.syncUnsynced(); err != nil {
		s.syncMu.Unlock()
		return err
	}
	next := logs[0].Index
	seg, created, err := s.segmentFor(next)
	if err != nil {
		s.syncMu.Unlock()
		return err
	}
	deferred := !created && s.deferring()
	if deferred {
		s.syncMu.Unlock()
	} else {
		defer s.syncMu.Unlock()
	}
	locs := make([]entryLoc, len(logs))
	b := s.buf[:0]
	for i, l := range logs {
		off := len(b)
		b = appendFrame(b, l, seg.size)
		locs[i] = entryLoc{seg: seg, off: seg.size + int64(off), n: int64(len(b) - off)}
	}
	s.buf = b
	if cap(s.buf) > 16<<20 {
		s.buf = nil
	}
	if err := s.extend(seg, seg.size+int64(len(b))); err != nil {
		return s.fail("preallocate", err)
	}
	if _, err := seg.f.WriteAt(b, seg.size); err != nil {
		return s.fail("write", err)
	}
	if !deferred {
		t0 := time.Now()
		if err := datasync(seg.f); err != nil {
			return s.fail("fsync", err)
		}
		s.syncNanos.Add(uint64(time.Since(t0)))
		s.batches.Add(1)
		if created {
			if err := s.fs.SyncDir(s.dir); err != nil {
				return s.fail("fsync directory", err)
			}
		}
	}
	s.mu.Lock()
	if created {
		s.segs = append(s.segs, seg)
	}
	if len(s.locs) == 0 {
		s.first = next
		if s.durable.Load() >= next {
			// An emptied log may start again lower than it ended.
			s.durable.Store(next - 1)
		}
	}
	s.locs = append(s.locs, locs...)
	seg.size += int64(len(b))
	s.mu.Unlock()
	if !deferred {
		s.setUnsynced(nil)
		s.markDurable(logs[len(logs)-1].Index)
		return nil
	}
	s.setUnsynced(seg)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// extend writes zeros past seg's allocation when end is beyond it, one
// PreallocBytes step past end (not past SegmentBytes); the batch's
// fdatasync makes them durable with it.
func (s *logStore) extend(seg *segment, end int64) error {
	if end <= seg.alloc || s.prealloc == 0 {
		return nil
	}
	to := end + min(s.prealloc, max(s.segBytes-end, 0))
	for seg.alloc < to {
		n := min(int64(len(zeros)), to-seg.alloc)
		if _, err := seg.f.WriteAt(zeros[:n], seg.alloc); err != nil {
			return err
		}
		seg.alloc += n
	}
	return nil
}

// checkBatch refuses a batch that does not follow the last entry or
// whose entries do not follow each other; the log stays usable.
func (s *logStore) checkBatch(logs []*raft.Log) error {
	next := logs[0].Index
	if len(s.locs) > 0 && next != s.lastLocked()+1 {
		return fmt.Errorf("raft log: entry %d does not follow the last entry %d: %w", next, s.lastLocked(), ErrInvalid)
	}
	for i, l := range logs {
		if l.Index != next+uint64(i) {
			return fmt.Errorf("raft log: batch entry %d is %d, not %d: %w", i, l.Index, next+uint64(i), ErrInvalid)
		}
		if n := frameBodyMin + len(l.Data) + len(l.Extensions); n > maxFrameBody {
			return fmt.Errorf("raft log: entry %d of %d bytes, at most %d: %w", l.Index, n, maxFrameBody, ErrInvalid)
		}
	}
	return nil
}

// segmentFor returns the segment entry next is written to: the last one,
// or a new one (created set) when there is none or it is full.
func (s *logStore) segmentFor(next uint64) (*segment, bool, error) {
	if len(s.locs) == 0 && next < s.metaFirst {
		// After deleting everything a new log may start lower (a
		// conflicting suffix that was the whole log).
		if err := s.setMetaFirst(next); err != nil {
			return nil, false, s.fail("record first index", err)
		}
	}
	if seg := s.tail(); seg != nil && seg.size < s.segBytes {
		return seg, false, nil
	}
	path := filepath.Join(s.dir, segmentName(next))
	f, err := s.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, false, s.fail("create segment", err)
	}
	return &segment{first: next, path: path, f: f}, true, nil
}

func (s *logStore) tail() *segment {
	if len(s.segs) == 0 {
		return nil
	}
	return s.segs[len(s.segs)-1]
}

func (s *logStore) setMetaFirst(first uint64) error {
	if err := saveKV(s.fs, s.firstPath(), map[string][]byte{"first": binary.LittleEndian.AppendUint64(nil, first)}); err != nil {
		return err
	}
	s.metaFirst = first
	return nil
}

// DeleteRange deletes entries min..max (inclusive): a prefix, a suffix or
// all of the log; raft never deletes from the middle. A failure fails the
// log.
func (s *logStore) DeleteRange(min, max uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	last := s.lastLocked()
	if min > max || len(s.locs) == 0 || max < s.first || min > last {
		return nil
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := s.syncUnsynced(); err != nil {
		return err
	}
	if min > s.first || max >= last {
		// A suffix (or all): what follows is written anew.
		s.mu.Lock()
		if d := s.durable.Load(); d >= min && min > 0 {
			s.durable.Store(min - 1)
		} else if min == 0 {
			s.durable.Store(0)
		}
		s.mu.Unlock()
	}
	switch {
	case min <= s.first && max >= last:
		return s.deleteAll(max)
	case min <= s.first:
		return s.deletePrefix(max)
	case max >= last:
		return s.deleteSuffix(min)
	}
	return fmt.Errorf("raft log: delete %d..%d from the middle of %d..%d: %w", min, max, s.first, last, ErrInvalid)
}

// deletePrefix records max+1 as the first index, then removes the
// segments holding only entries before it.
func (s *logStore) deletePrefix(max uint64) error {
	if err := s.setMetaFirst(max + 1); err != nil {
		return s.fail("record first index", err)
	}
	s.mu.Lock()
	s.locs = slices.Clone(s.locs[max+1-s.first:])
	s.first = max + 1
	k := 0
	for k < len(s.segs)-1 && s.segs[k+1].first <= s.first {
		k++
	}
	gone := slices.Clone(s.segs[:k])
	s.segs = slices.Delete(s.segs, 0, k)
	s.mu.Unlock()
	for _, seg := range gone {
		_ = seg.f.Close()
		if err := s.fs.Remove(seg.path); err != nil {
			return s.fail("remove segment", err)
		}
	}
	return nil
}

// deleteSuffix removes the entries from min on: later segments are
// removed (newest first), the one holding min is truncated, and both are
// made durable before it returns.
func (s *logStore) deleteSuffix(min uint64) error {
	s.mu.Lock()
	loc := s.locs[min-s.first]
	si := slices.Index(s.segs, loc.seg)
	keep := si + 1
	if loc.off == 0 {
		keep = si // min starts its segment: remove the whole file
	}
	gone := slices.Clone(s.segs[keep:])
	s.segs = s.segs[:keep]
	s.locs = s.locs[:min-s.first]
	loc.seg.size, loc.seg.alloc = loc.off, loc.off
	s.mu.Unlock()
	for i := len(gone) - 1; i >= 0; i-- {
		_ = gone[i].f.Close()
		if err := s.fs.Remove(gone[i].path); err != nil {
			return s.fail("remove segment", err)
		}
	}
	if len(gone) > 0 {
		if err := s.fs.SyncDir(s.dir); err != nil {
			return s.fail("fsync directory", err)
		}
	}
	if loc.off > 0 {
		if err := loc.seg.f.Truncate(loc.off); err != nil {
			return s.fail("truncate", err)
		}
		if err := loc.seg.f.Sync(); err != nil {
			return s.fail("fsync", err)
		}
	}
	return nil
}

// deleteAll empties the log: the first index moves past max, then every
// segment is removed.
func (s *logStore) deleteAll(max uint64) error {
	if err := s.setMetaFirst(max + 1); err != nil {
		return s.fail("record first index", err)
	}
	s.mu.Lock()
	gone := s.segs
	s.segs, s.locs, s.first = nil, nil, 0
	s.mu.Unlock()
	for _, seg := range gone {
		_ = seg.f.Close()
		if err := s.fs.Remove(seg.path); err != nil {
			return s.fail("remove segment", err)
		}
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return s.fail("fsync directory", err)
	}
	return nil
}

// Close syncs what a deferred StoreLogs wrote and closes the segment
// files. Idempotent.
func (s *logStore) Close() error {
	s.stopSyncer()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var errs []error
	if !s.closed && s.failedErr() == nil {
		s.syncMu.Lock()
		errs = append(errs, s.syncUnsynced())
		s.syncMu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.durCond.Broadcast()
	for _, seg := range s.segs {
		errs = append(errs, seg.f.Close())
	}
	return errors.Join(errs...)
}
