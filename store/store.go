package store

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/wal"
)

// Store is an append-only message log with a per-queue index. It is safe for
// concurrent use.
//
// Lock order: retainMu → ckptMu → ioMu → mu. mu guards all in-memory state;
// appends hold it exclusively while writing to the wal (not while fsyncing),
// reads hold it shared. ioMu serialises fsyncs with the closing of segment
// handles by retention.
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

	tailSize   int64 // bytes in the segment being written (mirrors wal's)
	written    int64 // next log offset
	durable    int64 // log offsets below it are fsynced
	logMin     int64 // oldest log offset still in a segment
	lastStored time.Time
	dirDirty   bool // a segment was created since the last directory fsync
	ckptDue    bool // a segment rolled: write a checkpoint
	pending    []pendingVis
	waiters    []waiter // SyncGroup appends waiting for their fsync, in log order

	batch  wal.Batch
	encBuf []byte
	plBuf  []placed

	kick chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

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
		syncFile: (*os.File).Sync,
	}
	s.walWrite = func(b *wal.Batch) error { return s.wal.WriteBatch(b) }
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
		NoSync:           true, // the committer fsyncs, once per group
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

// loadIndex brings the index up to the log: from the checkpoint when it is
// consistent with the log, else rebuilt from the oldest segment.
func (s *Store) loadIndex(tail tailInfo, trust bool) error {
	ck, err := readCheckpoint(s.dir)
	if err != nil {
		s.log.Warn("store: unreadable checkpoint, rebuilding the index from the log", "dir", s.dir, "err", err)
		ck = nil
	}
	valid := trust && ck != nil && ck.next <= s.written && ck.next >= s.logMin
	fromSeg, fromPos := 0, int64(0)
	if valid {
		fromSeg = -1
		for i, sg := range s.segs {
			if sg.start == ck.segment {
				fromSeg, fromPos = i, ck.pos
			}
		}
		if ck.next == s.written {
			fromSeg = len(s.segs) // nothing to replay
		}
		valid = fromSeg >= 0
	}
	if ck != nil && !valid && trust {
		s.log.Warn("store: checkpoint does not match the log, rebuilding the index",
			"dir", s.dir, "checkpoint", ck.next, "log_min", s.logMin, "log_next", s.written)
	}
	next := s.logMin
	if valid {
		next = ck.next
		s.lastStored = ck.lastStored
	} else {
		fromSeg, fromPos = 0, 0
		if err := os.RemoveAll(filepath.Join(s.dir, "index")); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(s.dir, "index"), 0o750); err != nil {
			return err
		}
	}
	if s.lidx, err = openIndexFile(filepath.Join(s.dir, "index", "log.idx"), next); err != nil {
		return err
	}
	if valid {
		for _, cq := range ck.queues {
			q, err := s.queue(cq.topic, cq.id, true)
			if err != nil {
				return err
			}
			q.min, q.next, q.lastLog = cq.min, cq.next, cq.lastLog
			q.idx.reset(cq.next)
		}
	}
	replayed := 0
	expect := next
	err = replay(s.segs, fromSeg, fromPos, func(m *Message, sg *segment, pos int64, size int) error {
		if m.LogOffset < expect {
			return nil // before the checkpoint position: already indexed
		}
		if m.LogOffset != expect {
			return fmt.Errorf("log segment %s position %d: %w: log offset %d, expected %d", sg.path, pos, ErrCorrupt, m.LogOffset, expect)
		}
		expect++
		q, err := s.queue(m.Topic, m.QueueID, true)
		if err != nil {
			return err
		}
		if m.QueueOffset != q.next {
			if valid || m.QueueOffset < q.next {
				return fmt.Errorf("log segment %s position %d: %w: %s/%d queue offset %d, expected %d",
					sg.path, pos, ErrCorrupt, m.Topic, m.QueueID, m.QueueOffset, q.next)
			}
			q.min, q.next = m.QueueOffset, m.QueueOffset // older records were retained
		}
		e := entry{logOffset: m.LogOffset, storedAt: m.StoredAt.UnixNano(), pos: pos, size: uint32(size)}
		if err := s.lidx.add(m.LogOffset, e); err != nil {
			return err
		}
		if err := q.idx.add(q.next, e); err != nil {
			return err
		}
		q.next++
		q.lastLog = m.LogOffset
		if m.StoredAt.After(s.lastStored) {
			s.lastStored = m.StoredAt
		}
		replayed++
		return nil
	})
	if err != nil {
		return err
	}
	s.stats.replayed.Store(int64(replayed))
	if !valid && ck != nil {
		// A queue the log no longer shows: if retention took its records,
		// it keeps the offsets the checkpoint gave it (offsets never go
		// backwards, even for an emptied queue); if the tail cut took them,
		// they were never durable and it restarts where the log still had
		// records of it.
		for _, cq := range ck.queues {
			if s.queues[cq.topic][cq.id] != nil {
				continue
			}
			q, err := s.queue(cq.topic, cq.id, true)
			if err != nil {
				return err
			}
			next := cq.next
			if cq.lastLog >= s.logMin {
				next = cq.min
			}
			q.min, q.next, q.lastLog = next, next, -1
			q.idx.reset(next)
		}
	}
	if expect != s.written {
		return fmt.Errorf("%w: replay ended at log offset %d, log ends at %d", ErrCorrupt, expect, s.written)
	}
	if tail.lastStored.After(s.lastStored) {
		s.lastStored = tail.lastStored
	}
	for _, qs := range s.queues {
		for _, q := range qs {
			if err := s.raiseMin(q); err != nil {
				return err
			}
			if err := checkNewest(q); err != nil {
				return err
			}
			q.visible = q.next
		}
	}
	if s.written > s.logMin {
		e, err := s.lidx.get(s.written - 1)
		if err == nil && e.logOffset != s.written-1 {
			err = fmt.Errorf("%w: log index ends at %d, log at %d", ErrCorrupt, e.logOffset, s.written-1)
		}
		if err != nil {
			return fmt.Errorf("log index: %w", err)
		}
	}
	s.log.Info("store: opened", "dir", s.dir, "log_min", s.logMin, "log_next", s.written,
		"segments", len(s.segs), "replayed", replayed, "queues", s.nq, "cut_bytes", tail.cutBytes)
	if replayed > 0 || !valid {
		return s.checkpoint()
	}
	return nil
}

