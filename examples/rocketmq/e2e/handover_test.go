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
	"github.com/brokercore/brokercore/lock"
	"github.com/stretchr/testify/require"
)

type handover struct {
	t           *testing.T
	b           *rmqtest.Broker
	topic       string
	group       string
	mu          sync.Mutex
	firstB      map[int]time.Time // queue -> first delivery to the in-process member
	stopSending chan struct{}
}

func startHandover(t *testing.T, lease time.Duration) *handover {
	b := rmqtest.StartConfig(t, server.Config{LockMaxLiveTime: lease})
	h := &handover{t: t, b: b, topic: "ho-topic", group: "g-ho", firstB: map[int]time.Time{}, stopSending: make(chan struct{})}
	p := newProducer(t, b.NameSrv)
	for i := 0; i < 8; i++ { // the topic and its 4 queues exist
		sendSync(t, p, primitive.NewMessage(h.topic, []byte("seed")))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-h.stopSending:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, _ = p.SendSync(ctx, primitive.NewMessage(h.topic, []byte(fmt.Sprint(i))))
			cancel()
		}
	}()
	t.Cleanup(func() { close(h.stopSending); wg.Wait() })
	return h
}

// holders returns the lease of every queue of the topic.
func (h *handover) holders() map[int]lock.Lease {
	out := map[int]lock.Lease{}
	for q := 0; q < 4; q++ {
		if l, ok := h.b.Server.Core().Locks().Holder(h.group, lock.Queue{Topic: h.topic, Broker: "broker-a", QueueID: q}); ok {
			out[q] = l
		}
	}
	return out
}

func (h *handover) startChildA() (*child, string) {
	inst := instance(h.t, "A")
	a := startChild(h.t, "orderly", "E2E_NS="+h.b.NameSrv, "E2E_GROUP="+h.group, "E2E_TOPIC="+h.topic, "E2E_INSTANCE="+inst)
	require.Eventually(h.t, func() bool {
		hs := h.holders()
		if len(hs) < 4 {
			return false
		}
		for _, l := range hs {
			if !hasSuffix(l.ClientID, inst) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "member A holds all four queues")
	return a, inst
}

func (h *handover) startB() {
	c := newPushConsumer(h.t, h.b.NameSrv, h.group, consumer.WithConsumerOrder(true))
	require.NoError(h.t, c.Subscribe(h.topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		h.mu.Lock()
		for _, m := range msgs {
			if _, ok := h.firstB[m.Queue.QueueId]; !ok {
				h.firstB[m.Queue.QueueId] = time.Now()
			}
		}
		h.mu.Unlock()
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(h.t, c.Start())
	h.t.Cleanup(func() { _ = c.Shutdown() })
	require.Eventually(h.t, func() bool { return len(h.b.Server.Core().Consumers().Clients(h.group)) == 2 }, 10*time.Second, 20*time.Millisecond)
}

func (h *handover) first(q int) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.firstB[q]
	return at, ok
}

// Killing one orderly member's process without shutdown hands its queues
// to the other only after the lock's max live time.
func TestOrderlyMemberKilledHandsOverAfterLockExpiry(t *testing.T) {
	t.Parallel()
	h := startHandover(t, 6*time.Second)
	a, inst := h.startChildA()
	h.startB()
	a.kill()
	killedAt := time.Now()
	held := map[int]lock.Lease{}
	for q, l := range h.holders() {
		if hasSuffix(l.ClientID, inst) {
			held[q] = l
		}
	}
	require.NotEmpty(t, held, "A held queues when it was killed")
	for q, l := range held {
		// The lease, then the client's 20 s rebalance ticker and its pull
		// backoff: a minute leaves a loaded machine room.
		require.Eventually(t, func() bool { _, ok := h.first(q); return ok }, 60*time.Second, 50*time.Millisecond,
			"queue %d handed over", q)
		at, _ := h.first(q)
		require.False(t, at.Before(l.Expires), "queue %d: consumed by B at %v, before A's lease expired at %v", q, at, l.Expires)
		t.Logf("queue %d: lease expired %v after the kill, B consumed %v after the kill", q, l.Expires.Sub(killedAt), at.Sub(killedAt))
	}
}

// A graceful shutdown unlocks the member's queues: the other member takes
// them at once, long before the 60 s lease would expire.
func TestOrderlyMemberGracefulShutdownHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	h := startHandover(t, 60*time.Second)
	a, _ := h.startChildA()
	h.startB()
	leases := h.holders()
	a.stop(t)
	stoppedAt := time.Now()
	for q := 0; q < 4; q++ {
		require.Eventually(t, func() bool { _, ok := h.first(q); return ok }, 25*time.Second, 50*time.Millisecond,
			"queue %d handed over", q)
		at, _ := h.first(q)
		require.True(t, at.Before(leases[q].Expires), "queue %d taken before A's lease would have expired", q)
		t.Logf("queue %d: B consumed %v after A's shutdown", q, at.Sub(stoppedAt))
	}
}
