package brokercore_test

import (
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	wmbc "github.com/brokercore/brokercore/examples/watermill"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// openBackend opens one store + pop service for a whole suite run: every
// Publisher and Subscriber the suite constructs shares it, as separate
// processes would share a broker. It is closed after all the run's (parallel)
// subtests have finished.
func openBackend(t testing.TB, so store.Options, po pop.Options) *wmbc.Backend {
	t.Helper()
	b, err := wmbc.OpenBackend(t.TempDir(), so, po)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// constructors returns the suite's two constructors over b: the plain one
// uses base.ConsumerGroup (empty: a fresh group per Subscriber), the other the
// group the suite names.
func constructors(b *wmbc.Backend, base wmbc.Config) (tests.PubSubConstructor, tests.ConsumerGroupPubSubConstructor) {
	withGroup := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		cfg := base
		cfg.Store, cfg.Pop, cfg.ConsumerGroup = b.Store, b.Pop, group
		pub, sub, err := wmbc.NewPubSub(cfg)
		require.NoError(t, err)
		// The suite does not close everything it constructs (its
		// TestPublishSubscribeInOrder closes its multiplied subscriber before
		// subscribing it); Close is idempotent, so close leftovers here.
		t.Cleanup(func() {
			assert.NoError(t, pub.Close())
			assert.NoError(t, sub.Close())
		})
		return pub, sub
	}
	plain := func(t *testing.T) (message.Publisher, message.Subscriber) {
		return withGroup(t, base.ConsumerGroup)
	}
	return plain, withGroup
}

// suitePopOptions lowers pop's MinInvisible clamp (1 s by default) so that
// nacks (NackDelay 0) and hand-backs on Close take effect at once: the suite
// nacks hundreds of times under 15 s timeouts.
var suitePopOptions = pop.Options{MinInvisible: time.Millisecond}

// TestPubSub runs Watermill's universal Pub/Sub suite with FIFO on and every
// subscriber of the plain constructor in one shared consumer group, so the
// suite's multi-subscriber tests (TestConcurrentSubscribe with 50
// subscribers, TestContinueAfterSubscribeClose, TestPublishSubscribeInOrder
// with 10) exercise one group's load sharing, hand-back on Close and the FIFO
// order across subscribers. GuaranteedOrder comes from FIFO mode over the
// default single queue per topic: a queue with an unacked batch is blocked
// for the group's other subscribers, so no subscriber can overtake another.
//
// NewSubscriberReceivesOldMessages is off here, because a new subscriber of
// the same group must not get what the group already consumed; that feature
// is proven by TestPubSubFreshGroupPerSubscriber. TestReconnect skips: it
// needs Features.RestartServiceCommand to restart an external broker, and
// brokercore is embedded (there is no server process to restart).
func TestPubSub(t *testing.T) {
	b := openBackend(t, store.Options{}, suitePopOptions)
	plain, withGroup := constructors(b, wmbc.Config{ConsumerGroup: "suite", FIFO: true})
	tests.TestPubSub(t, tests.Features{
		ConsumerGroups:  true,
		Persistent:      true,
		GuaranteedOrder: true,
	}, plain, withGroup)
}

// TestPubSubFreshGroupPerSubscriber runs the suite with every feature
// brokercore has at once — ConsumerGroups, Persistent, GuaranteedOrder (FIFO,
// one queue per topic) and NewSubscriberReceivesOldMessages — with an empty
// Config.ConsumerGroup, so each Subscriber gets a fresh group that starts at
// the topic's oldest message (like a Kafka consumer without a group). The
// named groups of TestConsumerGroups still come from the suite.
func TestPubSubFreshGroupPerSubscriber(t *testing.T) {
	b := openBackend(t, store.Options{}, suitePopOptions)
	plain, withGroup := constructors(b, wmbc.Config{FIFO: true})
	tests.TestPubSub(t, tests.Features{
		ConsumerGroups:                   true,
		Persistent:                       true,
		GuaranteedOrder:                  true,
		NewSubscriberReceivesOldMessages: true,
	}, plain, withGroup)
}

// TestPubSubDefaultModeFourQueues runs the suite on the default delivery mode
// (FIFO off) with four queues per topic: no order across the group's
// subscribers, so GuaranteedOrder is off and TestPublishSubscribeInOrder and
// TestNoAck skip.
func TestPubSubDefaultModeFourQueues(t *testing.T) {
	b := openBackend(t, store.Options{}, suitePopOptions)
	plain, withGroup := constructors(b, wmbc.Config{ConsumerGroup: "suite", QueuesPerTopic: 4})
	tests.TestPubSub(t, tests.Features{
		ConsumerGroups: true,
		Persistent:     true,
	}, plain, withGroup)
}

// TestPubSubStress runs Watermill's stress suite (the whole suite
// STRESS_TEST_COUNT times, default 10, in parallel, over one Backend).
// Opt-in, about 70 s with -race on 2 cores:
//
//	BROKERCORE_LONG=1 go test -race -tags stress -run TestPubSubStress
//
// (-tags stress is Watermill's own switch: 5x timeouts, GOMAXPROCS doubled.)
func TestPubSubStress(t *testing.T) {
	if os.Getenv("BROKERCORE_LONG") != "1" {
		t.Skip("set BROKERCORE_LONG=1 to run Watermill's stress suite")
	}
	b := openBackend(t, store.Options{}, suitePopOptions)
	plain, withGroup := constructors(b, wmbc.Config{ConsumerGroup: "suite", FIFO: true})
	tests.TestPubSubStressTest(t, tests.Features{
		ConsumerGroups:  true,
		Persistent:      true,
		GuaranteedOrder: true,
	}, plain, withGroup)
}

// TestNackedMessageIsRedeliveredPastPopsMaxAttempts: brokercore.Open dead-
// letters a message after pop.DefaultMaxAttempts (16) deliveries, which a
// Watermill subscriber must not see happen to a message it keeps nacking.
// (Checked by leaving MaxAttempts 0 in OpenBackend: the 17th pop is empty
// and the message is in %DLQ%g.)
func TestNackedMessageIsRedeliveredPastPopsMaxAttempts(t *testing.T) {
	b := openBackend(t, store.Options{Sync: store.SyncNone}, pop.Options{MinInvisible: time.Millisecond})
	require.NoError(t, b.Store.Append(&store.Message{Topic: "t", Body: []byte("poison")}))
	req := pop.Request{Group: "g", Topic: "t", ClientID: "c", Invisible: time.Millisecond}
	for attempt := 1; attempt <= 3*pop.DefaultMaxAttempts; attempt++ {
		var res pop.Result
		require.Eventually(t, func() bool {
			var err error
			res, err = b.Pop.Pop(t.Context(), req)
			require.NoError(t, err)
			return len(res.Messages) == 1
		}, waitTime, time.Millisecond, "attempt %d", attempt)
		require.Equal(t, attempt, res.Messages[0].Attempts)
	}
	assert.Zero(t, b.Store.MaxOffset(brokercore.DeadLetterTopic("g"), 0), "nothing dead-lettered")
}
