package lock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The field report (lock-lease-expiry-after-unclean-shutdown): an orderly
// consumer instance moved by its orchestrator was shut down without
// unlocking; its queue stayed leased for the full 60 s expiry while the new
// instance logged "locked by other client", and the operators had to keep
// the client's renew interval and the broker's expiry 1:3 by hand.
//
// These tests fail on that design. Checked by hand: with Keeper.Close not
// calling UnlockBatch, TestGracefulCloseHandsQueuesOverAtOnce fails (B gets
// none of the queues); with NewKeeper not checking the period,
// TestNewKeeperRefusesPeriodLongerThanAThirdOfMaxLiveTime fails; with the
// expiry check off by one (now > expires instead of now >= expires) or with
// leases never expiring, TestKilledKeeperQueuesMoveOnlyAfterMaxLiveTime fails.

func fieldQueues() []Queue {
	qs := make([]Queue, 8)
	for i := range qs {
		qs[i] = Queue{Topic: "orders", Broker: "broker-2", QueueID: i}
	}
	return qs
}

func TestGracefulCloseHandsQueuesOverAtOnce(t *testing.T) {
	c := newFakeClock()
	tb := New(Options{Now: c.Now})
	a, err := NewKeeper(tb, "cg", "10.238.18.6@29", KeeperOptions{Every: every20})
	require.NoError(t, err)
	b := newKeeper(t, tb, "10.238.18.122@29")

	require.Equal(t, fieldQueues(), a.Hold(fieldQueues()...))
	tokens := map[Queue]uint64{}
	for _, x := range fieldQueues() {
		l, _ := tb.Holder("cg", x)
		tokens[x] = l.Token
	}
	require.Empty(t, b.Hold(fieldQueues()...), "A holds them")

	require.NoError(t, a.Close()) // graceful shutdown; the clock does not move
	assert.Equal(t, fieldQueues(), b.Hold(fieldQueues()...), "B gets every queue at once")
	assert.Equal(t, fieldQueues(), b.Held())
	for _, x := range fieldQueues() {
		l, ok := tb.Holder("cg", x)
		require.True(t, ok)
		assert.Greater(t, l.Token, tokens[x], "a write fenced with A's token is refused")
	}
}

func TestKilledKeeperQueuesMoveOnlyAfterMaxLiveTime(t *testing.T) {
	c := newFakeClock()
	tb := New(Options{Now: c.Now})
	a := newKeeper(t, tb, "10.238.18.6@29") // closed only by Cleanup, after the test
	b := newKeeper(t, tb, "10.238.18.122@29")
	require.Equal(t, fieldQueues(), a.Hold(fieldQueues()...))

	// A is killed: no Close, no more renewals. B retries every period, as
	// its keeper would, and is refused until the leases run out.
	expiry := c.Now().Add(DefaultMaxLiveTime)
	for c.Now().Add(every20).Before(expiry) {
		c.Advance(every20)
		require.Empty(t, b.Hold(fieldQueues()...), "B got a queue before A's leases expired")
	}
	c.Advance(expiry.Sub(c.Now()) - time.Nanosecond)
	require.Empty(t, b.Hold(fieldQueues()...), "taken over 1 ns before MaxLiveTime")

	c.Advance(time.Nanosecond)
	assert.Equal(t, fieldQueues(), b.Hold(fieldQueues()...), "B gets all of them once MaxLiveTime passed")
	assert.Equal(t, uint64(len(fieldQueues())), tb.Stats().TakenOver)

	// A's keeper, had it survived, would learn it lost everything.
	assert.Equal(t, fieldQueues(), a.Renew())
	assert.Empty(t, a.Held())
}
