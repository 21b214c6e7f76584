package grpcapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

// TestStockProducerOfSeveralTopicsAppliesTheBackoffWithoutARace: the stock
// v5.1.4 producer writes the answered backoff policy into the struct its
// settings syncs marshal; a producer of several topics syncs once per
// topic at Start and again a second later. Run with -race: the answer
// must come after those syncs, and sends must work with the policy.
func TestStockProducerOfSeveralTopicsAppliesTheBackoffWithoutARace(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	topics := []string{"backoff-a", "backoff-b", "backoff-c"}
	p := newProducer(t, b.endpoint, topics...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for round := range 3 {
		for _, topic := range topics {
			_, err := p.Send(ctx, textMessage(topic, "x"))
			require.NoError(t, err, "round %d topic %s", round, topic)
		}
		time.Sleep(700 * time.Millisecond) // across the client's 1 s re-sync
	}
	for _, topic := range topics {
		require.EqualValues(t, 3, maxOffsets(b, topic))
	}
}

func maxOffsets(b *broker, topic string) int64 {
	var n int64
	for _, q := range b.Store().Queues(topic) {
		n += b.Store().MaxOffset(topic, q)
	}
	return n
}
