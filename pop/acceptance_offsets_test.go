package pop_test

// Acceptance tests of pop: the start offset, commits and offset resets.

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// "A group with no committed offset starts at the queue's MinOffset".
// Retention moves MinOffset above 0, so a service that started at 0 (or at a
// Read error) is caught.
func TestAcceptNewGroupStartsAtMinOffsetNotZero(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	require.NoError(t, e.st.Close())
	st, err := store.Open(filepath.Join(e.dir, "log"), store.Options{Sync: store.SyncNone, SegmentSize: 512, MaxBytes: 1, RetainEvery: -1})
	require.NoError(t, err)
	e.st = st
	e.src.Store = st
	for i := 0; i < 40; i++ {
		require.NoError(t, st.Append(&store.Message{Topic: "t", Body: make([]byte, 100)}))
	}
	_, err = st.Retain()
	require.NoError(t, err)
	min := st.MinOffset("t", 0)
	require.Greater(t, min, int64(0), "retention must have moved MinOffset for this test to mean anything")
	for i := 0; i < 3; i++ {
		require.NoError(t, st.Append(&store.Message{Topic: "t", Body: []byte("after retention")}))
	}
	require.Equal(t, min, st.MinOffset("t", 0))

	res := e.pop(accReq())
	require.NotEmpty(t, res.Messages)
	assert.Equal(t, min, res.Messages[0].Message.QueueOffset)
	assert.Len(t, res.Messages, int(st.MaxOffset("t", 0)-min))
	for i, d := range res.Messages {
		assert.Equal(t, min+int64(i), d.Message.QueueOffset)
		assert.Equal(t, 1, d.Attempts, "first delivery has Attempts 1")
	}
}

// "(Options.InitialOffset can say Latest)": a new group then skips what is
// already in the queue and gets only what arrives later.
func TestAcceptInitialOffsetLatestSkipsExistingMessages(t *testing.T) {
	e := newAccEnv(t, pop.Options{InitialOffset: pop.Latest})
	e.appendN("t", 0, 3)
	res := e.pop(accReq())
	assert.Empty(t, res.Messages, "Latest: messages before the group's first pop are not delivered")
	e.appendN("t", 0, 2)
	res = e.pop(accReq())
	assert.Equal(t, []int64{3, 4}, offsetsOf(res))
}

// "The ack that advances the lowest unacked offset commits it (through
// Offsets) before Ack returns." and "The committed offset never passes an
// unacked message."
func TestAcceptAckOfLowestUnackedCommitsBeforeAckReturns(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 4)
	res := e.pop(accReq())
	require.Equal(t, []int64{0, 1, 2, 3}, offsetsOf(res))
	h := func(i int) string { return res.Messages[i].Handle }

	require.NoError(t, e.svc.Ack(h(1)))
	require.NoError(t, e.svc.Ack(h(3)))
	assert.LessOrEqual(t, e.committed(0), int64(0), "offset 0 is unacked: the commit must not pass it")

	require.NoError(t, e.svc.Ack(h(0)))
	assert.Equal(t, int64(2), e.committed(0), "acking 0 advances the lowest unacked to 2, committed before Ack returns")

	require.NoError(t, e.svc.Ack(h(2)))
	assert.Equal(t, int64(4), e.committed(0))
}

