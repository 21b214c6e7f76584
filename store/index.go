package store

import (
	"container/list"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
)

// The index is a set of files of fixed-size entries, RocketMQ's "consume
// queue": one file per (topic, queue) mapping a queue offset to where its
// record lives, and one for the whole log mapping a log offset the same way
// (for ReadAt). Entry n sits at byte n*entrySize, so a lookup is one pread
// and the index costs no memory per message. New entries are buffered and
// written by the next checkpoint: to their file once a block is full, else
// to the index journal (journal.go), so a checkpoint costs O(1) writes. Index files are
// derived state and never fsynced: the checkpoint says how far they were
// written, Open checks that they are (their length, their newest entry) and
// rebuilds from the log when not, and every entry a read uses is checked
// against the record it names (heal.go repairs a damaged one from the log).
const (
	entrySize    = 32
	flushBytes   = 4096     // a checkpoint writes a buffer of this many bytes to its file (else to the journal)
	maxBuffered  = 64 << 10 // an append writes a buffer this large at once: at most 64 KiB per queue wait
	logIndexName = "log.idx"
)

// entry locates one record.
//
//	[0:8]   LogOffset
//	[8:16]  StoredAt, Unix nanoseconds
//	[16:24] position of the record's bytes inside its segment
//	[24:28] record length
//	[28:32] CRC-32C of [0:28]
type entry struct {
	logOffset int64
	storedAt  int64
	pos       int64
	size      uint32
}

func (e entry) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], uint64(e.logOffset))
	binary.LittleEndian.PutUint64(b[8:], uint64(e.storedAt))
	binary.LittleEndian.PutUint64(b[16:], uint64(e.pos))
	binary.LittleEndian.PutUint32(b[24:], e.size)
	binary.LittleEndian.PutUint32(b[28:], crc.Checksum(b[:28]))
}

// decodeEntry decodes an index entry; a zeroed or garbled one is ErrCorrupt.
func decodeEntry(b []byte) (entry, error) {
	if len(b) != entrySize {
		return entry{}, fmt.Errorf("%w: index entry of %d bytes", ErrCorrupt, len(b))
	}
	if want, got := binary.LittleEndian.Uint32(b[28:]), crc.Checksum(b[:28]); want != got {
		return entry{}, fmt.Errorf("%w: index entry checksum %#08x, computed %#08x", ErrCorrupt, want, got)
	}
	e := entry{
		logOffset: int64(binary.LittleEndian.Uint64(b[0:])),
		storedAt:  int64(binary.LittleEndian.Uint64(b[8:])),
		pos:       int64(binary.LittleEndian.Uint64(b[16:])),
		size:      binary.LittleEndian.Uint32(b[24:]),
	}
	if e.logOffset < 0 || e.pos < 0 {
		return entry{}, fmt.Errorf("%w: index entry out of range", ErrCorrupt)
	}
	return e, nil
}

// indexFile is one file of entries. Entries below flushed are in the file;
// entries from flushed to flushed+len(buf)/entrySize wait in buf. The Store
// lock guards it: writers hold it exclusively, readers shared. Its file is
// open only while the fileCache keeps it so (f, elem and refs are guarded
// by the cache's mutex).
type indexFile struct {
	path    string
	c       *fileCache
	flushed int64 // number of the first entry still in buf
	buf     []byte
	queued  bool // on the store's dirty list (entries wait in buf)
	// journaled: entries below it are in the file or the index journal
	// (journal.go); q: the queue it indexes (nil for the log-wide index).
	journaled int64
	q         *queue

	f    fsx.File
	elem *list.Element
	refs int
}

func newIndexFile(c *fileCache, path string, next int64) *indexFile {
	return &indexFile{c: c, path: path, flushed: next}
}

// openIndexFile returns an index file that stays open (the log-wide one).
func openIndexFile(c *fileCache, path string, next int64) (*indexFile, error) {
	x := newIndexFile(c, path, next)
	if _, err := c.acquire(x); err != nil { // never released: pinned open
		return nil, err
	}
	return x, nil
}

// Name is the file's path.
func (x *indexFile) Name() string { return x.path }

// writeAt writes b at off of the file.
func (x *indexFile) writeAt(b []byte, off int64) error {
	f, err := x.c.acquire(x)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, off)
	x.c.release(x)
	return err
}

// readAt reads b at off of the file.
func (x *indexFile) readAt(b []byte, off int64) error {
	f, err := x.c.acquire(x)
	if err != nil {
		return err
	}
	_, err = f.ReadAt(b, off)
	x.c.release(x)
	return err
}

// size is the file's length in entries.
func (x *indexFile) size() (int64, error) {
	f, err := x.c.acquire(x)
	if err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	x.c.release(x)
	if err != nil {
		return 0, err
	}
	return fi.Size() / entrySize, nil
}

// punch frees the disk space below off (retention).
func (x *indexFile) punch(off int64) error {
	f, err := x.c.acquire(x)
	if err != nil {
		return err
	}
	err = punchHole(f, off)
	x.c.release(x)
	return err
}

// reset discards buffered entries and makes n the next entry to write.
func (x *indexFile) reset(n int64) {
	x.flushed, x.journaled = n, n
	x.buf = x.buf[:0]
}

func (x *indexFile) next() int64 { return x.flushed + int64(len(x.buf)/entrySize) }

