package brokercore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	wmbc "github.com/brokercore/brokercore/examples/watermill"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// clock is a fake clock for pop's visibility decisions: tests move it
// instead of sleeping for an invisible time to end.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeClockBackend is a Backend whose pop service runs on clk, with the
// MinInvisible clamp at 1 ms so hand-backs and short nack delays are not
// stretched to pop's default second.
func fakeClockBackend(t *testing.T, clk *clock) *wmbc.Backend {
	return openBackend(t, store.Options{}, pop.Options{Now: clk.Now, MinInvisible: time.Millisecond})
}

// waitTime bounds every wait for something that should happen promptly; it
// is never waited out when the adapter works.
const waitTime = 10 * time.Second

// quietTime is how long a test watches for a delivery that must not happen.
const quietTime = 300 * time.Millisecond

func receive(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		require.True(t, ok, "output channel closed")
		return m
	case <-time.After(waitTime):
		t.Fatal("no message within", waitTime)
		return nil
	}
}

func expectNothing(t *testing.T, ch <-chan *message.Message) {
	t.Helper()
	select {
	case m, ok := <-ch:
		if ok {
			t.Fatalf("unexpected delivery of %s (payload %q)", m.UUID, m.Payload)
		}
		t.Fatal("output channel closed unexpectedly")
	case <-time.After(quietTime):
	}
}

func expectClosed(t *testing.T, ch <-chan *message.Message) {
	t.Helper()
	deadline := time.After(waitTime)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("output channel not closed within", waitTime)
		}
	}
}

func publish(t *testing.T, pub message.Publisher, topic string, payloads ...string) []*message.Message {
	t.Helper()
	msgs := make([]*message.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(p))
	}
	require.NoError(t, pub.Publish(topic, msgs...))
	return msgs
}