// "An offset reset (through Offsets: its epoch changes) takes effect on the
// next pop of that queue: in-memory state for the queue is dropped and popping
// restarts at the committed offset; commits carry the epoch they were made
// under, so pop can never write its old progress back over a reset."
func TestAcceptOffsetResetTakesEffectOnNextPopAndOldProgressCannotCommit(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 10)
	e.appendN("t", 1, 2)

	r := accReq()
	r.Max = 5
	before := e.pop(r)
	require.Equal(t, []int64{0, 1, 2, 3, 4}, offsetsOf(before))
	require.NoError(t, e.svc.Ack(before.Messages[0].Handle))
	require.Equal(t, int64(1), e.committed(0))
	r1 := accReq()
	r1.QueueID = 1
	other := e.pop(r1)
	require.Len(t, other.Messages, 2)

	// Forward reset.
	_, err := e.offs.Reset("g", "t", 0, 7)
	require.NoError(t, err)

	// Handles popped before the reset are stale even before the next pop,
	// and acking them writes nothing over the reset.
	err = e.svc.Ack(before.Messages[1].Handle)
	assert.ErrorIs(t, err, pop.ErrStaleHandle, "a handle popped before a reset is stale")
	assert.Equal(t, int64(7), e.committed(0), "old progress must not be written over the reset")

	after := e.pop(r)
	assert.Equal(t, []int64{7, 8, 9}, offsetsOf(after), "popping restarts at the reset offset")
	for _, d := range after.Messages {
		assert.Equal(t, 1, d.Attempts)
	}
	for i := 1; i < 5; i++ {
		assert.ErrorIs(t, e.svc.Ack(before.Messages[i].Handle), pop.ErrStaleHandle, "pre-reset handle %d", i)
		_, err := e.svc.ChangeInvisible(before.Messages[i].Handle, time.Minute)
		assert.ErrorIs(t, err, pop.ErrStaleHandle, "pre-reset handle %d", i)
	}
	assert.Equal(t, int64(7), e.committed(0), "stale acks changed nothing")

	// The reset of queue 0 leaves queue 1's in-flight deliveries alone.
	require.NoError(t, e.svc.Ack(other.Messages[0].Handle))
	assert.Equal(t, int64(1), e.committed(1))

	// Post-reset handles commit under the new epoch.
	require.NoError(t, e.svc.Ack(after.Messages[0].Handle))
	assert.Equal(t, int64(8), e.committed(0))

	// Backward reset: state dropped, so messages in flight (invisible) and
	// already acked are delivered again at once.
	_, err = e.offs.Reset("g", "t", 0, 2)
	require.NoError(t, err)
	back := e.pop(r)
	assert.Equal(t, []int64{2, 3, 4, 5, 6}, offsetsOf(back), "in-memory state dropped: popping restarts at the committed offset")
	assert.ErrorIs(t, e.svc.Ack(after.Messages[1].Handle), pop.ErrStaleHandle)
	assert.Equal(t, int64(2), e.committed(0))
}

// FIFO flavour of the reset sentence: the in-flight batch (and its block) is
// part of the in-memory state that a reset drops.
func TestAcceptOffsetResetDropsFIFOBatch(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 6)
	a := fifoReq("A")
	a.Max = 2
	batch := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(batch))
	b := fifoReq("B")
	b.Max = 2
	require.Empty(t, e.pop(b).Messages)

	_, err := e.offs.Reset("g", "t", 0, 4)
	require.NoError(t, err)
	res := e.pop(b)
	assert.Equal(t, []int64{4, 5}, offsetsOf(res), "the old batch's block is gone with the reset")
	assert.ErrorIs(t, e.svc.Ack(batch.Messages[0].Handle), pop.ErrStaleHandle)
	assert.Equal(t, int64(4), e.committed(0))
}

// Reset sentence, the sharp case: a message popped before a reset and popped
// again after it (first delivery under the new epoch, same offset, Attempts 1)
// must not be ackable through its pre-reset handle.
func TestAcceptPreResetHandleOfRepoppedOffsetIsStale(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 3)
	before := e.pop(accReq())
	require.Equal(t, []int64{0, 1, 2}, offsetsOf(before))
	_, err := e.offs.Reset("g", "t", 0, 0)
	require.NoError(t, err)
	after := e.pop(accReq())
	require.Equal(t, []int64{0, 1, 2}, offsetsOf(after), "reset to 0: everything again at once")
	assert.Equal(t, []int{1, 1, 1}, attemptsOf(after))
	for i := range before.Messages {
		assert.ErrorIs(t, e.svc.Ack(before.Messages[i].Handle), pop.ErrStaleHandle, "pre-reset handle of offset %d", i)
		_, err := e.svc.ChangeInvisible(before.Messages[i].Handle, time.Hour)
		assert.ErrorIs(t, err, pop.ErrStaleHandle)
	}
	assert.Equal(t, int64(0), e.committed(0), "pre-reset handles committed nothing")
	for _, d := range after.Messages {
		require.NoError(t, e.svc.Ack(d.Handle), "the post-reset handles are the live ones")
	}
	assert.Equal(t, int64(3), e.committed(0))
}

