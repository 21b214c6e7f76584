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

	"github.com/brokercore/brokercore/internal/fsx"
)

// Store is an append-only message log with a per-queue index. It is safe for
// concurrent use.
//
// Lock order: retainMu → ckptMu → ioMu → mu. mu guards all in-memory state;
// appends hold it exclusively to place and encode their records and write
// them to the wal (a write to the page cache), reads hold it shared; no
// fsync happens under it. ioMu serialises fsyncs with retention swapping
// segment handles. Under SyncGroup one goroutine at a time (the leader,
// holding syncing) fsyncs what the appenders wrote, while the next group
// is being written (group commit, pipelined).
type Store struct {
	dir    string
	walDir string
	opts   Options
	log    *slog.Logger
	fs     fsx.FS     // every file the store writes that is not the log
	files  *fileCache // the open index files (at most Options.MaxOpenFiles)
	lw     *logWriter // appends to the tail segment (logwrite.go)
	lockF  *os.File

	retainMu sync.Mutex
	ckptMu   sync.Mutex
	ioMu     sync.Mutex
	mu       sync.RWMutex

	closed      bool
	filesClosed bool
	failErr     error

	queues      map[string]map[int]*queue
	nq          int
	order       []*queue // every queue, sorted by (topic, id) when orderSorted (the checkpoint's order)
	orderSorted bool
	// The checkpoint's copy of every queue's offsets, in s.order's order
	// (ckptMu; written under mu): only the queues on snapDirty (their index
	// took an entry) are copied again, unless snapStale (a queue's offsets
	// changed otherwise: retention, release, a rebuild, Open) or the order
	// changed. Then its queues, encoded, and the file.
	ckptSnap            []ckptQueue
	snapDirty           []*queue
	snapStale           bool
	ckptQueues, ckptOut []byte
	segs                []*segment // in order; the last one is being written
	lidx                *indexFile // log offset -> entry, for ReadAt
	dirty               []*indexFile
	jr                  *journal // the index journal (journal.go)
	oldJournal          *journal // the generation before a compaction, until a checkpoint names the new one
	jgen                uint64   // the newest journal generation used

	tailStart uint64 // first wal index of the segment being written
	tailSize  int64  // its bytes, as the store placed them (verified against the file)
	lastFrame frameCheck
	// What is in the wal (verify.go checks it): the log offsets below
	// walWritten, the tail's size and its last record. Under SyncGroup the
	// records of a group-commit round wait in pend (with the segment rolls
	// they cause) and the leader writes them in one write; otherwise each
	// Append writes its own.
	walWritten int64
	walTail    int64
	walFrame   frameCheck
	pend       frames
	spare      frames
	written    int64 // next log offset to assign (and to reach the wal)
	verified   int64 // log offsets below it are where the store's positions say (verify.go)
	durable    int64 // log offsets below it are fsynced
	logMin     int64 // oldest log offset still in a segment
	retained   uint64
	lastStored time.Time
	dirDirty   bool               // a segment was created since the last directory fsync
	ckptDue    bool               // a segment rolled, or ckptBytes were appended: write a checkpoint
	ckptAt     int64              // tailSize-independent count of bytes appended at the last checkpoint
	appended   int64              // bytes appended since Open
	damaged    map[int64]struct{} // log offsets of records judged damaged (lost.go); reads skip them
	pending    []pendingVis
	waiters    []waiter      // SyncGroup appends waiting for their fsync, in log order
	waitRecs   int           // the messages of waiters
	syncing    bool          // SyncGroup: a leader is fsyncing
	lastGroup  int           // messages around the last fsync: answered + still waiting
	lastFsync  time.Duration // how long it took
	// The leader waiting for the messages of the last group (gather): the
	// appender that brings waitRecs to gatherWant signals gathered.
	gatherWant  int
	gathered    chan struct{}
	gatherTimer *time.Timer  // the leader's (one at a time)
	answer      []chan error // the waiters an fsync answers, outside mu (ioMu)
	walCond     *sync.Cond

	batch  frames
	encBuf []byte
	plBuf  []placed

	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{} // closed when Close begins (Done)
	hooks hooks         // Subscribe
	wg    sync.WaitGroup

	stats counters

	// The key index (keyindex.go), under mu: the entries of segments whose
	// key file is not written yet, in log order; the written files, by
	// segment; whether Open loaded it.
	keyMem     []keyEntry
	keyFiles   []keyFile
	keysLoaded bool
	// floors are the released topics (release.go), under mu.
	floors map[string]int64

	// syncFile is (*os.File).Sync and logWrite is lw.write; tests replace
	// them to inject failures.
	syncFile func(*os.File) error
	logWrite func(*frames) error
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
// torn tail is cut back to the last whole batch (logged with what was cut),
// and the index is rebuilt for whatever the log shows it lacks. Damage that
// is not a torn tail (a bad record followed by intact ones, a missing or
// short segment) is refused with a *CorruptError; Repair cuts it
// explicitly.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if opts.Sync < SyncGroup || opts.Sync > SyncNone {
		return nil, fmt.Errorf("%w: unknown sync policy %d", ErrInvalid, opts.Sync)
	}
	if opts.MaxMessageSize > MaxBatchBytes {
		return nil, fmt.Errorf("%w: MaxMessageSize %d above %d", ErrInvalid, opts.MaxMessageSize, MaxBatchBytes)
	}
	s := &Store{
		dir:       dir,
		walDir:    filepath.Join(dir, "log"),
		opts:      opts,
		log:       opts.Logger,
		fs:        opts.fs,
		files:     newFileCache(opts.fs, opts.MaxOpenFiles),
		queues:    map[string]map[int]*queue{},
		kick:      make(chan struct{}, 1),
		gathered:  make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		syncFile:  (*os.File).Sync,
		retained:  1,
		snapStale: true,
	}
	s.logWrite = func(fr *frames) error { return s.lw.write(fr) }
	s.walCond = sync.NewCond(&s.mu)
	s.gatherTimer = time.NewTimer(time.Hour)
	s.gatherTimer.Stop()
	if err := os.MkdirAll(filepath.Join(dir, "index"), 0o750); err != nil {
		return nil, openErr(err)
	}
	lockF, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s.lockF = lockF
	if err := s.open(); err != nil {
		s.closeFiles()
		s.log.Debug("store: open failed", "dir", dir, "err", err)
		return nil, openErr(err)
	}
	s.wg.Add(1)
	go s.commitLoop()
	if (opts.MaxAge > 0 || opts.MaxBytes > 0) && opts.RetainEvery > 0 {
		s.wg.Add(1)
		go s.retainLoop()
	}
	return s, nil
}

