package lock

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTable(c *fakeClock) *Table { return New(Options{Now: c.Now}) }

func TestZeroOptionsIsAWorkingDefault(t *testing.T) {
	tb := New(Options{})
	assert.Equal(t, DefaultMaxLiveTime, tb.MaxLiveTime())
	assert.Equal(t, 60*time.Second, DefaultMaxLiveTime)
	l, ok := tb.TryLock("g", q(0), "a")
	require.True(t, ok)
	assert.Equal(t, "a", l.ClientID)
	assert.NotZero(t, l.Token)
	assert.WithinDuration(t, time.Now().Add(DefaultMaxLiveTime), l.Expires, 5*time.Second)
}

func TestRenewalByHolderKeepsTokenAndExtendsExpiry(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	first, ok := tb.TryLock("g", q(1), "a")
	require.True(t, ok)
	assert.Equal(t, c.Now().Add(DefaultMaxLiveTime), first.Expires)

	c.Advance(59 * time.Second)
	again, ok := tb.TryLock("g", q(1), "a")
	require.True(t, ok)
	assert.Equal(t, first.Token, again.Token, "renewal must keep the fencing token")
	assert.Equal(t, c.Now().Add(DefaultMaxLiveTime), again.Expires)

	// 59 s after the renewal the lease is still the holder's: the renewal
	// really moved the expiry, not just answered true.
	c.Advance(59 * time.Second)
	_, ok = tb.TryLock("g", q(1), "b")
	assert.False(t, ok)
	h, ok := tb.Holder("g", q(1))
	require.True(t, ok)
	assert.Equal(t, "a", h.ClientID)
	assert.Equal(t, uint64(1), tb.Stats().Renewed)
}

func TestOtherClientRefusedUntilLeaseExpiresThenTakesOverWithNewToken(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	a, ok := tb.TryLock("g", q(5), "a")
	require.True(t, ok)

	c.Advance(DefaultMaxLiveTime - time.Nanosecond)
	_, ok = tb.TryLock("g", q(5), "b")
	assert.False(t, ok, "taken over before expiry")
	h, ok := tb.Holder("g", q(5))
	require.True(t, ok)
	assert.Equal(t, "a", h.ClientID)

	c.Advance(time.Nanosecond)
	_, ok = tb.Holder("g", q(5))
	assert.False(t, ok, "an expired lease has no holder")
	b, ok := tb.TryLock("g", q(5), "b")
	require.True(t, ok)
	assert.Equal(t, "b", b.ClientID)
	assert.Greater(t, b.Token, a.Token)

	// The old holder, back late, is refused: it must not renew b's lease.
	_, ok = tb.TryLock("g", q(5), "a")
	assert.False(t, ok)
	st := tb.Stats()
	assert.Equal(t, uint64(1), st.TakenOver)
	assert.Equal(t, uint64(2), st.Refused)
}

func TestExpiredLeaseRelockedBySameClientGetsNewToken(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	a1, _ := tb.TryLock("g", q(0), "a")
	c.Advance(DefaultMaxLiveTime)
	a2, ok := tb.TryLock("g", q(0), "a")
	require.True(t, ok)
	assert.Greater(t, a2.Token, a1.Token, "an expired lease is gone; relocking is a change of hands")
}

func TestTokenNeverReusedAfterUnlockOrSweep(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	var last uint64
	next := func(client string) {
		l, ok := tb.TryLock("g", q(0), client)
		require.True(t, ok)
		require.Greater(t, l.Token, last)
		last = l.Token
	}
	next("a")
	require.True(t, tb.Unlock("g", q(0), "a"))
	next("a")
	c.Advance(DefaultMaxLiveTime)
	require.Equal(t, 1, tb.Sweep())
	require.Zero(t, tb.Stats().Entries, "sweep removed the entry")
	next("b")
	c.Advance(DefaultMaxLiveTime)
	next("a") // takeover without sweep
}