// Same for FIFO: the pre-reset batch's attemptId does not own the post-reset
// batch, and its handles are stale.
func TestAcceptPreResetFIFOAttemptIDDoesNotOwnNewBatch(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 3)
	a := fifoReq("A")
	a.Max = 2
	before := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(before))
	_, err := e.offs.Reset("g", "t", 0, 0)
	require.NoError(t, err)
	b := fifoReq("B")
	b.Max = 2
	after := e.pop(b)
	require.Equal(t, []int64{0, 1}, offsetsOf(after))
	assert.Equal(t, []int{1, 1}, attemptsOf(after))
	assert.Empty(t, e.pop(a).Messages, "A's batch was dropped by the reset; B owns the new one")
	for _, d := range before.Messages {
		assert.ErrorIs(t, e.svc.Ack(d.Handle), pop.ErrStaleHandle)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0))
}

// flakyOffsets fails CommitFenced while fail is set.
type flakyOffsets struct {
	*offset.Manager
	fail atomic.Bool
}

func (f *flakyOffsets) CommitFenced(group, topic string, q int, off int64, epoch uint64) error {
	if f.fail.Load() {
		return errors.New("offset store down")
	}
	return f.Manager.CommitFenced(group, topic, q, off, epoch)
}

// "The ack that advances the lowest unacked offset commits it (through
// Offsets) before Ack returns": an Ack whose commit failed cannot report
// success, and the message is not lost.
func TestAcceptAckWhoseCommitFailsIsNotASuccess(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	fo := &flakyOffsets{Manager: e.offs}
	e.opts.Offsets = fo
	e.restart()
	e.appendN("t", 0, 2)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 2)
	fo.fail.Store(true)
	err := e.svc.Ack(res.Messages[0].Handle)
	require.Error(t, err, "the commit failed: Ack must not report success")
	assert.LessOrEqual(t, e.committed(0), int64(0))
	fo.fail.Store(false)
	if err := e.svc.Ack(res.Messages[0].Handle); err != nil {
		// The ack was not applied: the message must come again.
		e.clk.Advance(31 * time.Second)
		again := e.pop(accReq())
		require.Contains(t, offsetsOf(again), int64(0), "an unapplied ack must not lose the message")
		for _, d := range again.Messages {
			require.NoError(t, e.svc.Ack(d.Handle))
		}
	} else {
		require.NoError(t, e.svc.Ack(res.Messages[1].Handle))
	}
	assert.Equal(t, int64(2), e.committed(0))
}

