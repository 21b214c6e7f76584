//go:build !race

package replicated

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
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

// The unchanged v2 producer and push consumer on a three-node cluster: every
// send acknowledged before and after the leader is stopped is delivered.
func TestLeaderStopLosesNoAcknowledgedSend(t *testing.T) {
	c := startCluster(t, 3)
	first := c.leader(30 * time.Second)
	var second int
	failover(t, c.nameServers(), func() {
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
	failover(t, []string{ps[0].cfg.NameSrvAddr, ps[1].cfg.NameSrvAddr, ps[2].cfg.NameSrvAddr}, func() {
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
	var mu sync.Mutex
	seen := map[string]int{}
	pc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithGroupName("g-loop"),
		consumer.WithInstance(t.Name()+"-c"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		for _, m := range msgs {
			seen[m.GetKeys()]++
		}
		mu.Unlock()
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.Shutdown() })

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
	deadline := time.Now().Add(120 * time.Second)
	for {
		mu.Lock()
		missing, redelivered := 0, 0
		for _, k := range acked {
			if seen[k] == 0 {
				missing++
			}
		}
		for _, n := range seen {
			redelivered += n - 1
		}
		mu.Unlock()
		if missing == 0 {
			t.Logf("%d acknowledged sends all delivered, %d redeliveries", len(acked), redelivered)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged sends not delivered", missing, len(acked))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// failover runs a producer and a push consumer over the name servers ns,
// sends before and after stopLeader (which returns once a new leader is
// elected), and checks that every acknowledged send is delivered.
func failover(t *testing.T, ns []string, stopLeader func()) {
	const topic, group = "orders", "g-ha"
	p, err := rocketmq.NewProducer(producer.WithNameServer(ns), producer.WithGroupName("pg-ha"),
		producer.WithInstanceName(t.Name()+"-p"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })

	var mu sync.Mutex
	seen := map[string]int{}
	pc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithGroupName(group),
		consumer.WithInstance(t.Name()+"-c"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		for _, m := range msgs {
			seen[m.GetKeys()]++
		}
		mu.Unlock()
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.Shutdown() })

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
	require.Less(t, resumed, 25*time.Second, "sends resumed before the client's route refresh")
	acked = append(acked, "b0000")
	for i := 1; i < after; i++ {
		k := fmt.Sprintf("b%04d", i)
		require.NoError(t, send(p, topic, k, time.Now().Add(30*time.Second)))
		acked = append(acked, k)
	}
	t.Logf("new leader after %v, first send acknowledged %v after the stop",
		elected.Round(time.Millisecond), resumed.Round(time.Millisecond))

	deadline := time.Now().Add(75 * time.Second)
	for {
		mu.Lock()
		missing := 0
		for _, k := range acked {
			if seen[k] == 0 {
				missing++
			}
		}
		redelivered := 0
		for _, n := range seen {
			redelivered += n - 1
		}
		mu.Unlock()
		if missing == 0 {
			t.Logf("%d acknowledged sends all delivered, %d redeliveries", len(acked), redelivered)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged sends not delivered", missing, len(acked))
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, pc.Shutdown())
	restartFromCommitted(t, ns, p, topic, group, len(acked))
}

// restartFromCommitted starts another consumer of the group (the first
// one was shut down: it commits its offsets on the way out, oneway, so the
// last of them may not be in yet): it goes on from the replicated committed
// offsets, so it gets the new sends and not all the old ones again (the
// offsets committed before the stop are at least those of the sends before
// it, committed during the client's route refresh).
func restartFromCommitted(t *testing.T, ns []string, p rocketmq.Producer, topic, group string, old int) {
	var mu sync.Mutex
	seen := map[string]int{}
	pc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithGroupName(group),
		consumer.WithInstance(t.Name()+"-c2"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		for _, m := range msgs {
			seen[m.GetKeys()]++
		}
		mu.Unlock()
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.Shutdown() })
	const more = 20
	for i := 0; i < more; i++ {
		require.NoError(t, send(p, topic, fmt.Sprintf("c%04d", i), time.Now().Add(30*time.Second)))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		fresh, again := 0, 0
		for k := range seen {
			if k[0] == 'c' {
				fresh++
			} else {
				again++
			}
		}
		mu.Unlock()
		if fresh == more {
			t.Logf("a new consumer of the group got the %d new sends and %d of the %d old ones again", more, again, old)
			require.Less(t, again, old, "the new consumer started from the committed offsets, not from the first")
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new consumer of the group got %d of %d new sends", fresh, more)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CONSUMER_SEND_MSG_BACK is refused by a replicated broker (its retry topic
// is not replicated yet), and so is the client's fallback send to the
// retry topic: the v2 push consumer then consumes the message again
// itself.
func TestConsumeLaterIsRetriedByTheClient(t *testing.T) {
	c := startCluster(t, 1)
	c.leader(30 * time.Second)
	const topic, group = "later", "g-later"
	p, err := rocketmq.NewProducer(producer.WithNameServer(c.nameServers()), producer.WithGroupName("pg-later"),
		producer.WithInstanceName(t.Name()+"-p"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	require.NoError(t, send(p, topic, "k1", time.Now().Add(30*time.Second)))

	var mu sync.Mutex
	tries := 0
	again := make(chan struct{})
	pc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(c.nameServers()), consumer.WithGroupName(group),
		consumer.WithInstance(t.Name()+"-c"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		tries++
		if tries == 1 {
			return consumer.ConsumeRetryLater, nil
		}
		if tries == 2 {
			close(again)
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.Shutdown() })
	select {
	case <-again:
	case <-time.After(60 * time.Second):
		t.Fatal("the message was not consumed again")
	}
	require.Zero(t, c.nodes[0].Node().Store().MaxOffset("%RETRY%"+group, 0), "nothing went to the retry topic")
}
