package lock_test

// Black-box acceptance tests of the lock section of ARCHITECTURE.md, written
// from the contract alone (one test per contract sentence), as an outside
// user of the package would.

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/lock"
)

// syncBuf is a slog sink safe for concurrent use.
type syncBuf = testkit.LogBuffer

// accClock is the test clock injected as Options.Now.
type accClock = testkit.Clock

func newAccClock() *accClock { return testkit.NewClock(time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)) }

const accLive = 30 * time.Second

func accTable(t *testing.T) (*lock.Table, *accClock) {
	t.Helper()
	c := newAccClock()
	return lock.New(lock.Options{MaxLiveTime: accLive, Now: c.Now}), c
}

var (
	qA = lock.Queue{Topic: "orders", Broker: "b1", QueueID: 0}
	qB = lock.Queue{Topic: "orders", Broker: "b1", QueueID: 1}
	qC = lock.Queue{Topic: "orders", Broker: "b2", QueueID: 0}
	qD = lock.Queue{Topic: "payments", Broker: "b1", QueueID: 0}
)

func TestAcceptZeroOptionsDefaultMaxLiveTimeIs60s(t *testing.T) {
	c := newAccClock()
	tb := lock.New(lock.Options{Now: c.Now})
	assert.Equal(t, 60*time.Second, tb.MaxLiveTime())
	assert.Equal(t, 60*time.Second, lock.DefaultMaxLiveTime)
	l, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	assert.Equal(t, "c1", l.ClientID)
	assert.True(t, l.Expires.Equal(c.Now().Add(60*time.Second)), "expires %v", l.Expires)

	// A zero Options without a clock also works (time.Now).
	real := lock.New(lock.Options{})
	l2, ok := real.TryLock("g", qA, "c1")
	require.True(t, ok)
	assert.WithinDuration(t, time.Now().Add(60*time.Second), l2.Expires, 5*time.Second)
}

func TestAcceptFirstLockGrantsLeaseUntilNowPlusMaxLiveTime(t *testing.T) {
	tb, c := accTable(t)
	l, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	assert.Equal(t, "c1", l.ClientID)
	assert.NotZero(t, l.Token)
	assert.True(t, l.Expires.Equal(c.Now().Add(accLive)))
	h, ok := tb.Holder("g", qA)
	require.True(t, ok)
	assert.Equal(t, l, h)
}

func TestAcceptRenewalBySameClientKeepsTokenAndExtendsExpires(t *testing.T) {
	tb, c := accTable(t)
	l1, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	c.Advance(accLive - time.Second) // still live
	l2, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	assert.Equal(t, l1.Token, l2.Token, "renewal must keep the fencing token")
	assert.True(t, l2.Expires.After(l1.Expires), "renewal must extend the lease")
	assert.True(t, l2.Expires.Equal(c.Now().Add(accLive)))
	// Renewal keeps the lease alive beyond the first expiry.
	c.Advance(2 * time.Second) // past l1.Expires, before l2.Expires
	_, ok = tb.TryLock("g", qA, "c2")
	assert.False(t, ok, "renewed lease must not be taken over at the old expiry")
	h, ok := tb.Holder("g", qA)
	require.True(t, ok)
	assert.Equal(t, "c1", h.ClientID)
	assert.Equal(t, l1.Token, h.Token)
}

func TestAcceptRenewalThroughBatchKeepsToken(t *testing.T) {
	tb, c := accTable(t)
	l1, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	c.Advance(10 * time.Second)
	got := tb.TryLockBatch("g", []lock.Queue{qA}, "c1")
	assert.Equal(t, []lock.Queue{qA}, got)
	h, ok := tb.Holder("g", qA)
	require.True(t, ok)
	assert.Equal(t, l1.Token, h.Token)
	assert.True(t, h.Expires.Equal(c.Now().Add(accLive)))
}

