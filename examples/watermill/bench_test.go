package brokercore_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/stretchr/testify/require"

	wmbc "github.com/brokercore/brokercore/examples/watermill"
	"github.com/brokercore/brokercore/store"
)

// benchBrokercore runs Watermill's BenchSubscriber (one goroutine publishing
// b.N single-message Publish calls, one subscription reading and acking them)
// over a fresh data directory. BenchSubscriber never closes what it gets, so
// the constructor registers the Close calls.
func benchBrokercore(b *testing.B, cfg wmbc.Config) {
	b.ReportAllocs()
	defer reportRate(b)
	tests.BenchSubscriber(b, func(n int) (message.Publisher, message.Subscriber) {
		cfg.Dir = b.TempDir()
		pub, sub, err := wmbc.NewPubSub(cfg)
		require.NoError(b, err)
		b.Cleanup(func() {
			require.NoError(b, pub.Close())
			require.NoError(b, sub.Close())
		})
		return pub, sub
	})
}

// BenchmarkSubscriber is brokercore with its default durability: every
// Publish returns after its fsync (store.SyncGroup; the benchmark publishes
// from one goroutine, so nothing shares an fsync).
func BenchmarkSubscriber(b *testing.B) {
	benchBrokercore(b, wmbc.Config{})
}

// BenchmarkSubscriberSyncNone is brokercore without per-Publish fsync
// (store.SyncNone): the cost of the log, pop and the adapter alone.
func BenchmarkSubscriberSyncNone(b *testing.B) {
	benchBrokercore(b, wmbc.Config{StoreOptions: store.Options{Sync: store.SyncNone}})
}

// BenchmarkSubscriberFIFO is BenchmarkSubscriberSyncNone in FIFO mode.
func BenchmarkSubscriberFIFO(b *testing.B) {
	benchBrokercore(b, wmbc.Config{FIFO: true, StoreOptions: store.Options{Sync: store.SyncNone}})
}

// BenchmarkSubscriberGoChannel is the same benchmark on Watermill's in-memory
// gochannel Pub/Sub (as in gochannel's own BenchmarkSubscriber): the
// reference for what the Watermill plumbing alone costs.
func BenchmarkSubscriberGoChannel(b *testing.B) {
	b.ReportAllocs()
	defer reportRate(b)
	tests.BenchSubscriber(b, func(n int) (message.Publisher, message.Subscriber) {
		ps := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: int64(n)}, watermill.NopLogger{})
		b.Cleanup(func() { require.NoError(b, ps.Close()) })
		return ps, ps
	})
}

// reportRate adds msgs/s: messages published and consumed end to end per
// second of the timed part.
func reportRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "msgs/s")
	}
}
