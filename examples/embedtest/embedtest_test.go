package embedtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a test clock: every package reads it through Options.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// newBroker is the whole embedding: a store in a temporary directory and a
// pop service over it, woken by the store's arrival hook, both closed when
// the test ends.
func newBroker(t *testing.T, c *clock) (*store.Store, *pop.Service) {
	t.Helper()
	var svc *pop.Service
	st, err := store.Open(t.TempDir(), store.Options{
		Sync: store.SyncNone, // a test needs no fsync
		Now:  c.Now,
		OnAppend: func(topic string, queueID int, _ int64) {
			if svc != nil {
				svc.Arrived(topic, queueID)
			}
		},
	})
	require.NoError(t, err)
	svc = pop.New(st, pop.Options{Now: c.Now})
	t.Cleanup(func() {
		assert.NoError(t, svc.Close())
		assert.NoError(t, st.Close())
	})
	return st, svc
}

// TestUnackedMessageIsRedeliveredAfterItsInvisibleTime is the kind of test
// a host writes against the embedded pieces: produce, pop, let the
// invisible time pass on the fake clock, pop again, ack.
func TestUnackedMessageIsRedeliveredAfterItsInvisibleTime(t *testing.T) {
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st, svc := newBroker(t, c)
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
	c.Advance(31 * time.Second)
	again, err := svc.Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, again.Messages, 1)
	assert.Equal(t, "order 1", string(again.Messages[0].Message.Body))
	assert.Equal(t, 2, again.Messages[0].Attempts)

	require.NoError(t, svc.Ack(again.Messages[0].Handle))
	require.ErrorIs(t, svc.Ack(first.Messages[0].Handle), pop.ErrStaleHandle)
}

// TestLongPollWakesOnAppend shows the OnAppend wiring at work: a pop that
// long-polls an empty topic returns as soon as a message is appended.
func TestLongPollWakesOnAppend(t *testing.T) {
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st, svc := newBroker(t, c)

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