func TestAcceptAnotherClientGetsLeaseOnlyOnceExpired(t *testing.T) {
	tb, c := accTable(t)
	l1, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)

	_, ok = tb.TryLock("g", qA, "c2")
	assert.False(t, ok, "live lease taken by another client")
	c.Advance(accLive - time.Nanosecond)
	_, ok = tb.TryLock("g", qA, "c2")
	assert.False(t, ok, "lease taken one nanosecond before it expired")
	assert.Empty(t, tb.TryLockBatch("g", []lock.Queue{qA}, "c2"))
	h, ok := tb.Holder("g", qA)
	require.True(t, ok)
	assert.Equal(t, l1, h, "a refused request must not change the lease")

	c.Advance(2 * time.Nanosecond)
	l2, ok := tb.TryLock("g", qA, "c2")
	require.True(t, ok, "expired lease must be taken over")
	assert.Equal(t, "c2", l2.ClientID)
	assert.Greater(t, l2.Token, l1.Token)
	assert.True(t, l2.Expires.Equal(c.Now().Add(accLive)))

	// The old holder can no longer renew: it must not get the lease back.
	_, ok = tb.TryLock("g", qA, "c1")
	assert.False(t, ok)
}

func TestAcceptExpiredLeaseRelockedBySameClientTakesNewToken(t *testing.T) {
	tb, c := accTable(t)
	l1, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	c.Advance(accLive + time.Second)
	l2, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	assert.Greater(t, l2.Token, l1.Token, "an expired lease is gone: relock takes a new token")

	// Same through the batch path.
	c.Advance(accLive + time.Second)
	require.Equal(t, []lock.Queue{qA}, tb.TryLockBatch("g", []lock.Queue{qA}, "c1"))
	h, ok := tb.Holder("g", qA)
	require.True(t, ok)
	assert.Greater(t, h.Token, l2.Token)
}

func TestAcceptExpiredLeaseIsGoneForHolder(t *testing.T) {
	tb, c := accTable(t)
	_, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	c.Advance(accLive + time.Second)
	_, ok = tb.Holder("g", qA)
	assert.False(t, ok, "Holder must not report an expired lease")
}

func TestAcceptTokenStrictlyIncreasesOnEveryHandover(t *testing.T) {
	tb, c := accTable(t)
	var last uint64
	next := func(client string) {
		t.Helper()
		l, ok := tb.TryLock("g", qA, client)
		require.True(t, ok)
		require.Greater(t, l.Token, last, "token not increasing for %s", client)
		last = l.Token
	}
	next("c1")
	// unlock, then the same client again
	require.True(t, tb.Unlock("g", qA, "c1"))
	next("c1")
	// unlock, then another client
	require.True(t, tb.Unlock("g", qA, "c1"))
	next("c2")
	// batch unlock
	tb.UnlockBatch("g", []lock.Queue{qA}, "c2")
	next("c2")
	// UnlockAll
	require.Equal(t, 1, tb.UnlockAll("c2"))
	next("c1")
	// expiry, taken over
	c.Advance(accLive + time.Second)
	next("c2")
	// expiry, then sweep removes the entry: the token must never be reused
	c.Advance(accLive + time.Second)
	require.Equal(t, 1, tb.Sweep())
	next("c2")
	c.Advance(accLive + time.Second)
	require.Equal(t, 1, tb.Sweep())
	next("c3")
}

func TestAcceptTokensNeverReusedAfterSweepOfManyKeys(t *testing.T) {
	tb, c := accTable(t)
	seen := map[lock.Queue]uint64{}
	qs := []lock.Queue{qA, qB, qC, qD}
	for round := 0; round < 5; round++ {
		for _, q := range qs {
			l, ok := tb.TryLock("g", q, fmt.Sprintf("c%d", round%2))
			require.True(t, ok)
			require.Greater(t, l.Token, seen[q], "round %d queue %v", round, q)
			seen[q] = l.Token
		}
		c.Advance(accLive + time.Second)
		require.Equal(t, len(qs), tb.Sweep())
	}
}

