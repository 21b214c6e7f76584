package offset

import (
	"errors"
	"fmt"
	"testing"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var qA = Queue{Topic: "orders", QueueID: 0}

func batch(from int64, n, bodySize int) []*store.Message {
	msgs := make([]*store.Message, n)
	for i := range msgs {
		msgs[i] = &store.Message{Topic: qA.Topic, QueueID: qA.QueueID, QueueOffset: from + int64(i), Body: make([]byte, bodySize)}
	}
	return msgs
}

func TestDeliverToDroppedProcessQueueIsRefusedAndBuffersNothing(t *testing.T) {
	tab := NewQueueTable(TableOptions{})
	old := tab.Assign(qA, 0, 0)
	require.NoError(t, old.Deliver(batch(0, 3, 1)))
	cur := tab.Reset(qA, 100, 1)

	assert.True(t, old.Dropped())
	n, b := old.Buffered()
	assert.Equal(t, 0, n, "dropping releases buffered messages")
	assert.Equal(t, int64(0), b)
	require.ErrorIs(t, old.Deliver(batch(3, 2, 1)), ErrDropped)
	require.ErrorIs(t, old.Deliver(nil), ErrDropped, "even an empty answer tells the puller to stop")
	assert.Nil(t, old.Take(10))
	assert.Equal(t, int64(3), old.NextOffset())

	assert.False(t, cur.Dropped())
	assert.Equal(t, uint64(1), cur.Epoch())
	assert.Equal(t, int64(100), cur.NextOffset())
	got, ok := tab.Get(qA)
	require.True(t, ok)
	assert.Same(t, cur, got)
	st := tab.Stats()
	assert.Equal(t, uint64(1), st.Dropped)
	assert.Equal(t, uint64(3), st.ReleasedMessages)
	assert.Equal(t, uint64(2), st.DeliverDropped)
}

func TestEmptyBufferAlwaysTakesOneBatchSoAnOversizedBatchCannotWedgeTheQueue(t *testing.T) {
	tab := NewQueueTable(TableOptions{MaxBuffered: 4, MaxBufferedBytes: 100})
	pq := tab.Assign(qA, 0, 0)
	require.NoError(t, pq.Deliver(batch(0, 10, 50))) // 10 msgs, 500 bytes: over both limits
	n, b := pq.Buffered()
	assert.Equal(t, 10, n)
	assert.Equal(t, int64(500), b)
	require.ErrorIs(t, pq.Deliver(batch(10, 1, 1)), ErrBackpressure)
	assert.Len(t, pq.Take(10), 10)
	require.NoError(t, pq.Deliver(batch(10, 1, 1)))
}

func TestDeliverBeyondEitherLimitReportsBackpressureAndBuffersNothing(t *testing.T) {
	tab := NewQueueTable(TableOptions{MaxBuffered: 4, MaxBufferedBytes: 100})
	pq := tab.Assign(qA, 0, 0)
	require.NoError(t, pq.Deliver(batch(0, 2, 10)))
	require.ErrorIs(t, pq.Deliver(batch(2, 3, 1)), ErrBackpressure, "messages: 2+3 > 4")
	require.ErrorIs(t, pq.Deliver(batch(2, 1, 81)), ErrBackpressure, "bytes: 20+81 > 100")
	n, b := pq.Buffered()
	assert.Equal(t, 2, n)
	assert.Equal(t, int64(20), b)
	assert.Equal(t, int64(2), pq.NextOffset(), "a refused batch does not move the pull offset")
	require.NoError(t, pq.Deliver(batch(2, 2, 40)), "exactly at both limits is fine")
	assert.Equal(t, uint64(2), tab.Stats().Backpressure)
}

func TestTakeHandsOutOldestFirst(t *testing.T) {
	tab := NewQueueTable(TableOptions{})
	pq := tab.Assign(qA, 5, 0)
	require.NoError(t, pq.Deliver(batch(5, 3, 2)))
	require.NoError(t, pq.Deliver(batch(8, 2, 2)))
	assert.Equal(t, int64(10), pq.NextOffset())
	assert.Nil(t, pq.Take(0))
	first := pq.Take(2)
	require.Len(t, first, 2)
	assert.Equal(t, []int64{5, 6}, []int64{first[0].QueueOffset, first[1].QueueOffset})
	rest := pq.Take(100)
	require.Len(t, rest, 3)
	assert.Equal(t, int64(9), rest[2].QueueOffset)
	n, b := pq.Buffered()
	assert.Zero(t, n)
	assert.Zero(t, b)
}

func TestRevokeDropsAndRemovesAtOnce(t *testing.T) {
	tab := NewQueueTable(TableOptions{})
	pq := tab.Assign(qA, 0, 0)
	require.NoError(t, pq.Deliver(batch(0, 1, 1)))
	assert.True(t, tab.Revoke(qA))
	assert.True(t, pq.Dropped())
	assert.False(t, tab.Revoke(qA))
	_, ok := tab.Get(qA)
	assert.False(t, ok)
	assert.Zero(t, tab.Len())
}

func TestAssignOverAnAssignedQueueDropsThePreviousInstance(t *testing.T) {
	tab := NewQueueTable(TableOptions{})
	a := tab.Assign(qA, 0, 0)
	b := tab.Assign(qA, 0, 0)
	assert.True(t, a.Dropped())
	assert.False(t, b.Dropped())
	assert.Equal(t, 1, tab.Len())
	c := tab.Reset(Queue{Topic: "other", QueueID: 1}, 7, 3) // Reset of an unassigned queue assigns it
	assert.False(t, c.Dropped())
	assert.Equal(t, 2, tab.Len())
	var seen []Queue
	tab.Range(func(pq *ProcessQueue) bool { seen = append(seen, pq.Queue()); return true })
	assert.ElementsMatch(t, []Queue{qA, {Topic: "other", QueueID: 1}}, seen)
}

type recordingCommitter struct{ calls []string }

func (r *recordingCommitter) CommitFenced(group, topic string, queueID int, offset int64, epoch uint64) error {
	r.calls = append(r.calls, fmt.Sprintf("%s/%s/%d@%d e%d", group, topic, queueID, offset, epoch))
	return nil
}

func TestCommitFromDroppedProcessQueueIsRefused(t *testing.T) {
	tab := NewQueueTable(TableOptions{})
	pq := tab.Assign(qA, 0, 4)
	c := &recordingCommitter{}
	require.NoError(t, pq.Commit(c, "g", 3))
	assert.Equal(t, []string{"g/orders/0@3 e4"}, c.calls)
	tab.Revoke(qA) // a rebalance: the epoch did not change, the instance is gone
	require.ErrorIs(t, pq.Commit(c, "g", 9), ErrDropped)
	assert.Len(t, c.calls, 1)

	m := openT(t, Options{})
	pq = tab.Assign(qA, 0, m.Epoch("g", qA.Topic, qA.QueueID))
	_, err := m.Reset("g", qA.Topic, qA.QueueID, 50) // the consumer has not applied it yet
	require.NoError(t, err)
	require.ErrorIs(t, pq.Commit(m, "g", 10), ErrStaleEpoch)
	off, _ := m.Committed("g", qA.Topic, qA.QueueID)
	assert.Equal(t, int64(50), off)
}

func TestInvalidQueueTableInputChangesNothingAndNeverPanics(t *testing.T) {
	tab := NewQueueTable(TableOptions{MaxBuffered: -1, MaxBufferedBytes: -1})
	assert.Nil(t, tab.Assign(Queue{}, 0, 0))
	assert.Nil(t, tab.Assign(Queue{Topic: "t", QueueID: -1}, 0, 0))
	assert.Nil(t, tab.Reset(qA, -1, 0))
	assert.Zero(t, tab.Len())
	assert.Equal(t, uint64(3), tab.Stats().Invalid)

	var nilPQ *ProcessQueue // what an invalid Assign returned
	assert.True(t, nilPQ.Dropped())
	require.ErrorIs(t, nilPQ.Deliver(batch(0, 1, 1)), ErrDropped)
	require.ErrorIs(t, nilPQ.Commit(&recordingCommitter{}, "g", 1), ErrDropped)
	assert.Nil(t, nilPQ.Take(1))
	n, b := nilPQ.Buffered()
	assert.Zero(t, n+int(b))
	assert.Zero(t, nilPQ.NextOffset())
	assert.Zero(t, nilPQ.Epoch())
	assert.Equal(t, Queue{}, nilPQ.Queue())

	pq := tab.Assign(qA, 0, 0)
	err := pq.Deliver([]*store.Message{{QueueOffset: 0}, nil})
	require.ErrorIs(t, err, ErrInvalid)
	n, _ = pq.Buffered()
	assert.Zero(t, n)
	require.NoError(t, pq.Deliver(batch(0, DefaultMaxBuffered, 0)), "negative limits take the defaults")
	require.True(t, errors.Is(pq.Deliver(batch(0, 1, 0)), ErrBackpressure))
}
