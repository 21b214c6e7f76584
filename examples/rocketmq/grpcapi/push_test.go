package grpcapi_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

func newPushConsumer(t testing.TB, endpoint, group, topic string, consume func(*rmq.MessageView) rmq.ConsumerResult) rmq.PushConsumer {
	t.Helper()
	c, err := rmq.NewPushConsumer(config(endpoint, group),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: consume}),
		rmq.WithPushConsumptionThreadCount(8))
	require.NoError(t, err)
	require.NoError(t, startWithin(t, c.Start))
	t.Cleanup(func() { _ = c.GracefulStop() })
	return c
}

// fastRetries are server options under which a poison message reaches the
// dead-letter topic in seconds: 4 attempts, backoff 200 ms ×2 up to 1 s.
func fastRetries() grpcapi.Options {
	return grpcapi.Options{MaxAttempts: 4, BackoffInitial: 200 * time.Millisecond, BackoffMax: time.Second, BackoffMultiplier: 2}
}

// TestPushConsumerConcurrentReceivesEverything: a stock push consumer gets
// every message once (all acked, none redelivered).
func TestPushConsumerConcurrentReceivesEverything(t *testing.T) {
	t.Parallel()
	const n = 300
	b := startBroker(t, grpcapi.Options{})
	topic := "push-conc"
	p := newProducer(t, b.endpoint, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		_, err := p.Send(ctx, textMessage(topic, fmt.Sprint(i)))
		require.NoError(t, err)
	}
	seen := newSeenSet()
	done := make(chan struct{})
	var once sync.Once
	newPushConsumer(t, b.endpoint, "push-conc-g", topic, func(mv *rmq.MessageView) rmq.ConsumerResult {
		if seen.add(mv.GetMessageId()) == 1 && seen.len() == n {
			once.Do(func() { close(done) })
		}
		return rmq.SUCCESS
	})
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("received %d of %d", seen.len(), n)
	}
	time.Sleep(500 * time.Millisecond) // a duplicate would show up now
	require.Empty(t, seen.dups())
}

// TestPushConsumerFIFOInOrderPerGroup: a FIFO push consumer group ("-fifo")
// gets every message group's messages in send order.
func TestPushConsumerFIFOInOrderPerGroup(t *testing.T) {
	t.Parallel()
	const groups, per = 3, 50
	b := startBroker(t, grpcapi.Options{})
	topic := "push-fifo"
	p := newProducer(t, b.endpoint, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := range per {
		for g := range groups {
			m := textMessage(topic, strconv.Itoa(i))
			m.SetMessageGroup(fmt.Sprintf("mg-%d", g))
			_, err := p.Send(ctx, m)
			require.NoError(t, err)
		}
	}
	var mu sync.Mutex
	got := map[string][]int{}
	done := make(chan struct{})
	total := 0
	newPushConsumer(t, b.endpoint, "push-g-fifo", topic, func(mv *rmq.MessageView) rmq.ConsumerResult {
		i, _ := strconv.Atoi(string(mv.GetBody()))
		mu.Lock()
		defer mu.Unlock()
		g := *mv.GetMessageGroup()
		got[g] = append(got[g], i)
		total++
		if total == groups*per {
			close(done)
		}
		return rmq.SUCCESS
	})
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("received %d of %d", total, groups*per)
	}
	mu.Lock()
	defer mu.Unlock()
	for g, seq := range got {
		for i, v := range seq {
			require.Equal(t, i, v, "group %s out of order: %v", g, seq)
		}
	}
}

// TestPushConsumerRetriesWithBackoffThenDeadLetters: a standard push
// consumer whose listener always fails gets the message again after the
// backoff with a higher attempt, exactly max-attempts times, and then the
// server moves it to %DLQ%<group>.
func TestPushConsumerRetriesWithBackoffThenDeadLetters(t *testing.T) {
	t.Parallel()
	opts := fastRetries()
	b := startBroker(t, opts)
	topic, group := "push-poison", "push-poison-g"
	p := newProducer(t, b.endpoint, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := p.Send(ctx, textMessage(topic, "poison"))
	require.NoError(t, err)
	var mu sync.Mutex
	var attempts []int32
	var times []time.Time
	newPushConsumer(t, b.endpoint, group, topic, func(mv *rmq.MessageView) rmq.ConsumerResult {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, mv.GetDeliveryAttempt())
		times = append(times, time.Now())
		return rmq.FAILURE
	})
	dlq := waitDeadLetter(t, ctx, b, group, r[0].MessageID)
	require.Equal(t, topic, dlq.Properties[brokercore.PropDLQOriginTopic])
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int32{1, 2, 3, 4}, attempts)
	for i := 1; i < len(times); i++ {
		// The nack asks for backoff(attempt); pop's minimum invisible time
		// is 1 s, so the gap is at least the larger of the two.
		require.GreaterOrEqual(t, times[i].Sub(times[i-1]), 900*time.Millisecond, "retry %d came early", i)
	}
}

// TestPushConsumerFIFOForwardsToDeadLetterAfterMaxAttempts: a FIFO push
// consumer retries locally (the server keeps the message invisible) and
// forwards it to the DLQ at max attempts; the group then flows again.
func TestPushConsumerFIFOForwardsToDeadLetterAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	opts := fastRetries()
	b := startBroker(t, opts)
	topic, group := "push-fifo-poison", "pfp-fifo"
	p := newProducer(t, b.endpoint, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ids []string
	for i := range 2 {
		m := textMessage(topic, strconv.Itoa(i))
		m.SetMessageGroup("one")
		r, err := p.Send(ctx, m)
		require.NoError(t, err)
		ids = append(ids, r[0].MessageID)
	}
	var mu sync.Mutex
	var attempts []int32
	next := make(chan time.Time, 1)
	newPushConsumer(t, b.endpoint, group, topic, func(mv *rmq.MessageView) rmq.ConsumerResult {
		mu.Lock()
		defer mu.Unlock()
		if mv.GetMessageId() == ids[0] {
			attempts = append(attempts, mv.GetDeliveryAttempt())
			return rmq.FAILURE
		}
		select {
		case next <- time.Now():
		default:
		}
		return rmq.SUCCESS
	})
	dlq := waitDeadLetter(t, ctx, b, group, ids[0])
	require.Equal(t, "0", string(dlq.Body))
	select {
	case <-next:
	case <-ctx.Done():
		t.Fatal("the group's next message never came after the forward")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int32{1, 2, 3, 4}, attempts)
}
