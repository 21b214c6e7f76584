//go:build !race

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitCommitted waits until the group committed every queue of topic up to
// its max offset.
func waitCommitted(t *testing.T, b *rmqtest.Broker, group, topic string, timeout time.Duration) {
	t.Helper()
	n, _ := b.Server.Topics().Queues(topic)
	require.Eventually(t, func() bool {
		for q := 0; q < n; q++ {
			off, ok := b.Server.Core().Offsets().Committed(group, topic, q)
			if max := b.Server.Core().Store().MaxOffset(topic, q); max > 0 && (!ok || off < max) {
				return false
			}
		}
		return true
	}, timeout, 100*time.Millisecond)
}

// An admin reset by time is honoured by a running consumer, and no stale
// commit of the consumer overwrites it.
func TestAdminResetByTimeIsHonouredByRunningConsumer(t *testing.T) {
	t.Parallel()
	b := rmqtest.Start(t)
	const topic, group = "resettable", "g-reset"
	p := newProducer(t, b.NameSrv)
	var mu sync.Mutex
	count := map[string]int{}
	all := newSeen()
	c := newPushConsumer(t, b.NameSrv, group)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		for _, m := range msgs {
			count[m.GetKeys()]++
		}
		mu.Unlock()
		for _, m := range msgs {
			all.add(m.GetKeys())
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
	send := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			m := primitive.NewMessage(topic, []byte(prefix))
			m.WithKeys([]string{fmt.Sprintf("%s-%d", prefix, i)})
			sendSync(t, p, m)
		}
	}
	send("old", 40)
	all.waitUnique(t, 40, 30*time.Second)
	time.Sleep(50 * time.Millisecond)
	cut := time.Now()
	time.Sleep(50 * time.Millisecond)
	send("new", 20)
	all.waitUnique(t, 60, 30*time.Second)
	waitCommitted(t, b, group, topic, 20*time.Second)

	resp, err := http.Post(fmt.Sprintf("http://%s/admin/reset?group=%s&topic=%s&timestamp=%d", b.Metrics, group, topic, cut.UnixMilli()), "", nil)
	require.NoError(t, err)
	var out struct {
		Queues []struct {
			Queue  int   `json:"queue"`
			Offset int64 `json:"offset"`
		} `json:"queues"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, out.Queues, 4)

	// Every "new" message comes again, no "old" one does.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := 0; i < 20; i++ {
			if count[fmt.Sprintf("new-%d", i)] < 2 {
				return false
			}
		}
		return true
	}, 60*time.Second, 200*time.Millisecond, "the running consumer honours the reset")
	mu.Lock()
	for i := 0; i < 40; i++ {
		require.Equal(t, 1, count[fmt.Sprintf("old-%d", i)], "old-%d before the reset time is not redelivered", i)
	}
	mu.Unlock()
	require.NotZero(t, b.Server.Broker().Stats().StaleCommits, "the consumer's old position was refused")
	require.NotZero(t, b.Server.Core().Offsets().Stats().StaleEpochRejected)
}

func pollAll(t *testing.T, c rocketmq.PullConsumer, until func() bool, ack func(*primitive.MessageExt)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !until() {
		require.True(t, time.Now().Before(deadline), "poll timed out")
		cr, err := c.Poll(context.Background(), time.Second)
		if errors.Is(err, consumer.ErrNoNewMsg) {
			continue
		}
		require.NoError(t, err)
		for _, m := range cr.GetMsgList() {
			ack(m)
		}
		c.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
}

func newPullConsumer(t *testing.T, ns, group, topic string) rocketmq.PullConsumer {
	t.Helper()
	c, err := rocketmq.NewPullConsumer(consumer.WithNameServer([]string{ns}), consumer.WithGroupName(group),
		consumer.WithInstance(instance(t, "pull")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}))
	require.NoError(t, c.Start())
	return c
}

// A pull consumer commits and resumes from its offsets after the broker
// restarts.
func TestPullConsumerResumesFromCommittedOffsetsAfterRestart(t *testing.T) {
	t.Parallel()
	b := rmqtest.Start(t)
	const topic, group, n = "pulled", "g-pull", 200
	p := newProducer(t, b.NameSrv)
	for i := 0; i < n; i++ {
		m := primitive.NewMessage(topic, []byte("x"))
		m.WithKeys([]string{fmt.Sprint(i)})
		sendSync(t, p, m)
	}
	first := map[string]bool{}
	c1 := newPullConsumer(t, b.NameSrv, group, topic)
	pollAll(t, c1, func() bool { return len(first) >= n/2 }, func(m *primitive.MessageExt) { first[m.GetKeys()] = true })
	require.NoError(t, c1.PersistOffset(context.Background(), topic))
	require.NoError(t, c1.Shutdown())
	// UPDATE_CONSUMER_OFFSET is oneway: wait for it to land.
	committed := func() int64 {
		sum := int64(0)
		for q := 0; q < 4; q++ {
			off, _ := b.Server.Core().Offsets().Committed(group, topic, q)
			sum += off
		}
		return sum
	}
	assert.Eventually(t, func() bool { return committed() == int64(len(first)) }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, int64(len(first)), committed(), "every acked message committed, nothing else")

	require.NoError(t, b.Restart())

	second := map[string]bool{}
	c2 := newPullConsumer(t, b.NameSrv, group, topic)
	t.Cleanup(func() { _ = c2.Shutdown() })
	pollAll(t, c2, func() bool { return len(first)+len(second) >= n }, func(m *primitive.MessageExt) {
		require.False(t, first[m.GetKeys()], "message %s was committed before the restart", m.GetKeys())
		second[m.GetKeys()] = true
	})
	require.Len(t, second, n-len(first))
}