// Concurrent resets and acks: whatever the interleaving, once Reset returned
// the committed offset is never moved back below the reset by old progress.
func TestAcceptConcurrentAcksNeverCommitOverAReset(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 300)
	r := accReq()
	r.Max = 8
	var stop atomic.Bool
	var wg sync.WaitGroup
	for c := 0; c < 3; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				res, err := e.svc.Pop(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				if len(res.Messages) == 0 {
					return
				}
				for _, d := range res.Messages {
					err := e.svc.Ack(d.Handle)
					if err != nil && !errors.Is(err, pop.ErrStaleHandle) {
						assert.NoError(t, err)
					}
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	_, err := e.offs.Reset("g", "t", 0, 250)
	require.NoError(t, err)
	low := int64(1 << 62)
	for i := 0; i < 200; i++ {
		if c := e.committed(0); c < low {
			low = c
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	assert.GreaterOrEqual(t, low, int64(250), "old progress written over the reset")
	assert.GreaterOrEqual(t, e.committed(0), int64(250))
}

// A group whose committed offset fell below MinOffset (retention) is not
// wedged: popping goes on from what is readable.
func TestAcceptCommittedBelowMinOffsetDoesNotWedgeTheGroup(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	require.NoError(t, e.st.Close())
	st, err := store.Open(filepath.Join(e.dir, "log"), store.Options{Sync: store.SyncNone, SegmentSize: 512, MaxBytes: 1, RetainEvery: -1})
	require.NoError(t, err)
	e.st = st
	e.src.Store = st
	require.NoError(t, st.Append(&store.Message{Topic: "t", Body: make([]byte, 100)}))
	res := e.pop(accReq())
	require.Len(t, res.Messages, 1)
	require.NoError(t, e.svc.Ack(res.Messages[0].Handle))
	require.Equal(t, int64(1), e.committed(0))
	for i := 0; i < 40; i++ {
		require.NoError(t, st.Append(&store.Message{Topic: "t", Body: make([]byte, 100)}))
	}
	_, err = st.Retain()
	require.NoError(t, err)
	require.NoError(t, st.Append(&store.Message{Topic: "t", Body: []byte("fresh")}))
	min := st.MinOffset("t", 0)
	require.Greater(t, min, int64(1))
	got, err := e.svc.Pop(context.Background(), accReq())
	require.NoError(t, err, "a retained-away committed offset must not wedge the group")
	require.NotEmpty(t, got.Messages)
	assert.Equal(t, min, got.Messages[0].Message.QueueOffset)
}

// resettingOffsets performs an offset reset at the worst moment: inside the
// first CommitFenced after arm, just before the commit lands, so the Ack that
// carries it was issued (and popped) before the reset.
type resettingOffsets struct {
	*offset.Manager
	armed atomic.Bool
	to    int64
}

func (r *resettingOffsets) CommitFenced(group, topic string, q int, off int64, epoch uint64) error {
	if r.armed.CompareAndSwap(true, false) {
		if _, err := r.Manager.Reset(group, topic, q, r.to); err != nil {
			return err
		}
	}
	return r.Manager.CommitFenced(group, topic, q, off, epoch)
}

// Reset and handle sentences under the race: an Ack whose handle was popped
// before a reset that lands while the Ack is committing answers
// ErrStaleHandle (not a raw Offsets error) and changes nothing.
func TestAcceptAckRacingAResetIsStaleHandle(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	ro := &resettingOffsets{Manager: e.offs, to: 5}
	e.opts.Offsets = ro
	e.restart()
	e.appendN("t", 0, 8)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 8)
	ro.armed.Store(true)
	err := e.svc.Ack(res.Messages[0].Handle)
	assert.ErrorIs(t, err, pop.ErrStaleHandle, "a handle popped before a reset is stale, whenever the reset lands")
	assert.Equal(t, int64(5), e.committed(0), "the reset stands")
	assert.Equal(t, []int64{5, 6, 7}, offsetsOf(e.pop(accReq())))
}

// "popping restarts at the committed offset": a group whose offset was
// committed before its first pop starts there, under Latest too.
func TestAcceptGroupWithCommittedOffsetStartsThere(t *testing.T) {
	for _, init := range []pop.InitialOffset{pop.Earliest, pop.Latest} {
		e := newAccEnv(t, pop.Options{InitialOffset: init})
		e.appendN("t", 0, 6)
		require.NoError(t, e.offs.Commit("g", "t", 0, 4))
		assert.Equal(t, []int64{4, 5}, offsetsOf(e.pop(accReq())), "InitialOffset %v", init)
	}
}
