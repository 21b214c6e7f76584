//go:build !race

package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/brokercore/brokercore/examples/rocketmq/internal/cpuclock"
)

// BenchmarkRemotingACLConsumeChild: a v2 push consumer receives and acks
// b.N stored 1 KiB messages from a broker in a child process, with ACL off
// and on: broker-cpu-µs/msg is the broker's CPU alone (what this module's
// ACL costs a receive+ack), client-cpu-µs/msg the client's (the official
// client's own signing included). The messages are sent first, untimed.
//
//	go test -run '^$' -bench RemotingACLConsumeChild/acl=off -benchtime 20000x ./e2e/  (then acl=on, alternated)
func BenchmarkRemotingACLConsumeChild(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "acl=off"
		if on {
			name = "acl=on"
		}
		b.Run(name, func(b *testing.B) { benchACLChildConsume(b, on) })
	}
}

func benchACLChildConsume(b *testing.B, on bool) {
	ns, env := aclChildEnv(b, "async", on, true)
	var cr primitive.Credentials
	if on {
		cr = benchCreds
	}
	c := startChild(b, "broker", env...)
	pid := c.cmd.Process.Pid
	const topic = "bench-consume"
	preload(b, ns, cr, topic, b.N)

	var got atomic.Int64
	done := make(chan struct{})
	pc := newPushConsumer(b, ns, "g-bench", consumer.WithCredentials(cr))
	if err := pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		if got.Add(int64(len(msgs))) == int64(b.N) {
			close(done)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := cpuclock.Self()
	bcpu0, _ := cpuclock.Process(pid)
	start := time.Now()
	if err := pc.Start(); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", got.Load(), b.N)
	}
	el, cpu := time.Since(start), cpuclock.Self()-cpu0
	bcpu, ok := cpuclock.Process(pid)
	b.StopTimer()
	_ = pc.Shutdown()
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "client-cpu-µs/msg")
	if ok {
		b.ReportMetric(float64((bcpu-bcpu0).Microseconds())/float64(b.N), "broker-cpu-µs/msg")
	}
	c.stop(b)
}

// preload sends n 1 KiB messages to topic with 16 senders.
func preload(b *testing.B, ns string, cr primitive.Credentials, topic string, n int) {
	p := newProducer(b, ns, producer.WithCredentials(cr))
	body := make([]byte, 1024)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if r, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body)); err != nil || r.Status != primitive.SendOK {
					b.Errorf("preload send: %v %v", err, r)
					return
				}
			}
		}()
	}
	wg.Wait()
	_ = p.Shutdown()
}

// BenchmarkRemotingACLSignedChild separates the broker's ACL cost from the
// client's: the v2 client signs every request in both runs (the official
// client's own signing costs it far more CPU than the broker's check, and
// a slower client batches less on the broker), and only the child broker's
// ACL is off or on. broker-cpu-µs/msg is then what ACL adds to a send on
// the broker, at the same client speed.
//
//	go test -run '^$' -bench 'RemotingACLSignedChild/flush=async,broker-acl=off' -benchtime 30000x ./e2e/  (then on, alternated)
func BenchmarkRemotingACLSignedChild(b *testing.B) {
	for _, flush := range []string{"sync", "async"} {
		for _, on := range []bool{false, true} {
			name := "flush=" + flush + ",broker-acl=off"
			if on {
				name = "flush=" + flush + ",broker-acl=on"
			}
			b.Run(name, func(b *testing.B) { benchACLSignedChildSend(b, flush, on) })
		}
	}
}

func benchACLSignedChildSend(b *testing.B, flush string, on bool) {
	ns, env := aclChildEnv(b, flush, on, true)
	c := startChild(b, "broker", env...)
	pid := c.cmd.Process.Pid
	cr := benchCreds // signed either way
	benchACLSendTo(b, ns, cr, func() (time.Duration, bool) { return cpuclock.Process(pid) })
	c.stop(b)
}
