//go:build !race

package replicated

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/stretchr/testify/require"
)

// send sends one message with key until it is acknowledged (the client
// gives up after its own retries; the application retries), and returns
// the error of the last failed attempt, if any.
func send(p rocketmq.Producer, topic, key string, until time.Time) error {
	var last error
	for time.Now().Before(until) {
		m := primitive.NewMessage(topic, []byte("body-"+key))
		m.WithKeys([]string{key})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		r, err := p.SendSync(ctx, m)
		cancel()
		if err == nil && r.Status == primitive.SendOK {
			return nil
		}
		last = fmt.Errorf("%v (result %v)", err, r)
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not acknowledged: %w", last)
}

// counter counts a push consumer's deliveries by message key.
type counter struct {
	mu   sync.Mutex
	seen map[string]int
	// answer, if set, is the listener's answer for a delivery (default
	// ConsumeSuccess); it runs under mu.
	answer func(m *primitive.MessageExt) consumer.ConsumeResult
}

// consume is the push consumer's listener.
func (c *counter) consume(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := consumer.ConsumeSuccess
	for _, m := range msgs {
		c.seen[m.GetKeys()]++
		if c.answer != nil && c.answer(m) != consumer.ConsumeSuccess {
			res = consumer.ConsumeRetryLater
		}
	}
	return res, nil
}

// count reports how many of keys were never delivered, and how many
// deliveries were redeliveries (of any key).
func (c *counter) count(keys []string) (missing, redelivered int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if c.seen[k] == 0 {
			missing++
		}
	}
	for _, n := range c.seen {
		redelivered += n - 1
	}
	return missing, redelivered
}

// waitAll waits until every key was delivered and logs the redeliveries.
func (c *counter) waitAll(t *testing.T, keys []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		missing, redelivered := c.count(keys)
		if missing == 0 {
			t.Logf("%d acknowledged sends all delivered, %d redeliveries", len(keys), redelivered)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged sends not delivered", missing, len(keys))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startCounting starts the official v2 push consumer of group on topic,
// from the first offset, over the name servers ns, counting its
// deliveries in c (made here when nil); it is shut down at cleanup.
func startCounting(t *testing.T, ns []string, group, instance, topic string, c *counter, opts ...consumer.Option) (rocketmq.PushConsumer, *counter) {
	t.Helper()
	if c == nil {
		c = &counter{}
	}
	c.seen = map[string]int{}
	opts = append([]consumer.Option{consumer.WithNameServer(ns), consumer.WithGroupName(group),
		consumer.WithInstance(instance), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}, opts...)
	pc, err := rocketmq.NewPushConsumer(opts...)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{}, c.consume))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.Shutdown() })
	return pc, c
}

// The unchanged v2 producer and push consumer on a three-node cluster: every
// send acknowledged before and after the leader is stopped is delivered.
func TestLeaderStopLosesNoAcknowledgedSend(t *testing.T) {
	c := startCluster(t, 3)
	first := c.leader(30 * time.Second)
	var second int
	var brokers []string
	for _, s := range c.nodes {
		brokers = append(brokers, s.BrokerAddr())
	}
	failover(t, c.nameServers(), brokers, func() {
		c.stop(first)
		second = c.leader(30 * time.Second)
	})
	require.NotZero(t, c.nodes[second].Broker().Stats().Sent, "the new leader took the sends after the stop")
	t.Logf("leader n%d stopped, n%d leads", first+1, second+1)
}

// The same with node processes and kill -9 of the leader's.
func TestLeaderKill9LosesNoAcknowledgedSend(t *testing.T) {
	ps := startProcs(t, 3)
	first := agreedLeader(t, ps, 30*time.Second)
	failover(t, []string{ps[0].cfg.NameSrvAddr, ps[1].cfg.NameSrvAddr, ps[2].cfg.NameSrvAddr},
		[]string{ps[0].cfg.BrokerAddr, ps[1].cfg.BrokerAddr, ps[2].cfg.BrokerAddr}, func() {
			first.kill()
			second := agreedLeader(t, ps, 30*time.Second)
			t.Logf("leader %s killed, %s leads", first.cfg.ID, second.cfg.ID)
		})
}

