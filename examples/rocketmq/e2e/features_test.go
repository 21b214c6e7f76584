//go:build !race

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/stretchr/testify/require"
)

// Without auto-creation on route lookups the producer goes through TBW102
// and the broker creates the topic on its first send; batches, bodies the
// client compresses (≥ 4 KiB) and tag filters from the heartbeat work.
func TestTBW102BatchCompressionAndTagFilter(t *testing.T) {
	t.Parallel()
	b := rmqtest.StartConfig(t, server.Config{NoAutoCreate: true})
	const topic = "made-by-send"
	p := newProducer(t, b.NameSrv)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB: compressed by the client
	sendSync(t, p, primitive.NewMessage(topic, big).WithTag("a"))
	var stored bool
	for q := 0; q < 4; q++ {
		ms, err := b.Server.Core().Store().Read(topic, q, 0, 10)
		require.NoError(t, err)
		for _, m := range ms {
			stored = stored || (m.Properties["__rmq.sysflag"] == "1" && len(m.Body) < len(big))
		}
	}
	require.True(t, stored, "stored as sent: compressed, with its sysFlag")
	n, ok := b.Server.Topics().Queues(topic)
	require.True(t, ok, "created by the first send")
	require.Equal(t, 4, n)

	var batch []*primitive.Message
	for i := 0; i < 10; i++ {
		tag := []string{"a", "b", "c"}[i%3]
		batch = append(batch, primitive.NewMessage(topic, []byte(fmt.Sprint("batch-", i))).WithTag(tag))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	r, err := p.SendSync(ctx, batch...)
	cancel()
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, r.Status)

	var mu sync.Mutex
	var bodies [][]byte
	var tags []string
	c := newPushConsumer(t, b.NameSrv, "g-features")
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "a || b"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			for _, m := range msgs {
				bodies = append(bodies, m.Body)
				tags = append(tags, m.GetTags())
			}
			mu.Unlock()
			return consumer.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
	want := 1 + 4 + 3 // the big one, batch tags a (0,3,6,9) and b (1,4,7)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(bodies) >= want }, 30*time.Second, 50*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, want, "tag c filtered out")
	var sawBig bool
	for i, body := range bodies {
		require.Contains(t, []string{"a", "b"}, tags[i])
		if bytes.Equal(body, big) {
			sawBig = true
		}
	}
	require.True(t, sawBig, "the compressed body comes back whole")
}