func TestAcceptTryLockBatchReturnsExactlyThoseHeld(t *testing.T) {
	tb, c := accTable(t)
	_, ok := tb.TryLock("g", qB, "other")
	require.True(t, ok)
	_, ok = tb.TryLock("g", qC, "me")
	require.True(t, ok)

	got := tb.TryLockBatch("g", []lock.Queue{qA, qB, qC, qD}, "me")
	assert.ElementsMatch(t, []lock.Queue{qA, qC, qD}, got, "new ones and renewals, not the contended one")
	for _, q := range []lock.Queue{qA, qC, qD} {
		h, ok := tb.Holder("g", q)
		require.True(t, ok)
		assert.Equal(t, "me", h.ClientID)
		assert.True(t, h.Expires.Equal(c.Now().Add(accLive)))
	}
	h, ok := tb.Holder("g", qB)
	require.True(t, ok)
	assert.Equal(t, "other", h.ClientID)

	assert.Empty(t, tb.TryLockBatch("g", nil, "me"))

	// The contended one becomes available after its expiry, while ours were renewed.
	c.Advance(accLive / 2)
	assert.ElementsMatch(t, []lock.Queue{qA, qC, qD}, tb.TryLockBatch("g", []lock.Queue{qA, qC, qD}, "me"))
	c.Advance(accLive/2 + time.Second)
	assert.ElementsMatch(t, []lock.Queue{qA, qB, qC, qD}, tb.TryLockBatch("g", []lock.Queue{qA, qB, qC, qD}, "me"))
}

func TestAcceptUnlockByNonHolderReturnsFalseAndChangesNothing(t *testing.T) {
	tb, _ := accTable(t)
	l, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	assert.False(t, tb.Unlock("g", qA, "c2"))
	assert.False(t, tb.Unlock("g", qB, "c1"), "unlock of a free queue")
	assert.False(t, tb.Unlock("other", qA, "c1"), "unlock in another group")
	tb.UnlockBatch("g", []lock.Queue{qA}, "c2")
	assert.Equal(t, 0, tb.UnlockAll("c2"))
	h, ok := tb.Holder("g", qA)
	require.True(t, ok)
	assert.Equal(t, l, h)
	_, ok = tb.TryLock("g", qA, "c2")
	assert.False(t, ok)
}

func TestAcceptUnlockByHolderFreesAtOnce(t *testing.T) {
	tb, _ := accTable(t)
	_, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	assert.True(t, tb.Unlock("g", qA, "c1"))
	_, ok = tb.Holder("g", qA)
	assert.False(t, ok)
	assert.False(t, tb.Unlock("g", qA, "c1"), "second unlock has nothing to free")
	_, ok = tb.TryLock("g", qA, "c2")
	assert.True(t, ok, "unlocked queue goes to another client at once")
}

func TestAcceptUnlockBatchReleasesOnlyCallersLeases(t *testing.T) {
	tb, _ := accTable(t)
	require.ElementsMatch(t, []lock.Queue{qA, qB}, tb.TryLockBatch("g", []lock.Queue{qA, qB}, "c1"))
	require.ElementsMatch(t, []lock.Queue{qC}, tb.TryLockBatch("g", []lock.Queue{qC}, "c2"))
	tb.UnlockBatch("g", []lock.Queue{qA, qB, qC, qD}, "c1")
	_, ok := tb.Holder("g", qA)
	assert.False(t, ok)
	_, ok = tb.Holder("g", qB)
	assert.False(t, ok)
	h, ok := tb.Holder("g", qC)
	require.True(t, ok)
	assert.Equal(t, "c2", h.ClientID)
}

func TestAcceptUnlockAllFreesEverythingOfClientAndCounts(t *testing.T) {
	tb, _ := accTable(t)
	require.Len(t, tb.TryLockBatch("g1", []lock.Queue{qA, qB, qC}, "c1"), 3)
	require.Len(t, tb.TryLockBatch("g2", []lock.Queue{qA}, "c1"), 1)
	require.Len(t, tb.TryLockBatch("g2", []lock.Queue{qB, qD}, "c2"), 2)

	assert.Equal(t, 4, tb.UnlockAll("c1"))
	for _, k := range []struct {
		g string
		q lock.Queue
	}{{"g1", qA}, {"g1", qB}, {"g1", qC}, {"g2", qA}} {
		_, ok := tb.Holder(k.g, k.q)
		assert.False(t, ok, "%s %v still held", k.g, k.q)
	}
	for _, q := range []lock.Queue{qB, qD} {
		h, ok := tb.Holder("g2", q)
		require.True(t, ok)
		assert.Equal(t, "c2", h.ClientID)
	}
	assert.Equal(t, 0, tb.UnlockAll("c1"))
	assert.Equal(t, 2, tb.UnlockAll("c2"))
}

