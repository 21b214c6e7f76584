package offset

import (
	"log/slog"
	"sync"
	"sync/atomic"
)

// Queue names one message queue on the consumer side.
type Queue struct {
	Topic   string
	QueueID int
}

func (q Queue) valid() bool { return q.Topic != "" && q.QueueID >= 0 }

// QueueTable is the consumer's table of assigned queues, each with exactly
// one live *ProcessQueue. Whoever takes a process queue out of the table
// (Assign over an existing one, Reset, Revoke) drops that very instance in
// the same critical section, so no pull issued for it can deliver afterwards:
// the field report's orphan pull request cannot exist.
//
// The table does not compare epochs: the latest call wins. A host applies
// resets of one queue in the order the broker handed out their epochs.
// It is safe for concurrent use.
type QueueTable struct {
	maxMsgs  int
	maxBytes int64
	log      *slog.Logger

	mu     sync.Mutex
	queues map[Queue]*ProcessQueue

	st tableCounters
}

type tableCounters struct {
	assigns, resets, revokes, drops, released            atomic.Uint64
	delivered, taken, rejectedDropped, backpressure, bad atomic.Uint64
}

// TableStats is a snapshot of a QueueTable's counters.
type TableStats struct {
	Queues           uint64 `json:"queues"`            // assigned queues (live process queues)
	Assigns          uint64 `json:"assigns"`           // Assign calls that installed a process queue
	Resets           uint64 `json:"resets"`            // Reset calls that installed a process queue
	Revokes          uint64 `json:"revokes"`           // Revoke calls that removed a queue
	Dropped          uint64 `json:"dropped"`           // process queues dropped
	ReleasedMessages uint64 `json:"released_messages"` // buffered messages released by drops
	Delivered        uint64 `json:"delivered"`         // messages accepted by Deliver
	Taken            uint64 `json:"taken"`             // messages handed out by Take
	DeliverDropped   uint64 `json:"deliver_dropped"`   // Deliver calls refused with ErrDropped (answers to orphaned pulls)
	Backpressure     uint64 `json:"backpressure"`      // Deliver calls refused with ErrBackpressure
	Invalid          uint64 `json:"invalid"`           // calls with bad input
	BufferedMessages uint64 `json:"buffered_messages"` // messages buffered across live process queues
	BufferedBytes    uint64 `json:"buffered_bytes"`    // their body bytes
}

// NewQueueTable returns an empty table. Zero or negative limits take their
// defaults (DefaultMaxBuffered, DefaultMaxBufferedBytes).
func NewQueueTable(opts TableOptions) *QueueTable {
	opts = opts.withDefaults()
	return &QueueTable{
		maxMsgs:  opts.MaxBuffered,
		maxBytes: opts.MaxBufferedBytes,
		log:      opts.Logger,
		queues:   make(map[Queue]*ProcessQueue),
	}
}

// Assign installs a new live process queue for q, starting to pull at next
// under epoch, and returns it. A previous process queue of q is dropped in
// the same critical section. For an invalid queue (empty topic, negative
// queue ID) or a negative next it returns nil and changes nothing; the
// methods of a nil *ProcessQueue behave as on a dropped one.
func (t *QueueTable) Assign(q Queue, next int64, epoch uint64) *ProcessQueue {
	return t.install("assign", q, next, epoch, &t.st.assigns)
}

// Reset drops q's live process queue and installs a new one at next under
// epoch, atomically; a Reset of an unassigned queue assigns it. Invalid
// input returns nil and changes nothing.
func (t *QueueTable) Reset(q Queue, next int64, epoch uint64) *ProcessQueue {
	return t.install("reset", q, next, epoch, &t.st.resets)
}

func (t *QueueTable) install(op string, q Queue, next int64, epoch uint64, counter *atomic.Uint64) *ProcessQueue {
	if !q.valid() || next < 0 {
		t.st.bad.Add(1)
		t.log.Debug("offset: rejected invalid queue table request", "op", op, "topic", q.Topic,
			"queue", q.QueueID, "next", next)
		return nil
	}
	pq := newProcessQueue(t, q, next, epoch)
	t.mu.Lock()
	old := t.queues[q]
	if old != nil {
		old.drop(op)
	}
	t.queues[q] = pq
	t.mu.Unlock()
	counter.Add(1)
	if old != nil {
		t.log.Info("offset: process queue replaced", "op", op, "topic", q.Topic, "queue", q.QueueID,
			"old_epoch", old.epoch, "epoch", epoch, "next", next)
	}
	return pq
}

func newProcessQueue(t *QueueTable, q Queue, next int64, epoch uint64) *ProcessQueue {
	return &ProcessQueue{table: t, queue: q, epoch: epoch, next: next}
}

// Revoke drops q's live process queue and removes q from the table,
// atomically. It reports whether q was assigned.
func (t *QueueTable) Revoke(q Queue) bool {
	t.mu.Lock()
	old, ok := t.queues[q]
	if ok {
		old.drop("revoke")
		delete(t.queues, q)
	}
	t.mu.Unlock()
	if ok {
		t.st.revokes.Add(1)
		t.log.Info("offset: queue revoked", "topic", q.Topic, "queue", q.QueueID, "epoch", old.epoch)
	}
	return ok
}

// Get returns q's live process queue.
func (t *QueueTable) Get(q Queue) (*ProcessQueue, bool) {
	t.mu.Lock()
	pq, ok := t.queues[q]
	t.mu.Unlock()
	return pq, ok
}

// Len returns the number of assigned queues.
func (t *QueueTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queues)
}

// Range calls f for each live process queue (in no particular order) until
// f returns false. f runs outside the table's lock, on a snapshot taken
// first: it may call the table, and a process queue it sees may have been
// dropped since.
func (t *QueueTable) Range(f func(*ProcessQueue) bool) {
	t.mu.Lock()
	pqs := make([]*ProcessQueue, 0, len(t.queues))
	for _, pq := range t.queues {
		pqs = append(pqs, pq)
	}
	t.mu.Unlock()
	for _, pq := range pqs {
		if !f(pq) {
			return
		}
	}
}

// Stats returns a snapshot of the counters and of what is buffered now.
func (t *QueueTable) Stats() TableStats {
	s := TableStats{
		Assigns:          t.st.assigns.Load(),
		Resets:           t.st.resets.Load(),
		Revokes:          t.st.revokes.Load(),
		Dropped:          t.st.drops.Load(),
		ReleasedMessages: t.st.released.Load(),
		Delivered:        t.st.delivered.Load(),
		Taken:            t.st.taken.Load(),
		DeliverDropped:   t.st.rejectedDropped.Load(),
		Backpressure:     t.st.backpressure.Load(),
		Invalid:          t.st.bad.Load(),
	}
	t.Range(func(pq *ProcessQueue) bool {
		n, b := pq.Buffered()
		s.Queues++
		s.BufferedMessages += uint64(n)
		s.BufferedBytes += uint64(b)
		return true
	})
	return s
}