// A kill -9 loop (BROKERCORE_LONG=1): the leader's process is killed and
// restarted on its data, round after round, under one producer and one
// push consumer; every acknowledged send is delivered.
func TestLeaderKill9Loop(t *testing.T) {
	if os.Getenv("BROKERCORE_LONG") != "1" {
		t.Skip("BROKERCORE_LONG=1 runs the kill -9 loop")
	}
	const rounds, perRound = 5, 50
	ps := startProcs(t, 3)
	var ns []string
	for _, p := range ps {
		ns = append(ns, p.cfg.NameSrvAddr)
	}
	const topic = "loop"
	p, err := rocketmq.NewProducer(producer.WithNameServer(ns), producer.WithGroupName("pg-loop"),
		producer.WithInstanceName(t.Name()+"-p"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	_, seen := startCounting(t, ns, "g-loop", t.Name()+"-c", topic, nil)

	var acked []string
	var resumes []time.Duration
	for r := 0; r < rounds; r++ {
		for i := 0; i < perRound; i++ {
			k := fmt.Sprintf("r%d-%04d", r, i)
			require.NoError(t, send(p, topic, k, time.Now().Add(75*time.Second)))
			acked = append(acked, k)
		}
		l := agreedLeader(t, ps, 30*time.Second)
		killed := time.Now()
		l.kill()
		k := fmt.Sprintf("r%d-after", r)
		require.NoError(t, send(p, topic, k, time.Now().Add(75*time.Second)))
		resumes = append(resumes, time.Since(killed))
		acked = append(acked, k)
		l.start(t)
	}
	slices.Sort(resumes)
	t.Logf("%d rounds: kill -9 of the leader to the next acknowledged send: median %v, range %v–%v",
		rounds, resumes[len(resumes)/2].Round(time.Millisecond), resumes[0].Round(time.Millisecond),
		resumes[len(resumes)-1].Round(time.Millisecond))
	seen.waitAll(t, acked, 120*time.Second)
}

// failover runs a producer and a push consumer over the name servers ns,
// sends before and after stopLeader (which returns once a new leader is
// elected), and checks that every acknowledged send is delivered, and that
// another consumer of the group goes on from the offsets committed
// (brokers: every node's remoting address).
func failover(t *testing.T, ns, brokers []string, stopLeader func()) {
	const topic, group = "orders", "g-ha"
	p, err := rocketmq.NewProducer(producer.WithNameServer(ns), producer.WithGroupName("pg-ha"),
		producer.WithInstanceName(t.Name()+"-p"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })

	pc, seen := startCounting(t, ns, group, t.Name()+"-c", topic, nil)

	const before, after = 100, 100
	var acked []string
	for i := 0; i < before; i++ {
		k := fmt.Sprintf("a%04d", i)
		require.NoError(t, send(p, topic, k, time.Now().Add(30*time.Second)))
		acked = append(acked, k)
	}
	stopped := time.Now()
	stopLeader()
	elected := time.Since(stopped)
	// The client refreshes its routes every 30 s; it retries a failed send
	// on a follower's write-only queue at once, and the follower forwards it.
	require.NoError(t, send(p, topic, "b0000", time.Now().Add(75*time.Second)))
	resumed := time.Since(stopped)
	// From the new leader on (electing it is raft's, measured by BenchmarkFailover).
	require.Less(t, resumed-elected, 25*time.Second, "sends resumed before the client's route refresh")
	acked = append(acked, "b0000")
	for i := 1; i < after; i++ {
		k := fmt.Sprintf("b%04d", i)
		require.NoError(t, send(p, topic, k, time.Now().Add(30*time.Second)))
		acked = append(acked, k)
	}
	t.Logf("new leader after %v, first send acknowledged %v after the stop",
		elected.Round(time.Millisecond), resumed.Round(time.Millisecond))

	seen.waitAll(t, acked, 75*time.Second)
	// The client commits every 5 s, to the broker its routes name: the
	// stopped leader until it refreshes them (every 30 s). Wait for a
	// commit to be in, so that what follows does not hang on that timing.
	deadline := time.Now().Add(75 * time.Second)
	for committedSum(brokers, group, topic) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the consumer committed no offset in 75 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, pc.Shutdown())
	restartFromCommitted(t, ns, brokers, p, topic, group, len(acked))
}

// committedSum is the group's committed offsets of topic summed over its
// queues, the most any live node among brokers answers (0 when none
// answers).
func committedSum(brokers []string, group, topic string) int64 {
	var most int64
	for _, addr := range brokers {
		var sum int64
		for q := range 16 {
			resp, err := call(addr, &wire.Command{Code: wire.CodeQueryConsumerOffset, Language: "GO", Version: 317,
				ExtFields: map[string]string{"consumerGroup": group, "topic": topic, "queueId": fmt.Sprint(q)}})
			if err != nil {
				break // a stopped node
			}
			var off int64
			if _, err := fmt.Sscan(resp.ExtFields["offset"], &off); resp.Code == wire.Success && err == nil && off > 0 {
				sum += off
			}
		}
		most = max(most, sum)
	}
	return most
}

// restartFromCommitted starts another consumer of the group once the first
// one was shut down (it commits its offsets on the way out, oneway, so the
// last of them may not be in yet). It goes on from the replicated committed
// offsets: it gets the new sends, and of the old ones at most those above
// what was committed when it started.
func restartFromCommitted(t *testing.T, ns, brokers []string, p rocketmq.Producer, topic, group string, old int) {
	base := committedSum(brokers, group, topic)
	require.Positive(t, base, "an offset was committed before the first consumer stopped")
	_, seen := startCounting(t, ns, group, t.Name()+"-c2", topic, nil)
	const more = 20
	for i := 0; i < more; i++ {
		require.NoError(t, send(p, topic, fmt.Sprintf("c%04d", i), time.Now().Add(30*time.Second)))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		seen.mu.Lock()
		fresh, again := 0, 0
		for k := range seen.seen {
			if k[0] == 'c' {
				fresh++
			} else {
				again++
			}
		}
		seen.mu.Unlock()
		if fresh == more {
			t.Logf("a new consumer of the group got the %d new sends and %d of the %d old ones again (%d committed)",
				more, again, old, base)
			require.LessOrEqual(t, int64(again), int64(old)-base,
				"the new consumer started from the committed offsets, not from the first")
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new consumer of the group got %d of %d new sends", fresh, more)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CONSUMER_SEND_MSG_BACK goes through raft: the official v2 push consumer
// answering ConsumeRetryLater gets the message again from %RETRY%group
// (delayed by the leader's replicated scheduler), and after its max
// reconsume times the message goes to %DLQ%group, on every node, across a
// leader change in between (the consumer keeps the route to the old
// leader, now a follower, which forwards the send-backs).
func TestConsumeLaterRetriesThenDeadLettersAcrossLeaderChange(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) { cfg.DelayLevels = strings.TrimSpace(strings.Repeat("1s ", 18)) })
	first := c.leader(30 * time.Second)
	const topic, group, maxTimes = "later", "g-later", 3
	p, err := rocketmq.NewProducer(producer.WithNameServer(c.nameServers()), producer.WithGroupName("pg-later"),
		producer.WithInstanceName(t.Name()+"-p"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	require.NoError(t, send(p, topic, "k1", time.Now().Add(30*time.Second)))

	var reconsumed []int32 // the deliveries' reconsume times
	retried := make(chan struct{})
	cnt := &counter{answer: func(m *primitive.MessageExt) consumer.ConsumeResult {
		reconsumed = append(reconsumed, m.ReconsumeTimes)
		if m.ReconsumeTimes == 1 {
			close(retried)
		}
		return consumer.ConsumeRetryLater
	}}
	startCounting(t, c.nameServers(), group, t.Name()+"-c", topic, cnt, consumer.WithMaxReconsumeTimes(maxTimes))
	select {
	case <-retried:
	case <-time.After(60 * time.Second):
		t.Fatal("the message did not come back from the retry topic")
	}
	require.NoError(t, c.nodes[first].Node().Raft().LeadershipTransfer().Error())
	second := c.leader(30 * time.Second)
	require.NotEqual(t, first, second)

	dlq := brokercore.DeadLetterTopic(group)
	for i, s := range c.nodes {
		require.Eventually(t, func() bool { return s.Node().Store().MaxOffset(dlq, 0) >= 1 }, 60*time.Second, 20*time.Millisecond,
			"node %d: no dead letter", i)
	}
	msgs, err := c.nodes[second].Node().Read(dlq, 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "one dead letter")
	require.Equal(t, "body-k1", string(msgs[0].Body))
	require.Equal(t, maxTimes+1, msgs[0].ReconsumeTimes)
	require.Equal(t, topic, msgs[0].Properties[brokercore.PropRetryTopic])
	require.Equal(t, int64(maxTimes), c.nodes[second].Node().Store().MaxOffset(brokercore.RetryTopic(group), 0), "one retry per reconsume")
	cnt.mu.Lock()
	got := slices.Clone(reconsumed)
	cnt.mu.Unlock()
	require.True(t, slices.IsSorted(got), "deliveries in reconsume order: %v", got)
	require.Equal(t, []int32{0, 1, 2, 3}, slices.Compact(slices.Clone(got)), "delivered first, then once per retry (redeliveries aside)")
	t.Logf("leader n%d handed over to n%d between the retries; deliveries by reconsume times %v (%d redeliveries), dead-lettered after %d reconsumes",
		first+1, second+1, got, len(got)-4, maxTimes)
}
