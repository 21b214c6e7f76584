package pop_test

// Acceptance tests of pop: bad and stale handles, bad requests and abandoned
// pops all change nothing.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/pop"
)

// "Ack/ChangeInvisible with a malformed or forged handle → ErrBadHandle …;
// nothing changes."
func TestAcceptMalformedOrForgedHandleIsErrBadHandleAndChangesNothing(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 1)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 1)
	h := res.Messages[0].Handle

	bad := []string{"", "x", "not-a-handle", h[:len(h)/2], h + "x", h + h, "\x00\xff" + h}
	for i := 0; i < len(h); i++ {
		for _, c := range []byte{'A', 'z', '0', '_', '-', '.'} {
			if h[i] != c {
				bad = append(bad, h[:i]+string(c)+h[i+1:])
				break
			}
		}
	}
	// A handle from another Service (another key) is forged for this one.
	other := pop.New(e.src, pop.Options{Now: e.clk.Now, Offsets: pop.NewMemoryOffsets()})
	oRes, err := other.Pop(context.Background(), accReq())
	require.NoError(t, err)
	require.Len(t, oRes.Messages, 1)
	bad = append(bad, oRes.Messages[0].Handle)
	require.NoError(t, other.Close())

	for _, b := range bad {
		assert.ErrorIs(t, e.svc.Ack(b), pop.ErrBadHandle, "Ack(%q)", b)
		nh, err := e.svc.ChangeInvisible(b, time.Minute)
		assert.ErrorIs(t, err, pop.ErrBadHandle, "ChangeInvisible(%q)", b)
		assert.Empty(t, nh)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0), "nothing committed")
	// Nothing changed: the genuine handle still works and the message is
	// still in flight with its original invisible time.
	e.clk.Advance(31 * time.Second)
	again := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(again))
	assert.Equal(t, 2, again.Messages[0].Attempts)
}

// "… with a handle of a delivery that was superseded (re-popped, revived,
// already acked, popped before an offset reset) → ErrStaleHandle; nothing
// changes."
func TestAcceptSupersededHandleIsErrStaleHandleAndChangesNothing(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 2)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 2)
	h0, h1 := res.Messages[0].Handle, res.Messages[1].Handle

	// Already acked.
	require.NoError(t, e.svc.Ack(h1))
	assert.ErrorIs(t, e.svc.Ack(h1), pop.ErrStaleHandle)
	_, err := e.svc.ChangeInvisible(h1, time.Minute)
	assert.ErrorIs(t, err, pop.ErrStaleHandle)

	// Changed: the old handle is stale and using it changes nothing.
	nh, err := e.svc.ChangeInvisible(h0, 5*time.Minute)
	require.NoError(t, err)
	_, err = e.svc.ChangeInvisible(h0, time.Second)
	assert.ErrorIs(t, err, pop.ErrStaleHandle)
	e.clk.Advance(time.Minute)
	assert.Empty(t, e.pop(accReq()).Messages, "the stale ChangeInvisible did not shorten the invisible time")
	assert.LessOrEqual(t, e.committed(0), int64(0))
	require.NoError(t, e.svc.Ack(nh))
	assert.Equal(t, int64(2), e.committed(0))
}

// Conventions: "Bad input gets a clear error and changes nothing. No panics on
// input." — for pop: Max outside 1..32, empty group, topic or client id,
// negative durations, a queue id below AllQueues → ErrInvalid.
func TestAcceptBadRequestIsErrInvalidAndChangesNothing(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 1)
	mod := map[string]func(r *pop.Request){
		"Max 33":             func(r *pop.Request) { r.Max = 33 },
		"Max -1":             func(r *pop.Request) { r.Max = -1 },
		"empty group":        func(r *pop.Request) { r.Group = "" },
		"empty topic":        func(r *pop.Request) { r.Topic = "" },
		"empty client":       func(r *pop.Request) { r.ClientID = "" },
		"negative Invisible": func(r *pop.Request) { r.Invisible = -time.Second },
		"negative Poll":      func(r *pop.Request) { r.Poll = -time.Second },
		"QueueID -2":         func(r *pop.Request) { r.QueueID = -2 },
		"FIFO Max 33":        func(r *pop.Request) { r.FIFO = true; r.AttemptID = "A"; r.Max = 33 },
		"FIFO empty group":   func(r *pop.Request) { r.FIFO = true; r.AttemptID = "A"; r.Group = "" },
	}
	for name, m := range mod {
		r := accReq()
		r.Poll = 30 * time.Second // an invalid request must not wait either
		m(&r)
		o := waitOutcome(t, e.popAsync(context.Background(), r), 2*time.Second, name)
		assert.ErrorIs(t, o.err, pop.ErrInvalid, name)
		assert.Empty(t, o.res.Messages, name)
	}
	// Nothing changed: the message is delivered for the first time, and a
	// FIFO attemptId "A" owns no batch.
	res := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(res))
	assert.Equal(t, 1, res.Messages[0].Attempts)

	// Max bounds are inclusive.
	e.appendN("t", 0, 40)
	r := accReq()
	r.Max = 32
	assert.Len(t, e.pop(r).Messages, 32)
	r.Max = 1
	assert.Len(t, e.pop(r).Messages, 1)

	_, err := e.svc.ChangeInvisible(res.Messages[0].Handle, -time.Second)
	assert.ErrorIs(t, err, pop.ErrInvalid, "negative ChangeInvisible duration")
	require.NoError(t, e.svc.Ack(res.Messages[0].Handle), "the handle was not superseded by the rejected change")
}

// Issue: "A request whose ctx/deadline is over by then changes nothing": a pop
// abandoned by its caller during the read delivers nothing and leaves the
// messages it read to the next pop, first attempt.
func TestAcceptAbandonedPopChangesNothing(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockExpiry: time.Second})
	e.appendN("t", 0, 3)
	entered, release := e.src.holdNextRead()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	ch := e.popAsync(ctx, accReq())
	<-entered
	cancel()
	e.clk.Advance(time.Minute) // past LockExpiry: the abandoned hold may be taken away
	// Another pop of the group proceeds (possibly after the backstop frees
	// the abandoned hold) and gets every message, first attempt.
	var got pop.Result
	require.Eventually(t, func() bool {
		res, err := e.svc.Pop(context.Background(), accReq())
		require.NoError(t, err)
		got = res
		return len(res.Messages) > 0
	}, 2*time.Second, 10*time.Millisecond)
	release()
	o := waitOutcome(t, ch, 2*time.Second, "abandoned pop")
	assert.Error(t, o.err)
	assert.Empty(t, o.res.Messages)
	assert.Equal(t, []int64{0, 1, 2}, offsetsOf(got))
	assert.Equal(t, []int{1, 1, 1}, attemptsOf(got))
	for _, d := range got.Messages {
		require.NoError(t, e.svc.Ack(d.Handle), "the abandoned pop superseded nothing")
	}
	assert.Equal(t, int64(3), e.committed(0))
}