func TestAcceptGroupsAndQueueFieldsAreIndependentKeys(t *testing.T) {
	tb, _ := accTable(t)
	_, ok := tb.TryLock("g1", qA, "c1")
	require.True(t, ok)
	_, ok = tb.TryLock("g2", qA, "c2")
	assert.True(t, ok, "groups are independent")
	_, ok = tb.TryLock("g1", lock.Queue{Topic: qA.Topic, Broker: "other", QueueID: qA.QueueID}, "c2")
	assert.True(t, ok, "broker is part of the key")
	_, ok = tb.TryLock("g1", lock.Queue{Topic: "x", Broker: qA.Broker, QueueID: qA.QueueID}, "c2")
	assert.True(t, ok, "topic is part of the key")
	_, ok = tb.TryLock("g1", lock.Queue{Topic: qA.Topic, Broker: qA.Broker, QueueID: 7}, "c2")
	assert.True(t, ok, "queue id is part of the key")
}

func TestAcceptSweepDropsOnlyExpiredLeases(t *testing.T) {
	tb, c := accTable(t)
	_, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	c.Advance(accLive / 2)
	_, ok = tb.TryLock("g", qB, "c2")
	require.True(t, ok)
	assert.Equal(t, 0, tb.Sweep())
	c.Advance(accLive/2 + time.Second) // qA expired, qB live
	assert.Equal(t, 1, tb.Sweep())
	_, ok = tb.Holder("g", qA)
	assert.False(t, ok)
	h, ok := tb.Holder("g", qB)
	require.True(t, ok)
	assert.Equal(t, "c2", h.ClientID)
	assert.Equal(t, 0, tb.Sweep())
}

func TestAcceptBadInputIsRefusedAndChangesNothing(t *testing.T) {
	tb, _ := accTable(t)
	_, ok := tb.TryLock("", qA, "c1")
	assert.False(t, ok, "empty group")
	_, ok = tb.TryLock("g", qA, "")
	assert.False(t, ok, "empty client")
	neg := lock.Queue{Topic: "t", Broker: "b", QueueID: -1}
	_, ok = tb.TryLock("g", neg, "c1")
	assert.False(t, ok, "negative queue")

	got := tb.TryLockBatch("g", []lock.Queue{qA, neg, qB}, "c1")
	assert.ElementsMatch(t, []lock.Queue{qA, qB}, got, "bad queues are left out")
	assert.Empty(t, tb.TryLockBatch("", []lock.Queue{qC}, "c1"))
	assert.Empty(t, tb.TryLockBatch("g", []lock.Queue{qC}, ""))

	_, ok = tb.Holder("", qA)
	assert.False(t, ok)
	_, ok = tb.Holder("g", neg)
	assert.False(t, ok)
	_, ok = tb.Holder("g", qC)
	assert.False(t, ok)
	assert.False(t, tb.Unlock("", qA, "c1"))
	assert.False(t, tb.Unlock("g", qA, ""))
	assert.False(t, tb.Unlock("g", neg, "c1"))
	assert.Equal(t, 0, tb.UnlockAll(""))
	h, ok := tb.Holder("g", qA)
	require.True(t, ok)
	assert.Equal(t, "c1", h.ClientID)
	assert.NotPanics(t, func() { tb.UnlockBatch("", nil, "") })
}

func TestAcceptContentionTakeoverAndExpiryAreLoggedWithKeys(t *testing.T) {
	var buf syncBuf
	c := newAccClock()
	tb := lock.New(lock.Options{MaxLiveTime: accLive, Now: c.Now,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	q := lock.Queue{Topic: "topicXY", Broker: "brokerXY", QueueID: 5}
	_, ok := tb.TryLock("groupXY", q, "clientOLD")
	require.True(t, ok)
	before := len(buf.String())
	_, ok = tb.TryLock("groupXY", q, "clientNEW")
	require.False(t, ok)
	line := buf.String()[before:]
	for _, want := range []string{"groupXY", "topicXY", "clientOLD", "clientNEW"} {
		assert.Contains(t, line, want, "contention log lacks %s", want)
	}

	c.Advance(accLive + time.Second)
	before = len(buf.String())
	_, ok = tb.TryLock("groupXY", q, "clientNEW")
	require.True(t, ok)
	line = buf.String()[before:]
	for _, want := range []string{"groupXY", "topicXY", "clientOLD", "clientNEW"} {
		assert.Contains(t, line, want, "takeover log lacks %s", want)
	}

	c.Advance(accLive + time.Second)
	before = len(buf.String())
	require.Equal(t, 1, tb.Sweep())
	line = buf.String()[before:]
	for _, want := range []string{"groupXY", "topicXY", "clientNEW"} {
		assert.Contains(t, line, want, "expiry log lacks %s", want)
	}
}

func TestAcceptConcurrentContendersNeverShareALease(t *testing.T) {
	tb, c := accTable(t)
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[uint64]string{}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if l, ok := tb.TryLock("g", qA, id); ok {
					mu.Lock()
					if prev, dup := wins[l.Token]; dup && prev != id {
						t.Errorf("token %d held by %s and %s", l.Token, prev, id)
					}
					wins[l.Token] = id
					mu.Unlock()
					if i%3 == 0 {
						tb.Unlock("g", qA, id)
					}
				}
				if i%50 == 0 {
					c.Advance(accLive)
				}
			}
		}(fmt.Sprintf("c%d", w))
	}
	wg.Wait()
	assert.NotEmpty(t, wins)
}

