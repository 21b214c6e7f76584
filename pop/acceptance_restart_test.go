package pop_test

// Acceptance tests of pop: nothing popped and unacked is lost across restarts.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
)

// "Nothing popped and unacked is ever lost: after a restart of the host it is
// delivered again (at-least-once)." and "After a restart, old handles may
// answer either; their messages are delivered again anyway." The host restart
// reopens the store and the persisted offsets too.
func TestAcceptUnackedDeliveredAgainAfterHostRestart(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	require.NoError(t, e.offs.Close())
	offPath := filepath.Join(e.dir, "offsets")
	offs, err := offset.Open(offset.Options{Path: offPath})
	require.NoError(t, err)
	e.offs = offs
	e.opts.Offsets = offs
	e.restart()

	e.appendN("t", 0, 6)
	e.appendN("t", 1, 3)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 6)
	for _, i := range []int{0, 1, 3} {
		require.NoError(t, e.svc.Ack(res.Messages[i].Handle))
	}
	require.Equal(t, int64(2), e.committed(0))
	f := fifoReq("A")
	f.QueueID = 1
	f.Max = 2
	fb := e.pop(f)
	require.Equal(t, []int64{0, 1}, offsetsOf(fb))

	// Host restart: everything closed, reopened from disk.
	require.NoError(t, e.svc.Close())
	require.NoError(t, e.st.Close())
	require.NoError(t, e.offs.Close())
	e.openStore()
	offs, err = offset.Open(offset.Options{Path: offPath})
	require.NoError(t, err)
	e.offs = offs
	e.opts.Offsets = offs
	e.svc = pop.New(e.src, e.opts)
	e.cur.Store(e.svc)

	for _, d := range res.Messages {
		err := e.svc.Ack(d.Handle)
		assert.True(t, errors.Is(err, pop.ErrBadHandle) || errors.Is(err, pop.ErrStaleHandle), "old handle after restart: %v", err)
	}
	assert.Equal(t, int64(2), e.committed(0), "old handles changed nothing")

	again := e.pop(accReq())
	got := offsetsOf(again)
	for _, want := range []int64{2, 4, 5} {
		assert.Contains(t, got, want, "unacked message %d delivered again after the restart", want)
	}
	assert.NotContains(t, got, int64(0), "the committed offset is never re-delivered")
	f.AttemptID = "B"
	assert.Equal(t, []int64{0, 1}, offsetsOf(e.pop(f)), "the unacked FIFO batch is delivered again, in order")
}

// Same sentence, Service-only restart under concurrent consumers: a new
// Service over the same store and offsets delivers every message that was
// never acked.
func TestAcceptNoLossAcrossServiceRestartWithConcurrentConsumers(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	const perQueue = 60
	for q := 0; q < 3; q++ {
		e.appendN("t", q, perQueue)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			r := accReq()
			r.QueueID = pop.AllQueues
			r.Max = 7
			for i := 0; i < 6; i++ {
				res, err := e.svc.Pop(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				for j, d := range res.Messages {
					if (j+c)%3 == 0 {
						continue // left unacked
					}
					if assert.NoError(t, e.svc.Ack(d.Handle)) {
						mu.Lock()
						acked[string(d.Message.Body)] = true
						mu.Unlock()
					}
				}
			}
		}(c)
	}
	wg.Wait()
	e.restart()

	seen := map[string]bool{}
	r := accReq()
	r.QueueID = pop.AllQueues
	for i := 0; i < 100; i++ {
		res := e.pop(r)
		if len(res.Messages) == 0 {
			break
		}
		for _, d := range res.Messages {
			seen[string(d.Message.Body)] = true
			require.NoError(t, e.svc.Ack(d.Handle))
		}
	}
	for q := 0; q < 3; q++ {
		for i := 0; i < perQueue; i++ {
			b := fmt.Sprintf("t/%d/%d", q, i)
			assert.True(t, acked[b] || seen[b], "message %s lost across the restart", b)
		}
		assert.Equal(t, int64(perQueue), e.committed(q))
	}
}

// Restart sentence with a stable HandleKey (handles verify across restarts):
// an old handle of a message the new Service has delivered again must not
// settle the new delivery ("old handles may answer either; their messages are
// delivered again anyway").
func TestAcceptOldHandleAfterRestartCannotSettleNewDelivery(t *testing.T) {
	e := newAccEnv(t, pop.Options{HandleKey: []byte("0123456789abcdef0123456789abcdef")})
	e.appendN("t", 0, 2)
	before := e.pop(accReq())
	require.Len(t, before.Messages, 2)
	e.restart()
	after := e.pop(accReq())
	require.Equal(t, []int64{0, 1}, offsetsOf(after))
	for _, d := range before.Messages {
		err := e.svc.Ack(d.Handle)
		assert.True(t, errors.Is(err, pop.ErrBadHandle) || errors.Is(err, pop.ErrStaleHandle), "old handle after restart: %v", err)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0))
	for _, d := range after.Messages {
		require.NoError(t, e.svc.Ack(d.Handle))
	}
	assert.Equal(t, int64(2), e.committed(0))
}

// "Nothing popped and unacked is ever lost" together with InitialOffset
// Latest: a group that popped (but never acked) under Latest must get those
// messages again after a restart, not jump to the new end of the queue.
func TestAcceptLatestGroupDoesNotLoseUnackedAcrossRestart(t *testing.T) {
	e := newAccEnv(t, pop.Options{InitialOffset: pop.Latest})
	e.appendN("t", 0, 2) // before the group exists: skipped
	assert.Empty(t, e.pop(accReq()).Messages)
	e.appendN("t", 0, 2)
	res := e.pop(accReq())
	require.Equal(t, []int64{2, 3}, offsetsOf(res))
	e.restart()
	e.appendN("t", 0, 1)
	again := e.pop(accReq())
	assert.Equal(t, []int64{2, 3, 4}, offsetsOf(again), "popped-but-unacked messages lost across a restart under Latest")
}
