//go:build !race

package e2e

import (
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

// A producer sends 10k messages to a 4-queue topic and a concurrent push
// consumer group of two members receives every one of them; under
// flush=async the broker serves the sends inline on the connection's read
// loop.
func TestPushGroupOfTwoReceivesEveryMessage(t *testing.T) {
	for _, flush := range []string{"sync", "async"} {
		t.Run("flush="+flush, func(t *testing.T) { testPushGroupOfTwo(t, flush) })
	}
}

func testPushGroupOfTwo(t *testing.T, flush string) {
	b := rmqtest.StartConfig(t, server.Config{Flush: flush})
	const topic, group = "orders", "g-push"
	n := 10000
	p := newProducer(t, b.NameSrv)
	got := newSeen()
	members := make([]map[int]bool, 2)
	var mu sync.Mutex
	for i := range members {
		members[i] = map[int]bool{}
		c := newPushConsumer(t, b.NameSrv, group)
		i := i
		require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				got.add(m.GetKeys())
				mu.Lock()
				members[i][m.Queue.QueueId] = true
				mu.Unlock()
			}
			return consumer.ConsumeSuccess, nil
		}))
		require.NoError(t, c.Start())
		t.Cleanup(func() { _ = c.Shutdown() })
	}
	// 16 senders.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				m := primitive.NewMessage(topic, []byte(fmt.Sprintf("body-%d", i)))
				m.WithKeys([]string{fmt.Sprintf("k%05d", i)})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r, err := p.SendSync(ctx, m)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				if r.Status != primitive.SendOK {
					errs <- fmt.Errorf("status %v", r.Status)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n4, ok := b.Server.Topics().Queues(topic)
	require.True(t, ok)
	require.Equal(t, 4, n4)
	got.waitUnique(t, n, 90*time.Second)
	require.Equal(t, n, got.unique())
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, members[0], "member 0 got no queue")
	require.NotEmpty(t, members[1], "member 1 got no queue")
}