// --- Keeper ---

func TestAcceptNewKeeperRefusesPeriodLongerThanAThird(t *testing.T) {
	for _, live := range []time.Duration{60 * time.Second, 30 * time.Second, 3 * time.Second, 10 * time.Second} {
		tb := lock.New(lock.Options{MaxLiveTime: live, Now: newAccClock().Now})
		for _, every := range []time.Duration{live/3 + time.Nanosecond, live/3 + time.Millisecond, live / 2, live, 2 * live} {
			k, err := lock.NewKeeper(tb, "g", "c1", lock.KeeperOptions{Every: every})
			assert.ErrorIs(t, err, lock.ErrRenewTooSlow, "live %v every %v", live, every)
			if k != nil {
				_ = k.Close()
			}
		}
		// Exactly a third (and less) is accepted.
		for _, every := range []time.Duration{live / 3, live / 4, live / 10} {
			k, err := lock.NewKeeper(tb, "g", "c1", lock.KeeperOptions{Every: every})
			require.NoError(t, err, "live %v every %v", live, every)
			require.NoError(t, k.Close())
		}
	}
	// Zero Options table: 60 s default, 20 s is the most.
	tb := lock.New(lock.Options{})
	k, err := lock.NewKeeper(tb, "g", "c1", lock.KeeperOptions{Every: 20 * time.Second})
	require.NoError(t, err)
	require.NoError(t, k.Close())
	_, err = lock.NewKeeper(tb, "g", "c1", lock.KeeperOptions{Every: 21 * time.Second})
	assert.ErrorIs(t, err, lock.ErrRenewTooSlow)
}

func TestAcceptNewKeeperBadInput(t *testing.T) {
	tb, _ := accTable(t)
	for _, tc := range []struct {
		name          string
		l             lock.Locker
		group, client string
		every         time.Duration
	}{
		{"nil locker", nil, "g", "c", time.Second},
		{"empty group", tb, "", "c", time.Second},
		{"empty client", tb, "g", "", time.Second},
		{"negative period", tb, "g", "c", -time.Second},
	} {
		var k *lock.Keeper
		var err error
		require.NotPanics(t, func() { k, err = lock.NewKeeper(tc.l, tc.group, tc.client, lock.KeeperOptions{Every: tc.every}) }, tc.name)
		assert.Error(t, err, tc.name)
		if tc.name == "empty group" || tc.name == "empty client" {
			assert.ErrorIs(t, err, lock.ErrInvalid, tc.name)
		}
		if k != nil {
			_ = k.Close()
		}
	}
}

func TestAcceptKeeperHoldLocksAtOnceAndReturnsThoseHeld(t *testing.T) {
	tb, _ := accTable(t)
	_, ok := tb.TryLock("g", qB, "other")
	require.True(t, ok)
	k, err := lock.NewKeeper(tb, "g", "me", lock.KeeperOptions{Every: time.Hour / 1000})
	require.NoError(t, err)
	defer k.Close()

	got := k.Hold(qA, qB, qC)
	assert.ElementsMatch(t, []lock.Queue{qA, qC}, got)
	assert.ElementsMatch(t, []lock.Queue{qA, qC}, k.Held())
	for _, q := range []lock.Queue{qA, qC} {
		h, ok := tb.Holder("g", q)
		require.True(t, ok, "Hold must lock at once")
		assert.Equal(t, "me", h.ClientID)
	}
	h, _ := tb.Holder("g", qB)
	assert.Equal(t, "other", h.ClientID)

	k.Release(qA)
	assert.ElementsMatch(t, []lock.Queue{qC}, k.Held())
	_, ok = tb.Holder("g", qA)
	assert.False(t, ok, "Release must unlock")
}

