package brokercore_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
)

// A host subscribes to consumer, lock and offset events after Open — no
// late binding through Options callbacks — and its Options hooks still run
// first.
func TestHooksAfterOpenSeeConsumerLockAndResetEventsAfterTheOptionsHooks(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	note := func(s string) { mu.Lock(); seen = append(seen, s); mu.Unlock() }
	opts := testOptions(newClock())
	opts.Consumer.OnEvent = func(ev consumer.Event) { note("opt-consumer:" + ev.Kind.String()) }
	opts.Lock.OnEvent = func(ev lock.Event) { note("opt-lock:" + ev.Kind.String()) }
	opts.Offset.OnReset = func(g, tp string, _ int, _ int64, _ uint64) { note("opt-reset:" + g + "/" + tp) }
	b := openBroker(t, t.TempDir(), opts)

	rmC := b.OnConsumerEvent(func(ev consumer.Event) { note("consumer:" + ev.Kind.String()) })
	rmL := b.OnLockEvent(func(ev lock.Event) { note("lock:" + ev.Kind.String()) })
	rmR := b.OnOffsetReset(func(r brokercore.OffsetReset) {
		note("reset:" + r.Group + "/" + r.Topic)
		assert.EqualValues(t, 1, r.Epoch)
	})

	_, err := b.Consumers().RegisterWithoutSub(group, consumerClient())
	require.NoError(t, err)
	_, ok := b.Locks().TryLock(group, lock.Queue{Topic: topic}, "c1")
	require.True(t, ok)
	require.NoError(t, b.Store().Append(msg("a")))
	_, err = b.Offsets().Reset(group, topic, 0, 0)
	require.NoError(t, err)

	mu.Lock()
	got := append([]string(nil), seen...)
	seen = nil
	mu.Unlock()
	require.NotEmpty(t, got)
	// every subscriber event comes right after the Options hook's twin
	for i, s := range got {
		if !strings.HasPrefix(s, "opt-") {
			require.Positive(t, i, s)
			assert.Equal(t, "opt-"+s, got[i-1])
		}
	}
	assert.Contains(t, got, "reset:g/orders")
	assert.Contains(t, got, "lock:locked")

	rmC()
	rmC() // idempotent
	rmL()
	rmR()
	_, err = b.Consumers().RegisterWithoutSub("g2", consumerClient())
	require.NoError(t, err)
	_, err = b.Offsets().Reset(group, topic, 0, 0)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		assert.Contains(t, s, "opt-", "removed subscribers get nothing")
	}
}

// Subscribers run in subscription order; a subscriber may unsubscribe
// itself from its own call (no lock is held); concurrent subscribe and
// unsubscribe beside events is race-free.
func TestHooksRunInOrderAndMayUnsubscribeFromTheirCall(t *testing.T) {
	b := openBroker(t, t.TempDir(), testOptions(newClock()))
	var order []int
	var rm2 func()
	b.OnConsumerEvent(func(consumer.Event) { order = append(order, 1) })
	rm2 = b.OnConsumerEvent(func(consumer.Event) { order = append(order, 2); rm2() })
	b.OnConsumerEvent(func(consumer.Event) { order = append(order, 3) })
	_, err := b.Consumers().RegisterWithoutSub(group, consumerClient())
	require.NoError(t, err)
	n := len(order)
	require.GreaterOrEqual(t, n, 3)
	assert.Equal(t, []int{1, 2, 3}, order[:3])
	_, err = b.Consumers().RegisterWithoutSub("g2", consumerClient())
	require.NoError(t, err)
	assert.NotContains(t, order[n:], 2)

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				rm := b.OnLockEvent(func(lock.Event) {})
				_, _ = b.Locks().TryLock(group, lock.Queue{Topic: topic, QueueID: w}, "c1")
				rm()
			}
		}()
	}
	wg.Wait()
}
