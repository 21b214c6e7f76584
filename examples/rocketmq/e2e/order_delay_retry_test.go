//go:build !race

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/stretchr/testify/require"
)

// An orderly push consumer receives each queue in order.
func TestOrderlyConsumerReceivesEachQueueInOrder(t *testing.T) {
	t.Parallel()
	b := rmqtest.Start(t)
	const topic, n = "ordered", 2000
	p := newProducer(t, b.NameSrv)
	sent := map[int][]int64{} // queue -> offsets in send order
	for i := 0; i < n; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprint(i)))
		m.WithKeys([]string{fmt.Sprint(i)})
		r := sendSync(t, p, m)
		sent[r.MessageQueue.QueueId] = append(sent[r.MessageQueue.QueueId], r.QueueOffset)
	}
	require.Len(t, sent, 4)
	var mu sync.Mutex
	got := map[int][]int64{}
	all := newSeen()
	c := newPushConsumer(t, b.NameSrv, "g-orderly", consumer.WithConsumerOrder(true))
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		for _, m := range msgs {
			got[m.Queue.QueueId] = append(got[m.Queue.QueueId], m.QueueOffset)
		}
		mu.Unlock()
		for _, m := range msgs {
			all.add(m.GetKeys())
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
	all.waitUnique(t, n, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	for q, offs := range sent {
		require.Equal(t, offs, got[q], "queue %d in order, each once", q)
	}
}

// A delay-level-2 message (5 s) arrives after 5 s and not before. Real time
// here: the official client and the scheduler run on the wall clock.
func TestDelayLevelTwoArrivesAfterFiveSeconds(t *testing.T) {
	t.Parallel()
	b := rmqtest.Start(t)
	const topic = "delayed"
	p := newProducer(t, b.NameSrv)
	arrived := make(chan time.Time, 4)
	c := newPushConsumer(t, b.NameSrv, "g-delay")
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			if string(m.Body) == "later" {
				arrived <- time.Now()
			}
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
	sendSync(t, p, primitive.NewMessage(topic, []byte("warm-up"))) // the consumer is pulling
	time.Sleep(2 * time.Second)
	m := primitive.NewMessage(topic, []byte("later"))
	m.WithDelayTimeLevel(2)
	start := time.Now()
	sendSync(t, p, m)
	select {
	case at := <-arrived:
		require.GreaterOrEqual(t, at.Sub(start), 5*time.Second, "not before the level's delay")
		require.Less(t, at.Sub(start), 15*time.Second, "woken by the delivery, not by the end of a 20 s long poll")
	case <-time.After(20 * time.Second):
		t.Fatal("delayed message never arrived")
	}
}

func fastLevels() string { return strings.TrimSpace(strings.Repeat("1s ", 18)) }

// A consumer that answers "retry later" gets the message again, from the
// retry topic, with one more reconsume time.
func TestRetryLaterRedeliversFromRetryTopic(t *testing.T) {
	t.Parallel()
	b := rmqtest.StartConfig(t, server.Config{DelayLevels: fastLevels()})
	const topic, group = "flaky", "g-retry"
	p := newProducer(t, b.NameSrv)
	type delivery struct {
		id, topic, body string
		times           int32
	}
	deliveries := make(chan delivery, 16)
	c := newPushConsumer(t, b.NameSrv, group)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		m := msgs[0]
		deliveries <- delivery{m.MsgId, m.Topic, string(m.Body), m.ReconsumeTimes}
		if m.ReconsumeTimes == 0 {
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
	r := sendSync(t, p, primitive.NewMessage(topic, []byte("again")))
	first := <-deliveries
	require.Equal(t, delivery{r.MsgID, topic, "again", 0}, first)
	select {
	case second := <-deliveries:
		require.Equal(t, delivery{r.MsgID, topic, "again", 1}, second)
	case <-time.After(40 * time.Second):
		t.Fatal("no redelivery")
	}
	require.Equal(t, int64(1), b.Server.Core().Store().MaxOffset("%RETRY%"+group, 0), "it came through the retry topic")
	require.Equal(t, uint64(1), b.Server.Broker().Stats().SentBack)
}