// openErr makes an I/O failure of Open (a full disk) an ErrFailed; damage
// stays ErrCorrupt.
func openErr(err error) error {
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrFailed) || errors.Is(err, ErrInvalid) {
		return err
	}
	return fmt.Errorf("%w: open: %w", ErrFailed, err)
}

func (s *Store) open() error {
	if err := os.MkdirAll(s.walDir, 0o750); err != nil {
		return err
	}
	ck, err := readCheckpoint(s.fs, s.dir)
	if err != nil {
		s.log.Warn("store: unreadable checkpoint, rebuilding the index from the log", "dir", s.dir, "err", err)
		ck = nil
	}
	facts := factsOf(ck)
	segs, err := listSegments(s.walDir)
	if err != nil {
		return err
	}
	if !facts.known && len(segs) > 0 && segs[0].start > 1 {
		s.log.Warn("store: no readable checkpoint says what retention removed; taking the log to start where its first segment does",
			"dir", s.dir, "segment", segs[0].path, "offset", int64(segs[0].start)-1)
	}
	read, closeRead := openEntryReader(filepath.Join(s.dir, "index", logIndexName))
	ins, err := inspectLog(s.walDir, segs, facts, read)
	closeRead()
	if err != nil {
		return err
	}
	if err := s.cutTail(ins); err != nil {
		return err
	}
	if err := s.checkWal(ins, facts); err != nil {
		return err
	}
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
	tail := segs[len(segs)-1]
	s.tailSize, s.tailStart = tail.size, tail.start
	s.retained = max(s.retained, segs[0].start)
	// wal may just have created the directory and the first segment.
	if err := syncDir(s.walDir); err != nil {
		return err
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return err
	}
	s.logMin = int64(segs[0].start) - 1
	if err := s.syncFile(tail.f); err != nil {
		return err
	}
	if s.lw, err = openLogWriter(s.walDir, tail); err != nil {
		return err
	}
	s.durable, s.verified = s.written, s.written
	s.walWritten, s.walTail = s.written, s.tailSize // all of it is in the wal
	if err := s.loadIndex(ck, ins.cut.bytes); err != nil {
		return err
	}
	if s.written > int64(tail.start)-1 {
		e, err := s.lidx.get(s.written - 1)
		if err != nil {
			return err
		}
		s.lastFrame = frameCheck{pos: e.pos, size: e.size}
	}
	s.walFrame = s.lastFrame
	changed, err := s.openReleased()
	if err != nil {
		return err
	}
	if err := s.openKeys(); err != nil {
		return err
	}
	if changed {
		return s.checkpoint()
	}
	return nil
}

