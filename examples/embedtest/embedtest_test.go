package embedtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/brokertest"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newBroker is the whole embedding: a broker core in a temporary
// directory on the test's clock, closed when the test ends.
func newBroker(t *testing.T) (*brokercore.Broker, *brokertest.Clock) {
	t.Helper()
	clk := brokertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return brokertest.New(t, brokertest.WithClock(clk)), clk
}

// TestUnackedMessageIsRedeliveredAfterItsInvisibleTime is the kind of test
// a host writes against the embedded pieces: produce, pop, let the
// invisible time pass on the fake clock, pop again, ack.
func TestUnackedMessageIsRedeliveredAfterItsInvisibleTime(t *testing.T) {
	b, clk := newBroker(t)
	st, svc := b.Store(), b.Pop()
	ctx := t.Context()

	require.NoError(t, st.Append(&store.Message{Topic: "orders", Body: []byte("order 1")}))
	req := pop.Request{Group: "billing", Topic: "orders", ClientID: "test", QueueID: 0, Max: 1, Invisible: 30 * time.Second}

	first, err := svc.Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, first.Messages, 1)
	assert.Equal(t, 1, first.Messages[0].Attempts)

	// Still invisible: nothing to pop.
	empty, err := svc.Pop(ctx, req)
	require.NoError(t, err)
	assert.Empty(t, empty.Messages)

	// The consumer "crashed": after the invisible time it comes back.
	clk.Advance(31 * time.Second)
	again, err := svc.Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, again.Messages, 1)
	assert.Equal(t, "order 1", string(again.Messages[0].Message.Body))
	assert.Equal(t, 2, again.Messages[0].Attempts)

	require.NoError(t, svc.Ack(again.Messages[0].Handle))
	require.ErrorIs(t, svc.Ack(first.Messages[0].Handle), pop.ErrStaleHandle)

	// The ack committed the offset, as in production.
	off, ok := b.Offsets().Committed("billing", "orders", 0)
	require.True(t, ok)
	assert.Equal(t, int64(1), off)
}

// TestLongPollWakesOnAppend shows the arrival wiring at work: a pop that
// long-polls an empty topic returns as soon as a message is appended.
func TestLongPollWakesOnAppend(t *testing.T) {
	b, _ := newBroker(t)
	st, svc := b.Store(), b.Pop()

	got := make(chan pop.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, _ := svc.Pop(ctx, pop.Request{Group: "g", Topic: "events", ClientID: "test",
			QueueID: pop.AllQueues, Max: 8, Invisible: time.Minute, Poll: 10 * time.Second})
		got <- res
	}()
	require.Eventually(t, func() bool { return svc.Stats().Waiters == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, st.Append(&store.Message{Topic: "events", QueueID: 3, Body: []byte("hello")}))

	select {
	case res := <-got:
		require.Len(t, res.Messages, 1)
		assert.Equal(t, 3, res.Messages[0].Message.QueueID)
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll was not woken by the append")
	}
}

// TestDelayedMessageFollowsTheClock: the scheduler is started by Open and
// reads the test's clock, so a delayed message is delivered once the clock
// has moved past its level, with no sleep for the delay itself.
func TestDelayedMessageFollowsTheClock(t *testing.T) {
	b, clk := newBroker(t)
	d, err := b.Scheduler().Delay(&store.Message{Topic: "reminders", Body: []byte("later")}, 2) // level 2: 5 s
	require.NoError(t, err)
	require.NoError(t, b.Store().Append(d))
	req := pop.Request{Group: "g", Topic: "reminders", ClientID: "test"} // zero Max and Invisible: the defaults

	res, err := b.Pop().Pop(t.Context(), req)
	require.NoError(t, err)
	assert.Empty(t, res.Messages, "not due yet")

	clk.Advance(5 * time.Second)
	req.Poll = 5 * time.Second // the delivery wakes the long poll
	res, err = b.Pop().Pop(t.Context(), req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	assert.Equal(t, "later", string(res.Messages[0].Message.Body))
}