// queue returns the state of (topic, id), creating it (and its index file)
// if create is set. Callers hold mu exclusively (or are Open).
func (s *Store) queue(topic string, id int, create bool) (*queue, error) {
	if q := s.queues[topic][id]; q != nil || !create {
		return q, nil
	}
	name := base64.RawURLEncoding.EncodeToString([]byte(topic)) + "." + strconv.Itoa(id) + ".cq"
	idx, err := openIndexFile(filepath.Join(s.dir, "index", name), 0)
	if err != nil {
		return nil, err
	}
	q := &queue{topic: topic, id: id, idx: idx, lastLog: -1}
	if s.queues[topic] == nil {
		s.queues[topic] = map[int]*queue{}
	}
	s.queues[topic][id] = q
	s.nq++
	return q, nil
}

// raiseMin moves q.min up to the first offset whose record is still in the
// log (after retention dropped segments).
func (s *Store) raiseMin(q *queue) error {
	if q.min >= q.next {
		return nil
	}
	first, err := q.idx.get(q.min)
	if err != nil {
		return fmt.Errorf("%s/%d: %w", q.topic, q.queueID(), err)
	}
	if first.logOffset >= s.logMin {
		return nil
	}
	m, err := q.search(q.min, q.next, func(e entry) bool { return e.logOffset >= s.logMin })
	if err != nil {
		return err
	}
	q.min = m
	return nil
}

func (q *queue) queueID() int { return q.id }

// checkNewest verifies that a queue's index ends where its state says, so a
// damaged or stale index file is caught (and rebuilt) at Open rather than
// at a Read.
func checkNewest(q *queue) error {
	if q.next <= q.min || q.lastLog < 0 {
		return nil
	}
	e, err := q.idx.get(q.next - 1)
	if err != nil {
		return fmt.Errorf("%s/%d: %w", q.topic, q.id, err)
	}
	if e.logOffset != q.lastLog {
		return fmt.Errorf("%w: %s/%d index ends at log offset %d, expected %d", ErrCorrupt, q.topic, q.id, e.logOffset, q.lastLog)
	}
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
		if sg.f != nil {
			sg.f.Close()
		}
	}
	s.closeIndex()
	if s.lockF != nil {
		s.lockF.Close() // releases the flock
	}
	return errors.Join(errs...)
}

// Stats is a snapshot of the store's counters, for hosts to export.
type Stats struct {
	Appends       uint64 // Append calls that wrote a batch
	Messages      uint64 // messages appended
	AppendedBytes uint64 // encoded record bytes appended
	Rejected      uint64 // Append/Read calls refused for bad input
	Syncs         uint64 // log fsyncs (group commits)
	Reads         uint64 // Read and ReadAt calls
	ReadMessages  uint64 // messages returned by Read and ReadAt
	Checkpoints   uint64
	Retained      uint64 // segments dropped by retention
	RecoveryCut   int64  // bytes cut from the tail by the last Open
	Replayed      int64  // records the last Open re-indexed from the log
	Segments      int
	Queues        int
	LogMin        int64 // oldest log offset
	LogNext       int64 // next log offset
	Failed        bool
}

type counters struct {
	appends, messages, bytes, rejected, syncs, reads, readMsgs, ckpts, retained atomic.Uint64
	cutBytes, replayed                                                          atomic.Int64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Stats{
		Appends:       s.stats.appends.Load(),
		Messages:      s.stats.messages.Load(),
		AppendedBytes: s.stats.bytes.Load(),
		Rejected:      s.stats.rejected.Load(),
		Syncs:         s.stats.syncs.Load(),
		Reads:         s.stats.reads.Load(),
		ReadMessages:  s.stats.readMsgs.Load(),
		Checkpoints:   s.stats.ckpts.Load(),
		Retained:      s.stats.retained.Load(),
		RecoveryCut:   s.stats.cutBytes.Load(),
		Replayed:      s.stats.replayed.Load(),
		Segments:      len(s.segs),
		Queues:        s.nq,
		LogMin:        s.logMin,
		LogNext:       s.written,
		Failed:        s.failErr != nil,
	}
}
