package offset

import (
	"fmt"
	"sync"

	"github.com/brokercore/brokercore/store"
)

// ProcessQueue is one assignment of a queue to this consumer: its epoch, the
// next offset to pull and the messages pulled but not yet taken by the
// consumer. A pull is issued for one process queue and answered through its
// Deliver; once the process queue is dropped, Deliver refuses (ErrDropped)
// and the pull must not be re-issued. A dropped process queue stays dropped.
//
// Methods on a nil *ProcessQueue behave as on a dropped one.
type ProcessQueue struct {
	table *QueueTable
	queue Queue
	epoch uint64

	mu      sync.Mutex
	dropped bool
	next    int64
	buf     []*store.Message
	bytes   int64
}

// Queue returns the queue this process queue belongs to.
func (pq *ProcessQueue) Queue() Queue {
	if pq == nil {
		return Queue{}
	}
	return pq.queue
}

// Epoch returns the offset epoch this process queue was created under.
func (pq *ProcessQueue) Epoch() uint64 {
	if pq == nil {
		return 0
	}
	return pq.epoch
}

// NextOffset returns the offset the next pull starts at: the QueueOffset of
// the last delivered message + 1 (the starting offset before any delivery).
func (pq *ProcessQueue) NextOffset() int64 {
	if pq == nil {
		return 0
	}
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.next
}

// Dropped reports whether the process queue was taken out of its table.
func (pq *ProcessQueue) Dropped() bool {
	if pq == nil {
		return true
	}
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.dropped
}

// Deliver buffers the answer of a pull. It returns ErrDropped (buffering
// nothing) once the process queue is dropped, and ErrBackpressure (buffering
// nothing) when the batch would take a non-empty buffer past the table's
// MaxBuffered or MaxBufferedBytes; an empty buffer always takes one batch. A
// batch with a nil message is refused with ErrInvalid. Bytes are counted as
// len(Body). The process queue keeps the slice elements (not msgs itself)
// until Take hands them out; callers must not modify the messages after.
func (pq *ProcessQueue) Deliver(msgs []*store.Message) error {
	if pq == nil {
		return fmt.Errorf("offset: deliver to nil process queue: %w", ErrDropped)
	}
	var size int64
	for i, m := range msgs {
		if m == nil {
			pq.table.st.bad.Add(1)
			return fmt.Errorf("offset: deliver to %s/%d: message %d is nil: %w", pq.queue.Topic, pq.queue.QueueID, i, ErrInvalid)
		}
		size += int64(len(m.Body))
	}
	t := pq.table
	pq.mu.Lock()
	if pq.dropped {
		pq.mu.Unlock()
		t.st.rejectedDropped.Add(1)
		t.log.Debug("offset: delivery to dropped process queue refused; pull not re-issued",
			"topic", pq.queue.Topic, "queue", pq.queue.QueueID, "epoch", pq.epoch, "messages", len(msgs))
		return fmt.Errorf("offset: deliver to %s/%d epoch %d: %w", pq.queue.Topic, pq.queue.QueueID, pq.epoch, ErrDropped)
	}
	if len(msgs) == 0 {
		pq.mu.Unlock()
		return nil
	}
	if len(pq.buf) > 0 && (len(pq.buf)+len(msgs) > t.maxMsgs || pq.bytes+size > t.maxBytes) {
		n, b := len(pq.buf), pq.bytes
		pq.mu.Unlock()
		t.st.backpressure.Add(1)
		t.log.Debug("offset: process queue full, pull must wait", "topic", pq.queue.Topic,
			"queue", pq.queue.QueueID, "buffered", n, "bytes", b, "batch", len(msgs))
		return fmt.Errorf("offset: deliver %d messages to %s/%d holding %d (%d bytes): %w",
			len(msgs), pq.queue.Topic, pq.queue.QueueID, n, b, ErrBackpressure)
	}
	pq.buf = append(pq.buf, msgs...)
	pq.bytes += size
	pq.next = msgs[len(msgs)-1].QueueOffset + 1
	pq.mu.Unlock()
	t.st.delivered.Add(uint64(len(msgs)))
	return nil
}

// Take removes up to max buffered messages, oldest first, and hands them to
// the caller, who owns the returned slice. A dropped process queue has none.
func (pq *ProcessQueue) Take(max int) []*store.Message {
	if pq == nil || max <= 0 {
		return nil
	}
	pq.mu.Lock()
	n := min(max, len(pq.buf))
	if n == 0 {
		pq.mu.Unlock()
		return nil
	}
	out := make([]*store.Message, n)
	copy(out, pq.buf)
	clear(pq.buf[:n])
	pq.buf = pq.buf[n:]
	if len(pq.buf) == 0 {
		pq.buf = nil // let the backing array go
	}
	for _, m := range out {
		pq.bytes -= int64(len(m.Body))
	}
	pq.mu.Unlock()
	pq.table.st.taken.Add(uint64(n))
	return out
}

// Buffered returns how many messages (and body bytes) wait to be taken.
// A dropped process queue holds none.
func (pq *ProcessQueue) Buffered() (msgs int, bytes int64) {
	if pq == nil {
		return 0, 0
	}
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return len(pq.buf), pq.bytes
}

// FencedCommitter is what ProcessQueue.Commit needs; *Manager satisfies it.
type FencedCommitter interface {
	CommitFenced(group, topic string, queueID int, offset int64, epoch uint64) error
}

// Commit commits offset for this process queue's queue under its epoch. A
// dropped process queue is refused with ErrDropped; one whose epoch was
// overtaken by a reset is refused by c with ErrStaleEpoch. The process
// queue's lock is held during the call, so once a drop has returned no
// commit of this instance can still land; c must therefore not call back
// into the QueueTable.
func (pq *ProcessQueue) Commit(c FencedCommitter, group string, offset int64) error {
	if pq == nil {
		return fmt.Errorf("offset: commit from nil process queue: %w", ErrDropped)
	}
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if pq.dropped {
		return fmt.Errorf("offset: commit %s/%s/%d at %d from dropped process queue (epoch %d): %w",
			group, pq.queue.Topic, pq.queue.QueueID, offset, pq.epoch, ErrDropped)
	}
	return c.CommitFenced(group, pq.queue.Topic, pq.queue.QueueID, offset, pq.epoch)
}

// drop marks the process queue dropped and releases its buffer. The table
// calls it under its own lock, in the critical section that takes the
// process queue out of the table.
func (pq *ProcessQueue) drop(why string) {
	pq.mu.Lock()
	if pq.dropped {
		pq.mu.Unlock()
		return
	}
	pq.dropped = true
	n := len(pq.buf)
	pq.buf, pq.bytes = nil, 0
	pq.mu.Unlock()
	pq.table.st.drops.Add(1)
	pq.table.st.released.Add(uint64(n))
	pq.table.log.Debug("offset: process queue dropped", "why", why, "topic", pq.queue.Topic,
		"queue", pq.queue.QueueID, "epoch", pq.epoch, "released", n)
}
