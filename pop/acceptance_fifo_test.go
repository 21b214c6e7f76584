package pop_test

// Acceptance tests of pop: FIFO batches, attempt ids and blocking.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/pop"
)

// "FIFO: a queue with an unacked batch is blocked for every other attemptId
// until the batch is fully acked or its invisible time ends."
func TestAcceptFIFOBatchBlocksOtherAttemptIDsUntilFullyAcked(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 5)
	a := fifoReq("A")
	a.Max = 2
	batch := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(batch))

	for _, other := range []string{"B", "C", ""} {
		r := fifoReq(other)
		r.Max = 2
		assert.Empty(t, e.pop(r).Messages, "attemptId %q is blocked", other)
	}
	require.NoError(t, e.svc.Ack(batch.Messages[0].Handle))
	b := fifoReq("B")
	b.Max = 2
	assert.Empty(t, e.pop(b).Messages, "partially acked batch still blocks")
	require.NoError(t, e.svc.Ack(batch.Messages[1].Handle))
	assert.Equal(t, int64(2), e.committed(0))
	next := e.pop(b)
	assert.Equal(t, []int64{2, 3}, offsetsOf(next), "fully acked: the next batch, in order")
	assert.Equal(t, []int{1, 1}, attemptsOf(next))
}

// "… or its invisible time ends" — then the same batch comes again with
// Attempts+1, in order, and the previous handles are stale.
func TestAcceptFIFOBatchRedeliveredInOrderAfterInvisibleEnds(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 5)
	a := fifoReq("A")
	a.Max = 3
	batch := e.pop(a)
	require.Equal(t, []int64{0, 1, 2}, offsetsOf(batch))
	e.clk.Advance(31 * time.Second)

	b := fifoReq("B")
	b.Max = 3
	again := e.pop(b)
	require.Equal(t, []int64{0, 1, 2}, offsetsOf(again), "the same batch, in order, not the next messages")
	assert.Equal(t, []int{2, 2, 2}, attemptsOf(again))
	for _, d := range batch.Messages {
		assert.ErrorIs(t, e.svc.Ack(d.Handle), pop.ErrStaleHandle)
	}
	assert.Empty(t, e.pop(a).Messages, "A is no longer the batch's attemptId: blocked")
	for _, d := range again.Messages {
		require.NoError(t, e.svc.Ack(d.Handle))
	}
	assert.Equal(t, int64(3), e.committed(0))
}

// "A pop that carries the batch's attemptId gets the same batch again, with
// fresh handles and without counting an extra attempt. Old handles of that
// batch are then stale."
func TestAcceptFIFOSameAttemptIDRepopsSameBatchFreshHandlesNoExtraAttempt(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 5)
	a := fifoReq("A")
	a.Max = 2
	first := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(first))

	second := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(second), "same batch, not the next messages")
	assert.Equal(t, []int{1, 1}, attemptsOf(second), "no extra attempt counted")
	third := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(third))
	assert.Equal(t, []int{1, 1}, attemptsOf(third))
	for i := range first.Messages {
		assert.NotEqual(t, first.Messages[i].Handle, second.Messages[i].Handle, "fresh handles")
		assert.NotEqual(t, second.Messages[i].Handle, third.Messages[i].Handle, "fresh handles")
	}
	for _, old := range append(append([]pop.Delivery{}, first.Messages...), second.Messages...) {
		assert.ErrorIs(t, e.svc.Ack(old.Handle), pop.ErrStaleHandle)
		_, err := e.svc.ChangeInvisible(old.Handle, time.Minute)
		assert.ErrorIs(t, err, pop.ErrStaleHandle)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0), "stale acks committed nothing")

	// After the invisible time ends, the next delivery is attempt 2 (not 4).
	e.clk.Advance(31 * time.Second)
	res := e.pop(fifoReq("B"))
	require.Equal(t, []int64{0, 1}, offsetsOf(res)[:2])
	assert.Equal(t, []int{2, 2}, attemptsOf(res)[:2])
	for _, d := range res.Messages {
		require.NoError(t, e.svc.Ack(d.Handle))
	}
}

// Issue: "ChangeInvisible on a FIFO handle extends the block." Max is honoured.
func TestAcceptFIFOChangeInvisibleExtendsBlock(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 5)
	a := fifoReq("A")
	a.Max = 2
	batch := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(batch))
	var nh []string
	for _, d := range batch.Messages {
		h, err := e.svc.ChangeInvisible(d.Handle, 5*time.Minute)
		require.NoError(t, err)
		nh = append(nh, h)
	}
	e.clk.Advance(time.Minute)
	assert.Empty(t, e.pop(fifoReq("B")).Messages, "block extended past the original invisible time")
	for _, h := range nh {
		require.NoError(t, e.svc.Ack(h))
	}
	b := fifoReq("B")
	b.Max = 2
	assert.Equal(t, []int64{2, 3}, offsetsOf(e.pop(b)))
}

// FIFO under concurrency: consumers with their own attemptIds race for one
// queue. At most one batch is in flight, so the acks, in the order they
// happen, are exactly 0, 1, 2, … — no message twice, none skipped.
func TestAcceptConcurrentFIFOConsumersKeepOneBatchInOrder(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 5 * time.Second})
	const total = 120
	e.appendN("t", 0, total)
	var mu sync.Mutex
	var acked []int64
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			n := 0
			for {
				mu.Lock()
				done := len(acked) == total
				mu.Unlock()
				if done {
					return
				}
				r := fifoReq(fmt.Sprintf("c%d-%d", c, n))
				r.Max = 1 + c
				res, err := e.svc.Pop(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				if len(res.Messages) == 0 {
					continue
				}
				n++
				for _, d := range res.Messages {
					mu.Lock()
					if assert.NoError(t, e.svc.Ack(d.Handle)) {
						acked = append(acked, d.Message.QueueOffset)
					}
					mu.Unlock()
				}
			}
		}(c)
	}
	wg.Wait()
	want := make([]int64, total)
	for i := range want {
		want[i] = int64(i)
	}
	assert.Equal(t, want, acked)
	assert.Equal(t, int64(total), e.committed(0))
}
