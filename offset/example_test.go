package offset_test

import (
	"errors"
	"fmt"

	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/store"
)

// A consumer commits under the epoch it was assigned with; an admin reset
// bumps the epoch, so the consumer's old progress cannot overwrite it, and
// the consumer's table drops the old process queue so its in-flight pull
// cannot deliver any more.
func Example() {
	m, _ := offset.Open(offset.Options{}) // in memory; set Path to persist
	defer m.Close()
	table := offset.NewQueueTable(offset.TableOptions{})
	q := offset.Queue{Topic: "orders", QueueID: 0}

	pq := table.Assign(q, 0, m.Epoch("billing", q.Topic, q.QueueID))
	_ = pq.Deliver([]*store.Message{{Topic: q.Topic, QueueOffset: 0}, {Topic: q.Topic, QueueOffset: 1}})
	msgs := pq.Take(32)
	fmt.Println("took", len(msgs), "next pull at", pq.NextOffset())

	// An admin resets the group back to offset 0 while the consumer works.
	epoch, _ := m.Reset("billing", q.Topic, q.QueueID, 0)
	err := pq.Commit(m, "billing", 2)
	fmt.Println("old commit refused:", errors.Is(err, offset.ErrStaleEpoch))

	// The consumer applies the reset: the old process queue is dropped.
	fresh := table.Reset(q, 0, epoch)
	err = pq.Deliver([]*store.Message{{Topic: q.Topic, QueueOffset: 2}})
	fmt.Println("old pull refused:", errors.Is(err, offset.ErrDropped), "live queues:", table.Len())

	_ = fresh.Commit(m, "billing", 1)
	committed, _ := m.Committed("billing", q.Topic, q.QueueID)
	fmt.Println("committed", committed, "epoch", m.Epoch("billing", q.Topic, q.QueueID))
	// Output:
	// took 2 next pull at 2
	// old commit refused: true
	// old pull refused: true live queues: 1
	// committed 1 epoch 1
}
