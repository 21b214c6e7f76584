package pop

import (
	"fmt"
	"sync"
)

// Offsets stores each group's committed offset per queue, fenced by an
// epoch that changes on every reset. *offset.Manager satisfies it; a nil
// Options.Offsets uses a MemoryOffsets.
//
// Committed and Epoch are called on every pop and ack and must answer from
// memory. CommitFenced runs outside the Service's mutexes (it may write
// and fsync a file) but the commits of one group@topic are serialized
// through it, in order, and an Ack waits for its commit: implementations
// must not block for long.
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
	offset    int64
	committed bool
	epoch     uint64
}

// MemoryOffsets is an in-memory Offsets, the default of a Service. It is
// safe for concurrent use and survives a Service restart if the host keeps
// it, which makes it handy in tests.
type MemoryOffsets struct {
	mu sync.Mutex
	m  map[offsetKey]*offsetRecord // a pointer: a commit hashes its key once
}

// NewMemoryOffsets returns an empty MemoryOffsets.
func NewMemoryOffsets() *MemoryOffsets {
	return &MemoryOffsets{m: make(map[offsetKey]*offsetRecord)}
}

var noRecord offsetRecord

func (o *MemoryOffsets) get(k offsetKey) *offsetRecord {
	if r := o.m[k]; r != nil {
		return r
	}
	return &noRecord
}

// record returns k's record, creating it.
func (o *MemoryOffsets) record(k offsetKey) *offsetRecord {
	r := o.m[k]
	if r == nil {
		r = new(offsetRecord)
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
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.get(offsetKey{group, topic, queueID}).epoch
}

// CommitFenced implements Offsets: it refuses (ErrStaleEpoch) a commit
// whose epoch is not the current one.
func (o *MemoryOffsets) CommitFenced(group, topic string, queueID int, offset int64, epoch uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := offsetKey{group, topic, queueID}
	r := o.m[k]
	if r == nil {
		if epoch != 0 {
			return fmt.Errorf("commit %s@%s/%d offset %d epoch %d (current 0): %w",
				group, topic, queueID, offset, epoch, ErrStaleEpoch)
		}
		r = o.record(k)
	}
	if r.epoch != epoch {
		return fmt.Errorf("commit %s@%s/%d offset %d epoch %d (current %d): %w",
			group, topic, queueID, offset, epoch, r.epoch, ErrStaleEpoch)
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
	r.epoch++
	return r.epoch
}