func TestTokenBaseKeepsTokensUniqueAcrossRestart(t *testing.T) {
	tb := New(Options{TokenBase: 1000})
	l, ok := tb.TryLock("g", q(0), "a")
	require.True(t, ok)
	assert.Equal(t, uint64(1001), l.Token)
}

func TestUnlockByNonHolderDoesNothing(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	a, _ := tb.TryLock("g", q(0), "a")
	assert.False(t, tb.Unlock("g", q(0), "b"))
	assert.False(t, tb.Unlock("other", q(0), "a"), "groups are independent")
	assert.False(t, tb.Unlock("g", q(9), "a"))
	h, ok := tb.Holder("g", q(0))
	require.True(t, ok)
	assert.Equal(t, a, h)

	c.Advance(DefaultMaxLiveTime)
	assert.False(t, tb.Unlock("g", q(0), "a"), "an expired lease is not held")
	assert.Zero(t, tb.Stats().Unlocked)
}

func TestUnlockHandsOverAtOnce(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	a, _ := tb.TryLock("g", q(0), "a")
	require.True(t, tb.Unlock("g", q(0), "a"))
	_, ok := tb.Holder("g", q(0))
	assert.False(t, ok)
	b, ok := tb.TryLock("g", q(0), "b")
	require.True(t, ok)
	assert.Greater(t, b.Token, a.Token)
}