// add appends entry number n. Entries are written densely; an n past the end
// (the first entry after retention emptied a queue, or a rebuild starting
// mid-queue) first flushes and restarts the buffer there. Callers put x on
// the store's dirty list (Store.addEntry).
func (x *indexFile) add(n int64, e entry) error {
	if n != x.next() {
		if err := x.flush(); err != nil {
			return err
		}
		x.flushed = n
	}
	at := len(x.buf)
	x.buf = append(x.buf, make([]byte, entrySize)...) // no allocation once buf has grown
	e.put(x.buf[at:])
	if len(x.buf) >= maxBuffered {
		return x.flush() // a queue that takes more than maxBuffered between two checkpoints
	}
	return nil // written by the next checkpoint (persistIndex), off the append path
}

func (x *indexFile) flush() error {
	if len(x.buf) == 0 {
		return nil
	}
	if err := x.writeAt(x.buf, x.flushed*entrySize); err != nil {
		return fmt.Errorf("write index %s: %w", x.path, err)
	}
	x.flushed += int64(len(x.buf) / entrySize)
	x.buf = x.buf[:0]
	return nil
}

// read appends entries [n, n+count) to out and returns it; on error also
// the number of the entry at fault. scratch is a buffer to pread into (it
// may be grown: the one used comes back too).
func (x *indexFile) read(out []entry, scratch []byte, n int64, count int) ([]entry, []byte, int64, error) {
	if n < x.flushed {
		k := min(int64(count), x.flushed-n)
		if int64(cap(scratch)) < k*entrySize {
			scratch = make([]byte, k*entrySize)
		}
		b := scratch[:k*entrySize]
		if err := x.readAt(b, n*entrySize); err != nil {
			return nil, scratch, n, fmt.Errorf("%w: read index %s entry %d: %v", ErrCorrupt, x.path, n, err)
		}
		for i := int64(0); i < k; i++ {
			e, err := decodeEntry(b[i*entrySize : (i+1)*entrySize])
			if err != nil {
				return nil, scratch, n + i, fmt.Errorf("index %s entry %d: %w", x.path, n+i, err)
			}
			out = append(out, e)
		}
		n += k
		count -= int(k)
	}
	for ; count > 0; count-- {
		i := n - x.flushed
		if i < 0 || (i+1)*entrySize > int64(len(x.buf)) {
			return nil, scratch, -1, fmt.Errorf("%w: index %s has no entry %d", ErrCorrupt, x.path, n)
		}
		e, err := decodeEntry(x.buf[i*entrySize : (i+1)*entrySize])
		if err != nil {
			return nil, scratch, -1, err
		}
		out = append(out, e)
		n++
	}
	return out, scratch, -1, nil
}

func (x *indexFile) get(n int64) (entry, error) {
	if n >= x.flushed {
		i := n - x.flushed
		if (i+1)*entrySize > int64(len(x.buf)) {
			return entry{}, fmt.Errorf("%w: index %s has no entry %d", ErrCorrupt, x.path, n)
		}
		return decodeEntry(x.buf[i*entrySize : (i+1)*entrySize])
	}
	if n < 0 {
		return entry{}, fmt.Errorf("%w: index entry %d", ErrCorrupt, n)
	}
	var b [entrySize]byte
	if err := x.readAt(b[:], n*entrySize); err != nil {
		return entry{}, fmt.Errorf("%w: read index %s entry %d: %v", ErrCorrupt, x.path, n, err)
	}
	return decodeEntry(b[:])
}

// queue is the state of one (topic, queue): its offsets and its index file.
type queue struct {
	topic   string
	id      int
	min     int64 // oldest readable offset (retention moves it up)
	next    int64 // next offset to assign
	lastLog int64 // log offset of the newest record, -1 if none
	visible int64 // offsets below it are readable (lags next until fsync under SyncGroup)
	idx     *indexFile
	// The checkpoint's copy of the queue (Store.ckptSnap[ord]) is stale:
	// it took an index entry since (Store.snapDirty).
	ord        int
	snapQueued bool
}

// search returns the first offset in [lo, hi) whose entry satisfies ok, or
// hi; ok must be monotonic (false…false true…true).
func (q *queue) search(lo, hi int64, ok func(entry) bool) (int64, error) {
	return q.searchWith(lo, hi, q.idx.get, ok)
}

func (q *queue) searchWith(lo, hi int64, get func(int64) (entry, error), ok func(entry) bool) (int64, error) {
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := get(mid)
		if err != nil {
			return 0, err
		}
		if ok(e) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// queue returns the state of (topic, id), creating it (and its index file)
// if create is set. Callers hold mu exclusively (or are Open).
func (s *Store) queue(topic string, id int, create bool) (*queue, error) {
	if q := s.queues[topic][id]; q != nil || !create {
		return q, nil
	}
	idx := newIndexFile(s.files, filepath.Join(s.dir, "index", encodeQueueName(topic, id)), 0)
	q := &queue{topic: topic, id: id, idx: idx, lastLog: -1}
	idx.q = q
	if s.queues[topic] == nil {
		s.queues[topic] = map[int]*queue{}
	}
	s.queues[topic][id] = q
	s.nq++
	s.order = append(s.order, q)
	s.orderSorted = false
	return q, nil
}

// addEntry adds entry n to x and keeps x on the dirty list the checkpoint
// flushes, so a checkpoint costs what changed, not the number of queues.
// Callers hold mu exclusively.
func (s *Store) addEntry(x *indexFile, n int64, e entry) error {
	if !x.queued {
		x.queued = true
		s.dirty = append(s.dirty, x)
	}
	if q := x.q; q != nil && !q.snapQueued {
		q.snapQueued = true
		s.snapDirty = append(s.snapDirty, q)
	}
	return x.add(n, e)
}

// encodeQueueName is the index file name of a queue: topics are data, never
// file paths.
func encodeQueueName(topic string, id int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(topic)) + "." + strconv.Itoa(id) + ".cq"
}
