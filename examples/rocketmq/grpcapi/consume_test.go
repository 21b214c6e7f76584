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

func sendN(t testing.TB, ctx context.Context, p rmq.Producer, topic string, n int, edit func(int, *rmq.Message)) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := range n {
		m := textMessage(topic, strconv.Itoa(i))
		if edit != nil {
			edit(i, m)
		}
		r, err := p.Send(ctx, m)
		require.NoError(t, err)
		require.Len(t, r, 1)
		ids = append(ids, r[0].MessageID)
	}
	return ids
}

// TestTwoSimpleConsumersShareATopicWithNoMessageHeldByBoth: two members of
// one group receive concurrently; while a message is invisible only one of
// them holds it, and together they get everything once.
func TestTwoSimpleConsumersShareATopicWithNoMessageHeldByBoth(t *testing.T) {
	t.Parallel()
	const n = 400
	b := startBroker(t, grpcapi.Options{})
	topic, group := "share", "share-g"
	p := newProducer(t, b.endpoint, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sendN(t, ctx, p, topic, n, nil)
	var mu sync.Mutex
	holder := map[string]int{}
	total := 0
	var wg sync.WaitGroup
	members := []rmq.SimpleConsumer{
		newSimpleConsumer(t, b.endpoint, group, topic, time.Second, nil),
		newSimpleConsumer(t, b.endpoint, group, topic, time.Second, nil),
	}
	for who, c := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				finished := total >= n
				mu.Unlock()
				if finished {
					return
				}
				mvs, err := receive(ctx, c, 8, 30*time.Second)
				if err != nil {
					continue
				}
				for _, mv := range mvs {
					mu.Lock()
					if prev, ok := holder[mv.GetMessageId()]; ok {
						mu.Unlock()
						t.Errorf("message %s held by consumer %d and %d", mv.GetMessageId(), prev, who)
						return
					}
					holder[mv.GetMessageId()] = who
					total++
					mu.Unlock()
				}
				for _, mv := range mvs {
					_ = c.Ack(ctx, mv)
				}
				time.Sleep(5 * time.Millisecond) // let the other member in
			}
		}()
	}
	wg.Wait()
	require.Equal(t, n, total)
	per := [2]int{}
	for _, who := range holder {
		per[who]++
	}
	t.Logf("consumer 0 got %d, consumer 1 got %d", per[0], per[1])
	require.Positive(t, per[0])
	require.Positive(t, per[1])
}