func TestInvalidInputIsRefusedLoggedAndChangesNothing(t *testing.T) {
	c := newFakeClock()
	var buf bytes.Buffer
	// Rejections are answered to the caller, so they are logged at DEBUG.
	tb := New(Options{Now: c.Now, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	_, ok := tb.TryLock("", q(0), "a")
	assert.False(t, ok)
	_, ok = tb.TryLock("g", q(0), "")
	assert.False(t, ok)
	_, ok = tb.TryLock("g", q(-1), "a")
	assert.False(t, ok)
	assert.False(t, tb.Unlock("", q(0), "a"))
	assert.Empty(t, tb.TryLockBatch("", queues(3), "a"))
	assert.Empty(t, tb.TryLockBatch("g", queues(3), ""))
	assert.Equal(t, []Queue{q(0)}, tb.TryLockBatch("g", []Queue{q(-3), q(0)}, "a"))
	assert.Zero(t, tb.UnlockAll(""))
	_, ok = tb.Holder("", q(0))
	assert.False(t, ok)

	st := tb.Stats()
	assert.Equal(t, uint64(1), st.Entries, "only the valid queue was locked")
	assert.Equal(t, uint64(1), st.Locked)
	assert.Equal(t, uint64(13), st.Invalid)
	out := buf.String()
	assert.Equal(t, 13, strings.Count(out, "request rejected"), out)
	assert.Contains(t, out, "queue=-3")
	assert.Contains(t, out, "op=TryLockBatch")
}

func TestTryLockBatchReturnsExactlyTheQueuesNowHeld(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	_, ok := tb.TryLock("g", q(1), "b")
	require.True(t, ok)
	_, ok = tb.TryLock("g", q(2), "a")
	require.True(t, ok)
	_, ok = tb.TryLock("other", q(3), "b")
	require.True(t, ok)

	in := []Queue{q(0), q(1), q(2), q(3), q(0), q(-1)}
	got := tb.TryLockBatch("g", in, "a")
	assert.Equal(t, []Queue{q(0), q(2), q(3)}, got, "q1 is b's, q0 asked twice, q-1 invalid")
	for _, x := range got {
		h, ok := tb.Holder("g", x)
		require.True(t, ok)
		assert.Equal(t, "a", h.ClientID)
	}
	assert.Equal(t, []Queue{q(0), q(1), q(2), q(3), q(0), q(-1)}, in, "input not modified")

	// Large batches dedupe too.
	big := append(queues(100), queues(100)...)
	got = tb.TryLockBatch("big", big, "a")
	assert.Equal(t, queues(100), got)
}

func TestUnlockAllFreesEveryGroupAtOnce(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	tb.TryLockBatch("g1", queues(4), "a")
	tb.TryLockBatch("g2", queues(3), "a")
	tb.TryLockBatch("g3", queues(2), "b")
	tb.TryLock("g1", Queue{Topic: "t2", QueueID: 0}, "a")
	c.Advance(time.Second)
	assert.Equal(t, 8, tb.UnlockAll("a"))
	assert.Len(t, tb.TryLockBatch("g1", queues(4), "c"), 4)
	assert.Len(t, tb.TryLockBatch("g2", queues(3), "c"), 3)
	assert.Empty(t, tb.TryLockBatch("g3", queues(2), "c"), "b's leases are untouched")
	assert.Zero(t, tb.UnlockAll("a"))
}

func TestUnlockBatchReleasesOnlyOwnLeases(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	tb.TryLockBatch("g", queues(2), "a")
	tb.TryLock("g", q(2), "b")
	tb.UnlockBatch("g", queues(3), "a")
	_, ok := tb.Holder("g", q(0))
	assert.False(t, ok)
	h, ok := tb.Holder("g", q(2))
	require.True(t, ok)
	assert.Equal(t, "b", h.ClientID)
}

func TestSweepDropsOnlyExpiredLeases(t *testing.T) {
	c := newFakeClock()
	var mu sync.Mutex
	var evs []Event
	tb := New(Options{Now: c.Now, MaxLiveTime: 10 * time.Second, OnEvent: func(e Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	}})
	tb.TryLock("g", q(0), "a")
	c.Advance(5 * time.Second)
	tb.TryLock("g", q(1), "b")
	assert.Zero(t, tb.Sweep())
	c.Advance(5 * time.Second)
	assert.Equal(t, 1, tb.Sweep())
	assert.Equal(t, uint64(1), tb.Stats().Entries)
	_, ok := tb.Holder("g", q(1))
	assert.True(t, ok)
	last := evs[len(evs)-1]
	assert.Equal(t, EventExpired, last.Kind)
	assert.Equal(t, "a", last.OldClient)
	assert.Equal(t, q(0), last.Queue)
	assert.Equal(t, uint64(1), tb.Stats().Expired)
}

func TestClockStepBackNeverShortensLease(t *testing.T) {
	c := newFakeClock()
	tb := newTable(c)
	a, _ := tb.TryLock("g", q(0), "a")
	c.Advance(-10 * time.Second)
	again, ok := tb.TryLock("g", q(0), "a")
	require.True(t, ok)
	assert.Equal(t, a.Expires, again.Expires)
}

func TestOnEventReportsEveryKindWithOldAndNewClient(t *testing.T) {
	c := newFakeClock()
	var evs []Event
	tb := New(Options{Now: c.Now, OnEvent: func(e Event) { evs = append(evs, e) }})
	tb.TryLock("g", q(0), "a")           // locked
	tb.TryLock("g", q(0), "a")           // renewed
	tb.TryLock("g", q(0), "b")           // refused
	c.Advance(DefaultMaxLiveTime)        //
	tb.TryLock("g", q(0), "b")           // taken over
	tb.Unlock("g", q(0), "b")            // unlocked
	tb.TryLock("g", q(1), "c")           // locked
	c.Advance(DefaultMaxLiveTime)        //
	tb.Sweep()                           // expired
	kinds := make([]EventKind, len(evs)) //
	for i, e := range evs {
		kinds[i] = e.Kind
	}
	assert.Equal(t, []EventKind{EventLocked, EventRenewed, EventRefused, EventTakenOver,
		EventUnlocked, EventLocked, EventExpired}, kinds)
	assert.Equal(t, "a", evs[2].OldClient)
	assert.Equal(t, "b", evs[2].Client)
	assert.Equal(t, "a", evs[3].OldClient)
	assert.Equal(t, "b", evs[3].Client)
	assert.Equal(t, "taken over", EventTakenOver.String())
	assert.Equal(t, "unknown", EventKind(99).String())
}

func TestContentionAndTakeoverLoggedWithGroupQueueOldAndNewClient(t *testing.T) {
	c := newFakeClock()
	var buf bytes.Buffer
	tb := New(Options{Now: c.Now, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	qq := Queue{Topic: "orders", Broker: "broker-2", QueueID: 5}
	tb.TryLock("cg", qq, "10.238.18.6@29")
	tb.TryLockBatch("cg", []Queue{qq}, "10.238.18.122@29")
	c.Advance(DefaultMaxLiveTime)
	tb.TryLock("cg", qq, "10.238.18.122@29")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, buf.String())
	for i, want := range []string{"locked by other client", "lease expired, taken over"} {
		assert.Contains(t, lines[i], want)
		for _, attr := range []string{"group=cg", "topic=orders", "broker=broker-2", "queue=5",
			"old_client=10.238.18.6@29", "new_client=10.238.18.122@29"} {
			assert.Contains(t, lines[i], attr)
		}
	}
}

// Unlock releases whatever lease the client holds when it runs; UnlockLease
// releases only the lease it names, so an unlock meant for a lease that
// expired and was taken again by the same client leaves the new one alone.
func TestUnlockLeaseLeavesTheSameClientsNewerLeaseAlone(t *testing.T) {
	c := newFakeClock()
	tb := New(Options{Now: c.Now})
	old, ok := tb.TryLock("g", q(0), "a")
	require.True(t, ok)
	c.Advance(DefaultMaxLiveTime) // old expired
	cur, ok := tb.TryLock("g", q(0), "a")
	require.True(t, ok)
	require.Greater(t, cur.Token, old.Token)

	assert.False(t, tb.UnlockLease("g", q(0), old), "the old lease is gone")
	h, ok := tb.Holder("g", q(0))
	require.True(t, ok)
	assert.Equal(t, cur.Token, h.Token)
	assert.False(t, tb.UnlockLease("g", q(0), Lease{ClientID: "b", Token: cur.Token}), "another client's lease")
	assert.False(t, tb.UnlockLease("g", q(0), Lease{ClientID: "a"}), "no token is bad input")
	assert.True(t, tb.UnlockLease("g", q(0), cur))
	_, ok = tb.Holder("g", q(0))
	assert.False(t, ok)
}

func TestStatsEncodeWithSnakeCaseKeys(t *testing.T) {
	tb := New(Options{})
	tb.TryLock("g", q(0), "a")
	b, err := json.Marshal(tb.Stats())
	require.NoError(t, err)
	assert.JSONEq(t, `{"entries":1,"locked":1,"renewed":0,"taken_over":0,"refused":0,"unlocked":0,"expired":0,"invalid":0}`, string(b))
}

func TestCloseRefusesEveryChangeAndKeepsReads(t *testing.T) {
	c := newFakeClock()
	tb := New(Options{Now: c.Now})
	l, ok := tb.TryLock("g", q(0), "a")
	require.True(t, ok)
	require.NoError(t, tb.Close())
	require.NoError(t, tb.Close(), "idempotent")

	_, ok = tb.TryLock("g", q(1), "a")
	assert.False(t, ok)
	_, ok = tb.TryLock("g", q(0), "a")
	assert.False(t, ok, "not even a renewal")
	assert.Empty(t, tb.TryLockBatch("g", []Queue{q(2)}, "a"))
	assert.False(t, tb.Unlock("g", q(0), "a"))
	assert.False(t, tb.UnlockLease("g", q(0), l))
	assert.Zero(t, tb.UnlockAll("a"))
	c.Advance(DefaultMaxLiveTime)
	assert.Zero(t, tb.Sweep())
	assert.Equal(t, uint64(1), tb.Stats().Entries)
	assert.Equal(t, uint64(1), tb.Stats().Locked)
}
