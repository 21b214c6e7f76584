//go:build !race

package replicated

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/brokercore/brokercore/lock"
	"github.com/stretchr/testify/require"
)

// The unchanged v2 orderly push consumer across a leadership transfer
// (BROKERCORE_LONG=1: the client's routes follow the new leader only at
// their 30 s refresh). Until then its locks go to the old leader, now a
// follower, which grants none; then it locks at the new leader and goes
// on: every message is consumed, each queue in order, and the old leader
// renewed none of its leases meanwhile.
func TestV2OrderlyConsumerLocksAtTheLeaderAcrossALeaderChange(t *testing.T) {
	if os.Getenv("BROKERCORE_LONG") != "1" {
		t.Skip("BROKERCORE_LONG=1 runs it (about a minute); TestOnlyTheLeaderGrantsQueueLocks is the short one")
	}
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	ns := c.nameServers()
	const topic, group = "v2-ordered", "v2-ordered-g"
	p := newV2Producer(t, ns)

	var mu sync.Mutex
	seen := map[string]bool{}
	order := map[int][]int64{} // queue -> first deliveries' offsets
	pc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithGroupName(group),
		consumer.WithInstance(t.Name()), consumer.WithConsumerOrder(true), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if !seen[m.GetKeys()] {
				seen[m.GetKeys()] = true
				order[m.Queue.QueueId] = append(order[m.Queue.QueueId], m.QueueOffset)
			}
		}
		return consumer.ConsumeSuccess, nil
	}))
	var keys []string
	sendN := func(prefix string, n int) {
		for i := range n {
			k := fmt.Sprintf("%s-%03d", prefix, i)
			keys = append(keys, k)
			require.NoError(t, send(p, topic, k, time.Now().Add(30*time.Second)))
		}
	}
	sendN("before", 20)
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.Shutdown() })
	waitSeen := func(timeout time.Duration) {
		t.Helper()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) == len(keys)
		}, timeout, 50*time.Millisecond, "every message consumed")
	}
	waitSeen(60 * time.Second)

	require.NoError(t, c.nodes[l].Node().Raft().LeadershipTransfer().Error())
	l2 := c.leader(30 * time.Second)
	require.NotEqual(t, l, l2)
	granted := func() uint64 { st := c.nodes[l].core.locks.Stats(); return st.Locked + st.Renewed + st.TakenOver }
	before := granted()
	sendN("during", 10)
	require.Eventually(t, func() bool {
		for q := range DefaultQueueNums {
			if _, ok := c.nodes[l2].core.locks.Holder(group, lock.Queue{Topic: topic, Broker: "broker-a", QueueID: q}); !ok {
				return false
			}
		}
		return true
	}, 90*time.Second, 100*time.Millisecond, "the consumer locks its queues at the new leader")
	require.Equal(t, before, granted(), "the old leader, a follower now, granted or renewed no lock")
	sendN("after", 10)
	waitSeen(60 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	for q, offs := range order {
		for i := 1; i < len(offs); i++ {
			require.Less(t, offs[i-1], offs[i], "queue %d consumed out of order: %v", q, offs)
		}
	}
}