// TestInvisibleTimeExpiryRedeliversWithHigherAttemptNotEarly.
func TestInvisibleTimeExpiryRedeliversWithHigherAttemptNotEarly(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	topic := "expiry"
	p := newProducer(t, b.endpoint, topic)
	c := newSimpleConsumer(t, b.endpoint, "expiry-g", topic, time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := sendN(t, ctx, p, topic, 1, nil)
	asked := time.Now() // the invisible time starts after this, however slow the answer
	first := receiveOne(t, ctx, c, 3*time.Second)
	require.Equal(t, ids[0], first.GetMessageId())
	require.EqualValues(t, 1, first.GetDeliveryAttempt())
	again := receiveOne(t, ctx, c, 3*time.Second)
	require.GreaterOrEqual(t, time.Since(asked), 2900*time.Millisecond, "redelivered before its invisible time ended")
	require.Equal(t, ids[0], again.GetMessageId())
	require.EqualValues(t, 2, again.GetDeliveryAttempt())
	require.NoError(t, c.Ack(ctx, again))
	// The first delivery's handle is stale: acking it changes nothing and
	// the acked message does not come back.
	_ = c.Ack(ctx, first)
	mvs, err := receive(ctx, c, 1, 3*time.Second)
	require.NoError(t, err)
	require.Empty(t, mvs)
}

// receiveOne receives until one message comes.
func receiveOne(t testing.TB, ctx context.Context, c rmq.SimpleConsumer, invisible time.Duration) *rmq.MessageView {
	t.Helper()
	for ctx.Err() == nil {
		mvs, err := receive(ctx, c, 1, invisible)
		require.NoError(t, err)
		if len(mvs) > 0 {
			require.Len(t, mvs, 1)
			return mvs[0]
		}
	}
	t.Fatal("no message arrived")
	return nil
}

// TestChangeInvisibleDurationShortensAndExtends: shortening brings the
// message back that much later; extending keeps it hidden past its first
// invisible time; the handle the client got back acks it.
func TestChangeInvisibleDurationShortensAndExtends(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	topic := "change"
	p := newProducer(t, b.endpoint, topic)
	c := newSimpleConsumer(t, b.endpoint, "change-g", topic, time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	sendN(t, ctx, p, topic, 1, nil)

	// Shorten: 30 s → 1 s.
	mv := receiveOne(t, ctx, c, 30*time.Second)
	changed := time.Now()
	require.NoError(t, c.ChangeInvisibleDuration(mv, time.Second))
	back := receiveOne(t, ctx, c, 2*time.Second)
	require.Less(t, time.Since(changed), 10*time.Second, "a shortened invisible time still waited the long one")
	require.GreaterOrEqual(t, time.Since(changed), 900*time.Millisecond)
	require.EqualValues(t, 2, back.GetDeliveryAttempt())

	// Extend: 2 s → 5 s; not back at 3 s, back after 5 s.
	extended := time.Now()
	require.NoError(t, c.ChangeInvisibleDuration(back, 5*time.Second))
	time.Sleep(2500 * time.Millisecond)
	mvs, err := receive(ctx, c, 1, 2*time.Second)
	require.NoError(t, err)
	var again *rmq.MessageView
	if len(mvs) > 0 { // only a slow machine gets here as late as 5 s: earlier is the extension not kept
		again = mvs[0]
	} else {
		again = receiveOne(t, ctx, c, 30*time.Second)
	}
	require.GreaterOrEqual(t, time.Since(extended), 4900*time.Millisecond,
		"an extended message came back at its first invisible time")
	require.EqualValues(t, 3, again.GetDeliveryAttempt())

	// Change then ack with the handle the client now holds.
	require.NoError(t, c.ChangeInvisibleDuration(again, 10*time.Second))
	require.NoError(t, c.Ack(ctx, again))
	require.Zero(t, waitNothing(t, ctx, c, 2*time.Second))
}

// waitNothing receives for d and returns how many messages came.
func waitNothing(t testing.TB, ctx context.Context, c rmq.SimpleConsumer, d time.Duration) int {
	t.Helper()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		mvs, err := receive(ctx, c, 32, 30*time.Second)
		require.NoError(t, err)
		n += len(mvs)
	}
	return n
}

// fifoGroups picks n message group names that go to n different queues.
func fifoGroups(t testing.TB, b *broker, topic string, n int) []string {
	var out []string
	used := map[int]bool{}
	for i := 0; len(out) < n; i++ {
		g := fmt.Sprintf("order-%d", i)
		q, err := b.srv.GroupQueue(topic, g)
		require.NoError(t, err)
		if !used[q] {
			used[q] = true
			out = append(out, g)
		}
	}
	return out
}

// TestFIFOThreeGroupsInOrderWhileOthersFlow: a FIFO simple consumer
// ("-fifo" group) gets 3 message groups × 50 in order; nothing of a group
// comes while its previous message is unacked, and the other groups keep
// flowing meanwhile.
func TestFIFOThreeGroupsInOrderWhileOthersFlow(t *testing.T) {
	t.Parallel()
	const per = 50
	b := startBroker(t, grpcapi.Options{})
	topic := "fifo3"
	groups := fifoGroups(t, b, topic, 3)
	p := newProducer(t, b.endpoint, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := range per {
		for _, g := range groups {
			m := textMessage(topic, strconv.Itoa(i))
			m.SetMessageGroup(g)
			_, err := p.Send(ctx, m)
			require.NoError(t, err)
		}
	}
	c := newSimpleConsumer(t, b.endpoint, "fifo3-g-fifo", topic, time.Second, nil)
	next := map[string]int{}
	// Phase 1: whatever arrives of groups[0] stays unacked; the others are
	// acked. A FIFO batch holds a queue's next messages in order (several
	// of one group may come together), and no later receive may bring
	// more of groups[0] while those are unacked — while the other groups
	// flow to their end.
	var held []*rmq.MessageView
	for next[groups[1]] < per || next[groups[2]] < per {
		require.NoError(t, ctx.Err())
		mvs, err := receive(ctx, c, 32, 30*time.Second)
		require.NoError(t, err)
		heldBefore := len(held)
		for _, mv := range mvs {
			g := *mv.GetMessageGroup()
			i, _ := strconv.Atoi(string(mv.GetBody()))
			require.Equal(t, next[g], i, "group %s out of order", g)
			next[g]++
			if g == groups[0] {
				require.Zero(t, heldBefore, "group %s delivered while its previous messages are unacked", g)
				held = append(held, mv)
				continue
			}
			require.NoError(t, c.Ack(ctx, mv))
		}
	}
	require.NotEmpty(t, held)
	// Phase 2: ack them; groups[0] flows to the end in order.
	for _, mv := range held {
		require.NoError(t, c.Ack(ctx, mv))
	}
	for next[groups[0]] < per {
		require.NoError(t, ctx.Err())
		mvs, err := receive(ctx, c, 32, 30*time.Second)
		require.NoError(t, err)
		for _, mv := range mvs {
			g := *mv.GetMessageGroup()
			require.Equal(t, groups[0], g)
			i, _ := strconv.Atoi(string(mv.GetBody()))
			require.Equal(t, next[g], i)
			next[g]++
			require.NoError(t, c.Ack(ctx, mv))
		}
	}
}

// TestDeliveryTimeFiveSecondsAheadArrivesAfterItAndNotBefore: a DELAY
// message goes through the scheduler's timers.
func TestDeliveryTimeFiveSecondsAheadArrivesAfterItAndNotBefore(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	topic := "delay"
	p := newProducer(t, b.endpoint, topic)
	c := newSimpleConsumer(t, b.endpoint, "delay-g", topic, 2*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at := time.Now().Add(5 * time.Second)
	m := textMessage(topic, "later")
	m.SetDelayTimestamp(at)
	r, err := p.Send(ctx, m)
	require.NoError(t, err)
	mv := receiveOne(t, ctx, c, 30*time.Second)
	arrived := time.Now()
	require.Equal(t, r[0].MessageID, mv.GetMessageId())
	require.False(t, arrived.Before(at), "delivered %v before its time", at.Sub(arrived))
	require.Less(t, arrived.Sub(at), 10*time.Second, "delivered too late") // a long poll's 30 s would be a bug
	require.NotNil(t, mv.GetDeliveryTimestamp())
	require.WithinDuration(t, at, *mv.GetDeliveryTimestamp(), time.Millisecond)
	require.NoError(t, c.Ack(ctx, mv))
}

// TestNeverAckedMessageDeliveredMaxAttemptsTimesThenDeadLettered: with the
// default 16 attempts, a message a simple consumer never acks is delivered
// exactly 16 times and then appears in %DLQ%<group>, which is routable and
// receivable like any topic.
func TestNeverAckedMessageDeliveredMaxAttemptsTimesThenDeadLettered(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	topic, group := "never-acked", "never-acked-g"
	p := newProducer(t, b.endpoint, topic)
	c := newSimpleConsumer(t, b.endpoint, group, topic, time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ids := sendN(t, ctx, p, topic, 1, nil)
	var attempts []int32
	for len(attempts) < grpcapi.DefaultMaxAttempts {
		mv := receiveOne(t, ctx, c, time.Second) // pop's minimum invisible time
		require.Equal(t, ids[0], mv.GetMessageId())
		attempts = append(attempts, mv.GetDeliveryAttempt())
	}
	for i, a := range attempts {
		require.EqualValues(t, i+1, a)
	}
	require.Zero(t, waitNothing(t, ctx, c, 3*time.Second), "delivered more than max attempts times")
	dl := newSimpleConsumer(t, b.endpoint, "dlq-reader", brokercore.DeadLetterTopic(group), time.Second, nil)
	mv := receiveOne(t, ctx, dl, 30*time.Second)
	require.Equal(t, ids[0], mv.GetMessageId())
	require.Equal(t, "0", string(mv.GetBody()))
	require.NoError(t, dl.Ack(ctx, mv))
}

// TestAsyncSendsAllAcknowledged: every SendAsync callback reports success
// with the id sent, and every message is stored.
func TestAsyncSendsAllAcknowledged(t *testing.T) {
	t.Parallel()
	const n = 500
	b := startBroker(t, grpcapi.Options{})
	topic := "async"
	p := newProducer(t, b.endpoint, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	ids := newSeenSet()
	var mu sync.Mutex
	var errs []error
	for i := range n {
		wg.Add(1)
		p.SendAsync(ctx, textMessage(topic, strconv.Itoa(i)), func(_ context.Context, r []*rmq.SendReceipt, err error) {
			defer wg.Done()
			if err != nil || len(r) != 1 {
				mu.Lock()
				errs = append(errs, fmt.Errorf("receipts %d: %v", len(r), err))
				mu.Unlock()
				return
			}
			ids.add(r[0].MessageID)
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	require.Equal(t, n, ids.len())
	c := newSimpleConsumer(t, b.endpoint, "async-g", topic, time.Second, nil)
	got := newSeenSet()
	for got.len() < n && ctx.Err() == nil {
		mvs, err := receive(ctx, c, 32, 30*time.Second)
		require.NoError(t, err)
		for _, mv := range mvs {
			got.add(mv.GetMessageId())
			require.NoError(t, c.Ack(ctx, mv))
		}
	}
	require.Equal(t, n, got.len())
}

// TestTagFilterDeliversOnlyMatchingTags: a subscription "A || C" gets only
// those tags.
func TestTagFilterDeliversOnlyMatchingTags(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	topic := "tags"
	p := newProducer(t, b.endpoint, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tags := []string{"A", "B", "C"}
	sendN(t, ctx, p, topic, 30, func(i int, m *rmq.Message) { m.SetTag(tags[i%3]) })
	c := newSimpleConsumer(t, b.endpoint, "tags-g", topic, time.Second, rmq.NewFilterExpression("A || C"))
	n := 0
	for n < 20 {
		require.NoError(t, ctx.Err())
		mvs, err := receive(ctx, c, 32, 30*time.Second)
		require.NoError(t, err)
		for _, mv := range mvs {
			require.NotEqual(t, "B", *mv.GetTag())
			n++
			require.NoError(t, c.Ack(ctx, mv))
		}
	}
	require.Zero(t, waitNothing(t, ctx, c, 2*time.Second))
}