func newPublisher(t *testing.T, cfg wmbc.Config) *wmbc.Publisher {
	t.Helper()
	p, err := wmbc.NewPublisher(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p
}

func newSubscriber(t *testing.T, cfg wmbc.Config) *wmbc.Subscriber {
	t.Helper()
	s, err := wmbc.NewSubscriber(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

func subscribe(t *testing.T, s *wmbc.Subscriber, ctx context.Context, topic string) <-chan *message.Message {
	t.Helper()
	ch, err := s.Subscribe(ctx, topic)
	require.NoError(t, err)
	return ch
}

func attempts(t *testing.T, m *message.Message) int {
	t.Helper()
	d, ok := wmbc.DeliveryFromContext(m.Context())
	require.True(t, ok, "message context carries no Delivery")
	return d.Attempts
}

// TestUnackedMessagesGoToNextSubscriberAtOnceWhenOneEnds rules out a
// subscriber that goes away (Close, or its Subscribe ctx cancelled) leaving
// the messages it held invisible until their invisible time ends: the
// invisible time is an hour and the clock moves one second, so only the
// hand-back can make the next subscriber of the group get them. (Checked by
// removing the deferred handBack in deliver: the test then fails with "no
// message within".)
func TestUnackedMessagesGoToNextSubscriberAtOnceWhenOneEnds(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		for _, how := range []string{"close", "cancel"} {
			t.Run(fmt.Sprintf("fifo=%v/%s", fifo, how), func(t *testing.T) {
				clk := newClock()
				b := fakeClockBackend(t, clk)
				cfg := wmbc.Config{Store: b.Store, Pop: b.Pop, ConsumerGroup: "g", InvisibleTime: time.Hour, FIFO: fifo}
				pub := newPublisher(t, cfg)
				sent := publish(t, pub, "orders", "a", "b", "c")

				first := newSubscriber(t, cfg)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ch := subscribe(t, first, ctx, "orders")
				held := receive(t, ch)
				assert.Equal(t, sent[0].UUID, held.UUID)
				if how == "close" {
					require.NoError(t, first.Close())
				} else {
					cancel()
				}
				expectClosed(t, ch)
				assert.Equal(t, uint64(3), first.Stats().HandedBack, "the held message and the rest of its batch")
				select {
				case <-held.Context().Done():
				default:
					t.Error("the held message's context is not cancelled after the subscription ended")
				}

				clk.Add(time.Second)
				next := subscribe(t, newSubscriber(t, cfg), context.Background(), "orders")
				for _, want := range sent {
					m := receive(t, next)
					assert.Equal(t, want.UUID, m.UUID)
					m.Ack()
				}
			})
		}
	}
}

// TestNackedMessageComesBackOnlyAfterNackDelay rules out a nack that
// redelivers at once (or never), and shows that in the default mode a nack
// does not hold up the rest of the queue.
func TestNackedMessageComesBackOnlyAfterNackDelay(t *testing.T) {
	clk := newClock()
	b := fakeClockBackend(t, clk)
	cfg := wmbc.Config{Store: b.Store, Pop: b.Pop, ConsumerGroup: "g", NackDelay: 10 * time.Second}
	pub := newPublisher(t, cfg)
	sent := publish(t, pub, "t", "first", "second")
	sub := newSubscriber(t, cfg)
	ch := subscribe(t, sub, context.Background(), "t")

	m := receive(t, ch)
	require.Equal(t, sent[0].UUID, m.UUID)
	require.Equal(t, 1, attempts(t, m))
	m.Nack()
	<-m.Context().Done() // the nack took effect
	m = receive(t, ch)
	require.Equal(t, sent[1].UUID, m.UUID, "the queue is not held up by the nack")
	m.Ack()
	expectNothing(t, ch)

	clk.Add(10 * time.Second)
	m = receive(t, ch)
	require.Equal(t, sent[0].UUID, m.UUID)
	assert.Equal(t, 2, attempts(t, m))
	m.Ack()
	expectNothing(t, ch)

	assert.Equal(t, wmbc.PublisherStats{Batches: 1, Messages: 2}, pub.Stats())
	st := sub.Stats()
	assert.Equal(t, uint64(3), st.Delivered)
	assert.Equal(t, uint64(2), st.Acked)
	assert.Equal(t, uint64(1), st.Nacked)
	assert.Zero(t, st.HandedBack+st.Stale+st.PopErrors)
}

// TestFIFONackKeepsLaterMessagesBehindTheNackedOne rules out the later
// messages of a FIFO batch overtaking a nacked one, on the subscriber that
// holds the batch or on another one of the group. (Checked by handling a
// FIFO nack as in the default mode, handing back the nacked message and
// going on with the batch: "third" then arrives during the quiet time and
// the test fails.)
func TestFIFONackKeepsLaterMessagesBehindTheNackedOne(t *testing.T) {
	clk := newClock()
	b := fakeClockBackend(t, clk)
	cfg := wmbc.Config{Store: b.Store, Pop: b.Pop, ConsumerGroup: "g", FIFO: true, NackDelay: 5 * time.Second}
	sent := publish(t, newPublisher(t, cfg), "t", "first", "second", "third")
	ch := subscribe(t, newSubscriber(t, cfg), context.Background(), "t")
	m := receive(t, ch)
	require.Equal(t, sent[0].UUID, m.UUID)
	// Another subscriber of the group joins once the batch is ours.
	other := subscribe(t, newSubscriber(t, cfg), context.Background(), "t")
	m.Ack()
	m = receive(t, ch)
	require.Equal(t, sent[1].UUID, m.UUID)
	m.Nack()
	<-m.Context().Done() // the nack took effect
	expectNothing(t, ch)
	expectNothing(t, other)

	clk.Add(5 * time.Second)
	var got []string
	for len(got) < 2 {
		select {
		case m := <-ch:
			got = append(got, string(m.Payload))
			m.Ack()
		case m := <-other:
			got = append(got, string(m.Payload))
			m.Ack()
		case <-time.After(waitTime):
			t.Fatalf("only %v delivered", got)
		}
	}
	assert.Equal(t, []string{"second", "third"}, got)
}

// TestSlowHandlerKeepsItsMessageFromTheRestOfTheGroup rules out a message
// being redelivered to another subscriber while its handler is still
// working: pop's clock moves well past the invisible time, a step after
// each of the subscriber's periodic extensions (so a machine that stalls
// the extender stalls the clock too). (Checked by disabling extend: no
// extension comes, and the test fails waiting for one.)
func TestSlowHandlerKeepsItsMessageFromTheRestOfTheGroup(t *testing.T) {
	clk := newClock()
	b := fakeClockBackend(t, clk)
	const invisible = 600 * time.Millisecond // extended every 200 ms of real time
	cfg := wmbc.Config{Store: b.Store, Pop: b.Pop, ConsumerGroup: "g", InvisibleTime: invisible, BatchSize: 1}
	sent := publish(t, newPublisher(t, cfg), "t", "slow")
	slow := newSubscriber(t, cfg)
	ch := subscribe(t, slow, context.Background(), "t")
	m := receive(t, ch)
	require.Equal(t, sent[0].UUID, m.UUID)

	other := subscribe(t, newSubscriber(t, cfg), context.Background(), "t")
	for i := 0; i < 12; i++ { // 1.2 s of pop time, twice the invisible time
		ext := slow.Stats().Extended
		require.Eventually(t, func() bool { return slow.Stats().Extended > ext }, 30*time.Second, time.Millisecond,
			"the subscriber extends the invisible time of the message its handler holds")
		clk.Add(invisible / 6)
		select {
		case dup := <-other:
			t.Fatalf("redelivered to another subscriber after %v of pop time while its handler runs: %s",
				time.Duration(i+1)*invisible/6, dup.UUID)
		case <-time.After(150 * time.Millisecond):
		}
	}
	m.Ack()
	clk.Add(time.Hour)
	expectNothing(t, other)
}

// TestGroupCreatedAfterPublishingGetsOldMessages rules out a new group
// starting at the end of the topic, and groups sharing progress.
func TestGroupCreatedAfterPublishingGetsOldMessages(t *testing.T) {
	b := fakeClockBackend(t, newClock())
	base := wmbc.Config{Store: b.Store, Pop: b.Pop}
	sent := publish(t, newPublisher(t, base), "t", "1", "2", "3")

	for _, group := range []string{"early", "late"} {
		cfg := base
		cfg.ConsumerGroup = group
		ch := subscribe(t, newSubscriber(t, cfg), context.Background(), "t")
		for _, want := range sent {
			m := receive(t, ch)
			assert.Equal(t, want.UUID, m.UUID, "group %s", group)
			m.Ack()
		}
	}
	// A fresh group per Subscriber (empty ConsumerGroup) sees them too.
	s := newSubscriber(t, base)
	assert.NotEmpty(t, s.Group())
	ch := subscribe(t, s, context.Background(), "t")
	for _, want := range sent {
		m := receive(t, ch)
		assert.Equal(t, want.UUID, m.UUID)
		m.Ack()
	}
}

// TestGroupResumesAfterRestartWithoutRedeliveringAcked rules out committed
// offsets that live only in memory: after the Backend is closed and its
// directory reopened, the group continues after what it acked. (Checked
// with OpenBackend leaving pop on its in-memory offsets: the reopened group
// starts again at "1".)
func TestGroupResumesAfterRestartWithoutRedeliveringAcked(t *testing.T) {
	dir := t.TempDir()
	cfg := wmbc.Config{Dir: dir, ConsumerGroup: "g"}
	pub, sub, err := wmbc.NewPubSub(cfg)
	require.NoError(t, err)
	sent := publish(t, pub, "t", "1", "2", "3", "4", "5", "6")
	ch := subscribe(t, sub, context.Background(), "t")
	for _, want := range sent[:3] {
		m := receive(t, ch)
		require.Equal(t, want.UUID, m.UUID)
		m.Ack()
	}
	require.NoError(t, pub.Close())
	require.NoError(t, sub.Close())

	ch = subscribe(t, newSubscriber(t, cfg), context.Background(), "t")
	for _, want := range sent[3:] {
		m := receive(t, ch)
		require.Equal(t, want.UUID, m.UUID, "after the restart")
		m.Ack()
	}
	expectNothing(t, ch)
}

// TestMessageRoundTripsAndHandlersOwnTheirPayload checks the mapping
// (UUID, metadata, payload) and rules out handing handlers pop's shared
// message body: a handler that scribbles on its payload and nacks must not
// change what the next delivery carries. (Checked by handing out pop's body
// without copying it: the redelivery then carries "XXXXXXX".)
func TestMessageRoundTripsAndHandlersOwnTheirPayload(t *testing.T) {
	clk := newClock()
	b := fakeClockBackend(t, clk)
	cfg := wmbc.Config{Store: b.Store, Pop: b.Pop, ConsumerGroup: "g"}
	in := message.NewMessage(watermill.NewUUID(), []byte("payload"))
	in.Metadata.Set("trace", "abc")
	in.Metadata.Set("empty", "")
	require.NoError(t, newPublisher(t, cfg).Publish("t", in))

	ch := subscribe(t, newSubscriber(t, cfg), context.Background(), "t")
	m := receive(t, ch)
	assert.Equal(t, in.UUID, m.UUID)
	assert.Equal(t, []byte("payload"), []byte(m.Payload))
	assert.Equal(t, in.Metadata, m.Metadata)
	d, ok := wmbc.DeliveryFromContext(m.Context())
	require.True(t, ok)
	assert.Equal(t, wmbc.Delivery{Topic: "t", QueueID: 0, QueueOffset: 0, Attempts: 1}, d)

	copy(m.Payload, "XXXXXXX")
	m.Nack()
	<-m.Context().Done() // the nack took effect
	clk.Add(time.Second) // past the nack delay (0, clamped to 1 ms)
	m = receive(t, ch)
	assert.Equal(t, []byte("payload"), []byte(m.Payload))
	m.Ack()
}

// TestPartitionKeyKeepsEachKeyOnOneQueue rules out messages of one key
// spread over queues (which would lose their order), and checks that
// messages without the key are spread round robin.
func TestPartitionKeyKeepsEachKeyOnOneQueue(t *testing.T) {
	b := fakeClockBackend(t, newClock())
	cfg := wmbc.Config{Store: b.Store, Pop: b.Pop, ConsumerGroup: "g", QueuesPerTopic: 4, PartitionKey: "customer"}
	var msgs []*message.Message
	for i := 0; i < 24; i++ {
		m := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprint(i)))
		if i%2 == 0 {
			m.Metadata.Set("customer", fmt.Sprintf("c%d", i%6))
		}
		msgs = append(msgs, m)
	}
	require.NoError(t, newPublisher(t, cfg).Publish("t", msgs...))

	queuesOf := map[string]map[int]bool{}
	ch := subscribe(t, newSubscriber(t, cfg), context.Background(), "t")
	for range msgs {
		m := receive(t, ch)
		d, ok := wmbc.DeliveryFromContext(m.Context())
		require.True(t, ok)
		key := m.Metadata.Get("customer")
		if queuesOf[key] == nil {
			queuesOf[key] = map[int]bool{}
		}
		queuesOf[key][d.QueueID] = true
		m.Ack()
	}
	for key, qs := range queuesOf {
		if key == "" {
			assert.Len(t, qs, 4, "keyless messages go round robin over all queues")
		} else {
			assert.Len(t, qs, 1, "key %s is on one queue", key)
		}
	}
}