func TestAcceptKeeperRenewsEveryPeriod(t *testing.T) {
	c := newAccClock()
	live := 3 * time.Second
	tb := lock.New(lock.Options{MaxLiveTime: live, Now: c.Now})
	k, err := lock.NewKeeper(tb, "g", "me", lock.KeeperOptions{Every: 5 * time.Millisecond}) // real period, fake lease clock
	require.NoError(t, err)
	defer k.Close()
	require.Len(t, k.Hold(qA, qB), 2)
	first, _ := tb.Holder("g", qA)

	for i := 0; i < 5; i++ {
		c.Advance(live / 2)
		// The keeper must renew before the fake lease ends.
		require.Eventually(t, func() bool {
			h, ok := tb.Holder("g", qA)
			h2, ok2 := tb.Holder("g", qB)
			return ok && ok2 && h.Expires.Equal(c.Now().Add(live)) && h2.Expires.Equal(c.Now().Add(live))
		}, 5*time.Second, time.Millisecond, "round %d", i)
	}
	h, ok := tb.Holder("g", qA)
	require.True(t, ok)
	assert.Equal(t, first.Token, h.Token, "renewal keeps the token")
	_, ok = tb.TryLock("g", qA, "other")
	assert.False(t, ok)
}

func TestAcceptKeeperCloseUnlocksEverythingAtOnce(t *testing.T) {
	tb, _ := accTable(t)
	qs := []lock.Queue{qA, qB, qC, qD}
	k, err := lock.NewKeeper(tb, "g", "A", lock.KeeperOptions{Every: time.Second})
	require.NoError(t, err)
	require.Len(t, k.Hold(qs...), 4)

	require.NoError(t, k.Close())
	// No clock advance: B gets every queue at once.
	assert.ElementsMatch(t, qs, tb.TryLockBatch("g", qs, "B"))
	assert.NoError(t, k.Close(), "Close is idempotent")
	assert.Empty(t, k.Hold(qA), "Hold after Close must not lock")
	h, _ := tb.Holder("g", qA)
	assert.Equal(t, "B", h.ClientID)
}

func TestAcceptKilledInstanceQueuesFreeOnlyAfterMaxLiveTime(t *testing.T) {
	tb, c := accTable(t)
	qs := []lock.Queue{qA, qB}
	// Instance A locked and was killed: no renewal, no unlock.
	require.Len(t, tb.TryLockBatch("g", qs, "A"), 2)
	c.Advance(accLive - time.Second)
	assert.Empty(t, tb.TryLockBatch("g", qs, "B"), "taken before expiry")
	c.Advance(2 * time.Second)
	assert.ElementsMatch(t, qs, tb.TryLockBatch("g", qs, "B"), "free once MaxLiveTime passed")
}

// countingLocker is a host's remote client: anything with the Locker methods.
type countingLocker struct {
	mu       sync.Mutex
	inner    *lock.Table
	unlocked []lock.Queue
}

func (l *countingLocker) TryLockBatch(g string, qs []lock.Queue, c string) []lock.Queue {
	return l.inner.TryLockBatch(g, qs, c)
}

func (l *countingLocker) UnlockBatch(g string, qs []lock.Queue, c string) {
	l.mu.Lock()
	l.unlocked = append(l.unlocked, qs...)
	l.mu.Unlock()
	l.inner.UnlockBatch(g, qs, c)
}
func (l *countingLocker) MaxLiveTime() time.Duration { return l.inner.MaxLiveTime() }

