package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tidwall/wal"
)

// Store is an append-only message log with a per-queue index. It is safe for
// concurrent use.
//
// Lock order: retainMu → ckptMu → ioMu → mu. mu guards all in-memory state;
// appends hold it exclusively to place and encode their records (and, except
// under SyncGroup, to write them to the wal), reads hold it shared; no
// fsync and no SyncGroup wal write happens under it. ioMu serialises fsyncs
// with the closing of segment handles by retention. Under SyncGroup one
// goroutine at a time (the leader, holding writing) writes and fsyncs the
// pending groups.
type Store struct {
	dir    string
	walDir string
	opts   Options
	log    *slog.Logger
	wal    *wal.Log
	lockF  *os.File

	retainMu sync.Mutex
	ckptMu   sync.Mutex
	ioMu     sync.Mutex
	mu       sync.RWMutex

	closed      bool
	filesClosed bool
	failErr     error

	queues map[string]map[int]*queue
	nq     int
	segs   []*segment // in order; the last one is being written
	lidx   *indexFile // log offset -> entry, for ReadAt

	tailStart  uint64 // first wal index of the segment being written, once pending records are in
	tailSize   int64  // its bytes then (mirrors wal's)
	written    int64  // next log offset to assign
	walNext    int64  // next log offset to reach the wal (lags written while SyncGroup records are pending)
	durable    int64  // log offsets below it are fsynced
	logMin     int64  // oldest log offset still in a segment
	lastStored time.Time
	dirDirty   bool // a segment was created since the last directory fsync
	ckptDue    bool // a segment rolled: write a checkpoint
	pending    []pendingVis
	waiters    []waiter // SyncGroup appends waiting for their fsync, in log order

	batch     wal.Batch  // SyncNone/SyncInterval: written by the appender under mu
	pend      wal.Batch  // SyncGroup: records waiting for the leader's write
	spare     wal.Batch  // the last written group's batch, for reuse
	pendN     int        // records in pend
	pendRolls []roll     // segments wal will start when pend is written
	writing   bool       // the lead is taken: a goroutine writes and fsyncs groups (lead)
	walCond   *sync.Cond // on mu; broadcast when durable moves, the lead is given up or the store fails
	encBuf    []byte
	plBuf     []placed

	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{} // closed when Close begins (Done)
	hooks hooks         // Subscribe
	wg    sync.WaitGroup

	stats counters

	// syncFile is (*os.File).Sync and walWrite is wal.WriteBatch; tests
	// replace them to inject failures.
	syncFile func(*os.File) error
	walWrite func(*wal.Batch) error
}

// pendingVis is a queue's new MaxOffset that becomes visible once the log is
// durable up to end (SyncGroup).
type pendingVis struct {
	q    *queue
	next int64
	end  int64
}

// notice is one OnAppend call to make outside the lock.
type notice struct {
	topic string
	id    int
	next  int64
}

const maxTopicLength = 255

// Open opens the store in dir, creating it if needed, and recovers it: a
// torn or corrupt tail is cut back to the last whole batch (logged with what
// was cut), and the index is rebuilt for what the last checkpoint lacks.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if opts.Sync < SyncGroup || opts.Sync > SyncNone {
		return nil, fmt.Errorf("%w: unknown sync policy %d", ErrInvalid, opts.Sync)
	}
	if opts.MaxMessageSize > MaxBatchBytes {
		return nil, fmt.Errorf("%w: MaxMessageSize %d above %d", ErrInvalid, opts.MaxMessageSize, MaxBatchBytes)
	}
	s := &Store{
		dir:      dir,
		walDir:   filepath.Join(dir, "log"),
		opts:     opts,
		log:      opts.Logger,
		queues:   map[string]map[int]*queue{},
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		syncFile: (*os.File).Sync,
	}
	s.walWrite = func(b *wal.Batch) error { return s.wal.WriteBatch(b) }
	s.walCond = sync.NewCond(&s.mu)
	if err := os.MkdirAll(filepath.Join(dir, "index"), 0o750); err != nil {
		return nil, err
	}
	if err := s.lockDir(); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.wg.Add(1)
	go s.commitLoop()
	if (opts.MaxAge > 0 || opts.MaxBytes > 0) && opts.RetainEvery > 0 {
		s.wg.Add(1)
		go s.retainLoop()
	}
	return s, nil
}

