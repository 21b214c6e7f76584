package pop

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Offsets stores each group's committed offset per queue, fenced by an
// epoch that changes on every reset. *offset.Manager satisfies it; a nil
// Options.Offsets uses a MemoryOffsets.
//
// Committed and Epoch are called on every pop and ack and must answer from
// memory. CommitFenced runs outside the Service's mutexes (it may write
// and fsync a file) but the commits of one group@topic are serialized
// through it, in order, and an Ack waits for its commit: implementations
// must not block for long. (A *MemoryOffsets, which never blocks, is
// committed to under the group@topic's mutex.)
type Offsets interface {
	// Committed returns the next offset to consume and whether one was
	// ever committed.
	Committed(group, topic string, queueID int) (int64, bool)
	// Epoch returns the queue's current reset epoch.
	Epoch(group, topic string, queueID int) uint64
	// CommitFenced stores offset unless epoch is no longer current, in
	// which case it must refuse with an error and store nothing.
	CommitFenced(group, topic string, queueID int, offset int64, epoch uint64) error
}

type offsetKey struct {
	group, topic string
	queue        int
}

type offsetRecord struct {
	key       offsetKey
	offset    int64 // offset and committed: guarded by MemoryOffsets.mu
	committed bool
	epoch     atomic.Uint64 // written under MemoryOffsets.mu, read without it
}

// MemoryOffsets is an in-memory Offsets, the default of a Service. It is
// safe for concurrent use and survives a Service restart if the host keeps
// it, which makes it handy in tests.
type MemoryOffsets struct {
	mu sync.Mutex
	m  map[offsetKey]*offsetRecord
	// last is the record used last: the acks of one queue find it
	// without hashing their key, and Epoch reads it without mu.
	last atomic.Pointer[offsetRecord]
}

// NewMemoryOffsets returns an empty MemoryOffsets.
func NewMemoryOffsets() *MemoryOffsets {
	return &MemoryOffsets{m: make(map[offsetKey]*offsetRecord)}
}

var noRecord offsetRecord

// lookup returns k's record or nil, through last; callers hold mu.
func (o *MemoryOffsets) lookup(k offsetKey) *offsetRecord {
	if r := o.last.Load(); r != nil && r.key == k {
		return r
	}
	r := o.m[k]
	if r != nil {
		o.last.Store(r)
	}
	return r
}

func (o *MemoryOffsets) get(k offsetKey) *offsetRecord {
	if r := o.lookup(k); r != nil {
		return r
	}
	return &noRecord
}

// record returns k's record, creating it.
func (o *MemoryOffsets) record(k offsetKey) *offsetRecord {
	r := o.lookup(k)
	if r == nil {
		r = &offsetRecord{key: k}
		o.m[k] = r
	}
	return r
}

// Committed implements Offsets.
func (o *MemoryOffsets) Committed(group, topic string, queueID int) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.get(offsetKey{group, topic, queueID})
	return r.offset, r.committed
}

// Epoch implements Offsets.
func (o *MemoryOffsets) Epoch(group, topic string, queueID int) uint64 {
	k := offsetKey{group, topic, queueID}
	if r := o.last.Load(); r != nil && r.key == k {
		return r.epoch.Load() // the common case: no lock, no hashing
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.get(k).epoch.Load()
}

// CommitFenced implements Offsets: it refuses (ErrStaleEpoch) a commit
// whose epoch is not the current one.
func (o *MemoryOffsets) CommitFenced(group, topic string, queueID int, offset int64, epoch uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := offsetKey{group, topic, queueID}
	r := o.lookup(k)
	if r == nil {
		if epoch != 0 {
			return fmt.Errorf("commit %s@%s/%d offset %d epoch %d (current 0): %w",
				group, topic, queueID, offset, epoch, ErrStaleEpoch)
		}
		r = o.record(k)
	}
	if cur := r.epoch.Load(); cur != epoch {
		return fmt.Errorf("commit %s@%s/%d offset %d epoch %d (current %d): %w",
			group, topic, queueID, offset, epoch, cur, ErrStaleEpoch)
	}
	r.offset, r.committed = offset, true
	return nil
}

// Reset moves the committed offset and bumps the epoch; it returns the new
// epoch. A pop Service sees it on its next pop of the queue.
func (o *MemoryOffsets) Reset(group, topic string, queueID int, offset int64) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.record(offsetKey{group, topic, queueID})
	r.offset, r.committed = offset, true
	return r.epoch.Add(1)
}
