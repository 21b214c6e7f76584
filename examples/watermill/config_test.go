package brokercore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	wmbc "github.com/brokercore/brokercore/examples/watermill"
	"github.com/brokercore/brokercore/store"
)

// TestUnusableConfigIsRejectedWithoutOpeningAnything rules out constructors
// that guess (or panic) on a config they cannot honour.
func TestUnusableConfigIsRejectedWithoutOpeningAnything(t *testing.T) {
	b := fakeClockBackend(t, newClock())
	dir := t.TempDir()
	cases := map[string]wmbc.Config{
		"neither Dir nor Store": {},
		"both Dir and Store":    {Dir: dir, Store: b.Store, Pop: b.Pop},
		"Pop without Store":     {Dir: dir, Pop: b.Pop},
		"negative queues":       {Store: b.Store, Pop: b.Pop, QueuesPerTopic: -1},
		"batch over the max":    {Store: b.Store, Pop: b.Pop, BatchSize: wmbc.MaxBatchSize + 1},
		"negative batch":        {Store: b.Store, Pop: b.Pop, BatchSize: -1},
		"negative invisible":    {Store: b.Store, Pop: b.Pop, InvisibleTime: -time.Second},
		"negative poll":         {Store: b.Store, Pop: b.Pop, PollTime: -time.Second},
		"negative nack delay":   {Store: b.Store, Pop: b.Pop, NackDelay: -time.Second},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := wmbc.NewPublisher(cfg)
			assert.ErrorIs(t, err, wmbc.ErrInvalidConfig)
			_, err = wmbc.NewSubscriber(cfg)
			assert.ErrorIs(t, err, wmbc.ErrInvalidConfig)
			_, _, err = wmbc.NewPubSub(cfg)
			assert.ErrorIs(t, err, wmbc.ErrInvalidConfig)
		})
	}
	t.Run("Subscriber over Store without Pop", func(t *testing.T) {
		_, err := wmbc.NewSubscriber(wmbc.Config{Store: b.Store})
		assert.ErrorIs(t, err, wmbc.ErrInvalidConfig)
		p, err := wmbc.NewPublisher(wmbc.Config{Store: b.Store})
		require.NoError(t, err, "a Publisher needs only the store")
		require.NoError(t, p.Close())
	})
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a rejected config opened nothing in Dir")
}

// TestBadCallsFailCleanly rules out panics and silent no-ops on empty topics
// and on use after Close.
func TestBadCallsFailCleanly(t *testing.T) {
	b := fakeClockBackend(t, newClock())
	cfg := wmbc.Config{Store: b.Store, Pop: b.Pop, ConsumerGroup: "g"}
	pub, sub, err := wmbc.NewPubSub(cfg)
	require.NoError(t, err)

	assert.ErrorIs(t, pub.Publish("", message.NewMessage("id", nil)), wmbc.ErrInvalidTopic)
	_, err = sub.Subscribe(context.Background(), "")
	assert.ErrorIs(t, err, wmbc.ErrInvalidTopic)
	assert.NoError(t, pub.Publish("t"), "publishing nothing is a no-op")

	require.NoError(t, pub.Close())
	require.NoError(t, pub.Close(), "Close is idempotent")
	require.NoError(t, sub.Close())
	require.NoError(t, sub.Close(), "Close is idempotent")
	assert.ErrorIs(t, pub.Publish("t", message.NewMessage("id", nil)), wmbc.ErrPublisherClosed)
	_, err = sub.Subscribe(context.Background(), "t")
	assert.ErrorIs(t, err, wmbc.ErrSubscriberClosed)
	assert.Equal(t, int64(0), b.Store.MaxOffset("t", 0))
}

// TestPublishIsOneAtomicBatch rules out a Publish call that appends part of
// its messages: one message over the store's size limit fails the whole
// call and nothing of it is in the log.
func TestPublishIsOneAtomicBatch(t *testing.T) {
	b := openBackend(t, store.Options{MaxMessageSize: 16}, suitePopOptions)
	pub := newPublisher(t, wmbc.Config{Store: b.Store})
	err := pub.Publish("t",
		message.NewMessage("small", []byte("ok")),
		message.NewMessage("big", []byte("this body is over sixteen bytes")),
		message.NewMessage("small-2", []byte("ok")))
	require.Error(t, err)
	assert.Equal(t, int64(0), b.Store.MaxOffset("t", 0), "no part of the failed batch was appended")

	publish(t, pub, "t", "a", "b")
	assert.Equal(t, int64(2), b.Store.MaxOffset("t", 0))
}