// checkWal opens the log with tidwall/wal, which checks every segment's
// name and the tail's framing, creates the first segment of a new log and
// finishes an interrupted retention; then closes it. It sets written.
func (s *Store) checkWal(ins *inspection, facts logFacts) error {
	l, err := wal.Open(s.walDir, &wal.Options{
		NoSync:           true, // the store fsyncs
		SegmentSize:      s.opts.SegmentSize,
		SegmentCacheSize: 1,
		AllowEmpty:       true,
		DirPerms:         0o750,
		FilePerms:        0o640,
	})
	if err != nil {
		return fmt.Errorf("open wal %s: %w", s.walDir, err)
	}
	err = s.checkWalOpen(l, ins, facts)
	if cerr := l.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close wal %s: %w", s.walDir, cerr)
	}
	return err
}

func (s *Store) checkWalOpen(l *wal.Log, ins *inspection, facts logFacts) error {
	last, err := l.LastIndex()
	if err != nil {
		return err
	}
	s.written = int64(last) // wal index = log offset + 1
	if len(ins.segs) > 0 && s.written != ins.next {
		return fmt.Errorf("%w: wal reports last index %d, the store's scan of its segments found %d", ErrCorrupt, last, ins.next)
	}
	if facts.known {
		s.retained = facts.retained
		if first, err := l.FirstIndex(); err == nil && first < s.retained && s.retained <= last+1 {
			// Retention recorded what it removes before removing it: finish.
			if err := l.TruncateFront(s.retained); err != nil {
				return fmt.Errorf("finish retention: %w", err)
			}
		}
	}
	return nil
}

// cutTail applies the torn-tail cut inspectLog planned, and logs it.
func (s *Store) cutTail(ins *inspection) error {
	c := ins.cut
	if c.seg < 0 {
		return nil
	}
	attrs := []any{"dir", s.dir, "segment", ins.segs[c.seg].path, "position", c.pos, "bytes", c.bytes,
		"entries", c.entries, "next_log_offset", ins.next, "reason", c.reason}
	if c.durableCut > 0 {
		attrs = append(attrs, "durable_records_cut", c.durableCut)
		s.log.Error("store: recovery cut a torn log tail holding records the checkpoint recorded as durable", attrs...)
	} else {
		s.log.Warn("store: recovery cut the log tail", attrs...)
	}
	s.stats.cutBytes.Store(c.bytes)
	return applyCut(s.walDir, ins)
}

// usable reports why calls must be refused, if they must. Callers hold mu.
func (s *Store) usable() error {
	if s.closed {
		return ErrClosed
	}
	return s.failErr
}

// usableShared is usable for callers that do not hold mu.
func (s *Store) usableShared() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.usable()
}

// fail puts the store into the failed state. Callers hold mu exclusively.
func (s *Store) fail(err error) error {
	if s.failErr == nil {
		s.failErr = fmt.Errorf("%w: %w", ErrFailed, err)
		s.log.Error("store: failed; every later call returns this error until it is reopened", "dir", s.dir, "err", err)
		for _, w := range s.waiters {
			w.done <- s.failErr
		}
		s.waiters, s.waitRecs = nil, 0
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
		s.persistTailKeys()
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
	s.snapStale = true
	clear(s.snapDirty)
	s.snapDirty = s.snapDirty[:0]
	s.files.closeAll()
	s.closeJournal()
	s.lidx = nil
	s.queues = map[string]map[int]*queue{}
	s.nq = 0
	s.order = nil
	s.dirty = nil
	s.lastStored = time.Time{}
}

func (s *Store) closeFiles() error {
	for _, w := range s.waiters { // none after a normal Close: the last fsync covered them
		w.done <- ErrClosed
	}
	s.waiters, s.waitRecs = nil, 0
	var errs []error
	if err := s.lw.close(); err != nil {
		errs = append(errs, err)
	}
	s.lw = nil
	for _, sg := range s.segs {
		sg.close()
	}
	s.closeIndex()
	if s.lockF != nil {
		s.lockF.Close() // releases the flock
	}
	return errors.Join(errs...)
}