func TestAcceptKeeperWorksOverAnyLocker(t *testing.T) {
	var _ lock.Locker = (*lock.Table)(nil)
	tb, _ := accTable(t)
	cl := &countingLocker{inner: tb}
	_, err := lock.NewKeeper(cl, "g", "me", lock.KeeperOptions{Every: accLive/3 + time.Millisecond})
	require.ErrorIs(t, err, lock.ErrRenewTooSlow, "the 1:3 rule reads the Locker's MaxLiveTime")
	k, err := lock.NewKeeper(cl, "g", "me", lock.KeeperOptions{Every: accLive / 3})
	require.NoError(t, err)
	require.Len(t, k.Hold(qA, qB), 2)
	require.NoError(t, k.Close())
	cl.mu.Lock()
	assert.ElementsMatch(t, []lock.Queue{qA, qB}, cl.unlocked)
	cl.mu.Unlock()
}

func TestAcceptErrorsAreSentinels(t *testing.T) {
	_, err := lock.NewKeeper(lock.New(lock.Options{}), "g", "c", lock.KeeperOptions{Every: time.Hour})
	require.Error(t, err)
	assert.True(t, errors.Is(err, lock.ErrRenewTooSlow))
	assert.NotEmpty(t, err.Error())
}

func TestAcceptStatsIsAPlainStruct(t *testing.T) {
	tb, _ := accTable(t)
	_, _ = tb.TryLock("g", qA, "c1")
	_, _ = tb.TryLock("g", qA, "c2")
	s := tb.Stats()
	assert.Equal(t, uint64(1), s.Locked)
	assert.Equal(t, uint64(1), s.Refused)
}

func TestAcceptTokenIncreasesAfterExpiredHolderUnlocks(t *testing.T) {
	tb, c := accTable(t)
	l1, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	c.Advance(accLive + time.Second)
	_ = tb.Unlock("g", qA, "c1")
	_ = tb.UnlockAll("c1")
	l2, ok := tb.TryLock("g", qA, "c1")
	require.True(t, ok)
	assert.Greater(t, l2.Token, l1.Token)
}

func TestAcceptKeeperHoldLeavesBadQueuesOutAndReleaseOfUnheldIsHarmless(t *testing.T) {
	tb, _ := accTable(t)
	k, err := lock.NewKeeper(tb, "g", "me", lock.KeeperOptions{Every: time.Second})
	require.NoError(t, err)
	defer k.Close()
	neg := lock.Queue{Topic: "t", QueueID: -1}
	// Bad input changes nothing: the whole Hold is refused.
	assert.Empty(t, k.Hold(qA, neg))
	_, ok := tb.Holder("g", qA)
	assert.False(t, ok, "a Hold with a bad queue locked the good ones")
	assert.Empty(t, k.Held())
	assert.ElementsMatch(t, []lock.Queue{qA}, k.Hold(qA))
	assert.Empty(t, k.Hold())
	k.Release(qB, neg)
	assert.ElementsMatch(t, []lock.Queue{qA}, k.Held())
	_, ok = tb.TryLock("g", qB, "other")
	assert.True(t, ok)
	assert.Empty(t, k.Hold(qB), "contended queue is not held")
	assert.ElementsMatch(t, []lock.Queue{qA}, k.Held())
	h, _ := tb.Holder("g", qB)
	assert.Equal(t, "other", h.ClientID)
	require.NoError(t, k.Close())
	h, _ = tb.Holder("g", qB)
	assert.Equal(t, "other", h.ClientID, "Close must not unlock what the keeper does not hold")
}

// At the very instant a lease expires, every operation must agree on whether
// it is live: Holder, another client's TryLock and Sweep.
func TestAcceptExpiryInstantIsJudgedAlikeByEveryOperation(t *testing.T) {
	for _, op := range []string{"holder", "trylock", "sweep"} {
		tb, c := accTable(t)
		l, ok := tb.TryLock("g", qA, "c1")
		require.True(t, ok)
		c.Advance(l.Expires.Sub(c.Now())) // now == Expires
		_, held := tb.Holder("g", qA)
		switch op {
		case "holder":
			_, ok2 := tb.TryLock("g", qA, "c2")
			assert.Equal(t, held, !ok2, "Holder says live=%v but another client's TryLock got=%v", held, ok2)
		case "trylock":
			n := tb.Sweep()
			assert.Equal(t, held, n == 0, "Holder says live=%v but Sweep dropped %d", held, n)
		case "sweep":
			got := tb.TryLockBatch("g", []lock.Queue{qA}, "c2")
			assert.Equal(t, held, len(got) == 0)
		}
	}
}
