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
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"
)

// A kill -9 loop of the broker under the official producer and consumer:
// no acknowledged send is lost. Short by default; BROKERCORE_LONG=1 runs 20
// kills.
func TestKill9LoopLosesNoAcknowledgedSend(t *testing.T) {
	t.Parallel()
	kills := 2
	if long() {
		kills = 20
	}
	dir, ns, br := t.TempDir(), freeAddr(t), freeAddr(t)
	env := []string{"E2E_DIR=" + dir, "E2E_NS=" + ns, "E2E_BR=" + br}
	broker := startChild(t, "broker", env...)

	const topic, group = "survivor", "g-kill9"
	p := newProducer(t, ns, producer.WithSendMsgTimeout(2*time.Second))
	var mu sync.Mutex
	acked := map[string]bool{}
	got := newSeen()
	c := newPushConsumer(t, ns, group)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got.add(m.GetKeys())
		}
		return consumer.ConsumeSuccess, nil
	}))
	sendSync(t, p, primitive.NewMessage(topic, []byte("first"))) // the topic exists before the consumer starts
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				m := primitive.NewMessage(topic, []byte(key))
				m.WithKeys([]string{key})
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				r, err := p.SendSync(ctx, m)
				cancel()
				if err == nil && r.Status == primitive.SendOK {
					mu.Lock()
					acked[key] = true
					mu.Unlock()
				} else {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}(w)
	}
	for k := 0; k < kills; k++ {
		time.Sleep(1500 * time.Millisecond)
		broker.kill()
		broker = startChild(t, "broker", env...)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	require.NotZero(t, n)
	deadline := time.Now().Add(90 * time.Second)
	for {
		missing := 0
		mu.Lock()
		got.mu.Lock()
		for k := range acked {
			if got.m[k] == 0 {
				missing++
			}
		}
		got.mu.Unlock()
		mu.Unlock()
		if missing == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d acknowledged sends never consumed after %d kills", missing, n, kills)
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d acknowledged sends across %d kill -9s, every one consumed", n, kills)
	broker.stop(t)
}
