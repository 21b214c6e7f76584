package pop_test

// Acceptance tests of pop against the shared conventions: Close, Stats and
// logging of rejections and contention.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// lockedBuf is a slog sink safe for concurrent use.
type lockedBuf = testkit.LogBuffer

// Conventions: every goroutine owned, stopped and waited for by Close
// (idempotent); calls after Close return ErrClosed. Close wakes every waiter.
func TestAcceptCloseWakesWaitersLaterCallsErrClosedNoLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	func() {
		clk := newAccClock()
		dir := t.TempDir()
		var cur atomic.Pointer[pop.Service]
		st, err := store.Open(dir, store.Options{Sync: store.SyncNone, OnAppend: func(topic string, q int, _ int64) {
			if s := cur.Load(); s != nil {
				s.Arrived(topic, q)
			}
		}})
		require.NoError(t, err)
		defer st.Close()
		src := &accSource{Store: st}
		svc := pop.New(src, pop.Options{Now: clk.Now, LockWait: time.Minute})
		cur.Store(svc)
		require.NoError(t, st.Append(&store.Message{Topic: "t", QueueID: 0}, &store.Message{Topic: "f", QueueID: 0}, &store.Message{Topic: "f", QueueID: 1}))

		// A FIFO batch on f/0 so that another attemptId long-polls on the block.
		f := fifoReq("A")
		f.Topic = "f"
		res, err := svc.Pop(context.Background(), f)
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		handle := res.Messages[0].Handle

		// The g@f lock is held first, by a pop stuck in its read: a
		// contended non-FIFO pop would answer empty at once without
		// reading, so the holder must not race the waiters for the lock.
		entered, release := src.holdNextRead()
		defer release()
		hr := accReq()
		hr.Topic = "f"
		hr.QueueID = 1
		holder := make(chan error, 1)
		go func() { _, err := svc.Pop(context.Background(), hr); holder <- err }()
		<-entered

		var waiters []<-chan popOutcome
		start := func(r pop.Request) {
			ch := make(chan popOutcome, 1)
			go func() { res, err := svc.Pop(context.Background(), r); ch <- popOutcome{res: res, err: err} }()
			waiters = append(waiters, ch)
		}
		r := accReq()
		r.Topic = "empty"
		r.Poll = time.Minute
		start(r)
		fb := fifoReq("B")
		fb.Topic = "f"
		fb.Poll = time.Minute
		start(fb)
		// A FIFO retry queued behind the held lock.
		fr := f
		fr.Poll = time.Minute
		start(fr)
		time.Sleep(100 * time.Millisecond) // let them all settle into waiting

		closed := make(chan error, 1)
		go func() { closed <- svc.Close() }()
		for i, ch := range waiters {
			o := waitOutcome(t, ch, 2*time.Second, fmt.Sprintf("waiter %d after Close", i))
			assert.ErrorIs(t, o.err, pop.ErrClosed, "waiter %d", i)
		}
		release()
		<-holder
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Fatal("Close did not return")
		}
		assert.NoError(t, svc.Close(), "Close is idempotent")

		_, err = svc.Pop(context.Background(), accReq())
		assert.ErrorIs(t, err, pop.ErrClosed)
		assert.ErrorIs(t, svc.Ack(handle), pop.ErrClosed)
		_, err = svc.ChangeInvisible(handle, time.Minute)
		assert.ErrorIs(t, err, pop.ErrClosed)
		svc.Arrived("t", 0) // must not panic or block
		require.NoError(t, st.Append(&store.Message{Topic: "t"}))
		_ = svc.Stats()
		require.NoError(t, st.Close())
	}()
	goleak.VerifyNone(t, ignore)
}

// Conventions: "Each package has Stats() returning a plain struct of counters".
func TestAcceptStatsCountPopsDeliveriesAcksAndRejections(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 3)
	s0 := e.svc.Stats()
	res := e.pop(accReq())
	require.Len(t, res.Messages, 3)
	require.NoError(t, e.svc.Ack(res.Messages[0].Handle))
	assert.ErrorIs(t, e.svc.Ack(res.Messages[0].Handle), pop.ErrStaleHandle)
	assert.ErrorIs(t, e.svc.Ack("junk"), pop.ErrBadHandle)
	r := accReq()
	r.Max = -1
	_, err := e.svc.Pop(context.Background(), r)
	assert.ErrorIs(t, err, pop.ErrInvalid)
	assert.Empty(t, e.pop(accReq()).Messages)
	e.clk.Advance(31 * time.Second)
	require.Len(t, e.pop(accReq()).Messages, 2)

	s := e.svc.Stats()
	assert.Equal(t, s0.Pops+3, s.Pops)
	assert.Equal(t, s0.Empty+1, s.Empty)
	assert.Equal(t, s0.Delivered+5, s.Delivered)
	assert.Equal(t, s0.Redelivered+2, s.Redelivered)
	assert.Equal(t, s0.Acks+1, s.Acks)
	assert.Equal(t, s0.Commits+1, s.Commits)
	assert.Equal(t, s0.StaleHandles+1, s.StaleHandles)
	assert.Equal(t, s0.BadHandles+1, s.BadHandles)
	assert.Equal(t, s0.Invalid+1, s.Invalid)
	assert.Equal(t, uint64(0), s.Waiters)
}

// Conventions: "Contention, takeover, expiry, recovery and every dropped or
// rejected request are logged with their keys."
func TestAcceptRejectionsAndContentionAreLoggedWithKeys(t *testing.T) {
	var buf lockedBuf
	e := newAccEnv(t, pop.Options{LockWait: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	e.appendN("orders", 0, 1)
	e.appendN("orders", 1, 1)
	bad := pop.Request{Group: "billing", Topic: "orders", ClientID: "c1", Max: -1}
	_, err := e.svc.Pop(context.Background(), bad)
	require.ErrorIs(t, err, pop.ErrInvalid)
	assert.ErrorIs(t, e.svc.Ack("forged"), pop.ErrBadHandle)

	f := fifoReq("att-7")
	f.Topic = "orders"
	f.Group = "billing"
	f.Max = 1
	require.Len(t, e.pop(f).Messages, 1)
	entered, release := e.src.holdNextRead()
	defer release()
	h := accReq()
	h.Group, h.Topic, h.QueueID = "billing", "orders", 1
	holder := e.popAsync(context.Background(), h)
	<-entered
	_, err = e.svc.Pop(context.Background(), f)
	require.ErrorIs(t, err, pop.ErrLockTimeout)
	release()
	waitOutcome(t, holder, 2*time.Second, "holder")

	out := buf.String()
	lines := strings.Split(out, "\n")
	has := func(words ...string) bool {
		for _, l := range lines {
			ok := true
			for _, w := range words {
				ok = ok && strings.Contains(l, w)
			}
			if ok {
				return true
			}
		}
		return false
	}
	assert.True(t, has("billing", "orders", "c1"), "rejected request logged with group, topic, client:\n%s", out)
	// Errors returned to the caller are logged at DEBUG (issue 14).
	assert.True(t, has("DEBUG", "handle"), "bad handle logged:\n%s", out)
	assert.True(t, has("billing", "orders", "att-7"), "lock wait/timeout logged with group, topic, attempt:\n%s", out)
}