func (s *Store) open() error {
	if err := os.MkdirAll(s.walDir, 0o750); err != nil {
		return err
	}
	segs, err := listSegments(s.walDir)
	if err != nil {
		return err
	}
	// Up to the last checkpoint the log was synced: corruption there is
	// never a torn tail.
	var synced logPos
	if ck, err := readCheckpoint(s.dir); err == nil && ck != nil {
		synced = logPos{segment: ck.segment, pos: ck.pos, ok: true}
	}
	segs, tail, err := repairTail(s.walDir, segs, synced, s.log)
	if err != nil {
		return err
	}
	s.stats.cutBytes.Store(tail.cutBytes)
	s.wal, err = wal.Open(s.walDir, &wal.Options{
		NoSync:           true, // the store fsyncs, once per group
		SegmentSize:      s.opts.SegmentSize,
		SegmentCacheSize: 1,
		AllowEmpty:       true,
		DirPerms:         0o750,
		FilePerms:        0o640,
	})
	if err != nil {
		return fmt.Errorf("open wal %s: %w", s.walDir, err)
	}
	last, err := s.wal.LastIndex()
	if err != nil {
		return err
	}
	s.written = int64(last) // wal index = log offset + 1
	if segs, err = listSegments(s.walDir); err != nil {
		return err
	}
	if len(segs) == 0 {
		return fmt.Errorf("%w: wal %s has no segment", ErrCorrupt, s.walDir)
	}
	for _, sg := range segs {
		if sg.f, err = os.Open(sg.path); err != nil {
			return err
		}
	}
	s.segs = segs
	s.tailSize = segs[len(segs)-1].size
	s.tailStart = segs[len(segs)-1].start
	s.walNext = s.written
	// wal may just have created the directory and the first segment.
	for _, d := range []string{s.walDir, filepath.Join(s.dir, "index"), s.dir} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	s.logMin = int64(segs[0].start) - 1
	if err := s.syncFile(segs[len(segs)-1].f); err != nil {
		return err
	}
	if err := s.loadIndex(tail, true); err != nil {
		// The index is derived data: whatever is wrong with it (a lost or
		// damaged file), it can be rebuilt from the log.
		s.log.Warn("store: index unusable, rebuilding it from the log", "dir", s.dir, "err", err)
		s.closeIndex()
		if err := s.loadIndex(tail, false); err != nil {
			return err
		}
	}
	s.durable = s.written
	return nil
}

// usable reports why calls must be refused, if they must. Callers hold mu.
func (s *Store) usable() error {
	if s.closed {
		return ErrClosed
	}
	return s.failErr
}

// fail puts the store into the failed state. Callers hold mu exclusively.
func (s *Store) fail(err error) error {
	if s.failErr == nil {
		s.failErr = fmt.Errorf("%w: %w", ErrFailed, err)
		s.log.Error("store: failed; every later call returns this error", "dir", s.dir, "err", err)
		for _, w := range s.waiters {
			w.done <- s.failErr
		}
		s.waiters = nil
		s.walCond.Broadcast()
	}
	return s.failErr
}

// Close stops the background goroutines, lets appends already waiting on
// their fsync finish, writes a checkpoint and closes the files. Calls after
// Close return ErrClosed; Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	close(s.stop)
	s.wg.Wait() // the committer syncs everything written before it exits
	s.retainMu.Lock()
	defer s.retainMu.Unlock()
	var err error
	s.mu.Lock()
	failed := s.failErr
	s.mu.Unlock()
	if failed == nil {
		err = s.checkpoint()
	}
	s.ioMu.Lock()
	defer s.ioMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filesClosed = true
	if cerr := s.closeFiles(); err == nil {
		err = cerr
	}
	if failed != nil {
		return failed
	}
	return err
}

// closeIndex closes and forgets the index files (before a rebuild).
func (s *Store) closeIndex() {
	if s.lidx != nil {
		s.lidx.f.Close()
		s.lidx = nil
	}
	for _, qs := range s.queues {
		for _, q := range qs {
			q.idx.f.Close()
		}
	}
	s.queues = map[string]map[int]*queue{}
	s.nq = 0
	s.lastStored = time.Time{}
}

func (s *Store) closeFiles() error {
	for _, w := range s.waiters { // none after a normal Close: the last fsync covered them
		w.done <- ErrClosed
	}
	s.waiters = nil
	var errs []error
	if s.wal != nil {
		if err := s.wal.Close(); err != nil && !errors.Is(err, wal.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, sg := range s.segs {
		sg.close()
	}
	s.closeIndex()
	if s.lockF != nil {
		s.lockF.Close() // releases the flock
	}
	return errors.Join(errs...)
}
