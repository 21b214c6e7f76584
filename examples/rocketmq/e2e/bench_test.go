//go:build !race

package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/store"
)

// BenchmarkSyncSend16: the official producer, 16 goroutines sending 1 KiB
// messages synchronously (each send fsynced by the store's group commit) to
// a 4-queue topic on loopback. Reports msgs/s and p50/p99 send latency.
func BenchmarkSyncSend16(b *testing.B) {
	for _, flush := range []string{"sync", "async"} {
		b.Run("flush="+flush, func(b *testing.B) { benchSyncSend(b, flush) })
	}
}

func benchSyncSend(b *testing.B, flush string) {
	br := rmqtest.StartConfig(b, server.Config{Flush: flush})
	p := newProducer(b, br.NameSrv)
	body := make([]byte, 1024)
	sendSync(b, p, primitive.NewMessage("bench-send", body)) // route, connection, topic
	const workers = 16
	lat := make([][]time.Duration, workers)
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				r, err := p.SendSync(context.Background(), primitive.NewMessage("bench-send", body))
				if err != nil || r.Status != primitive.SendOK {
					b.Errorf("send: %v %v", err, r)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/el.Seconds(), "msgs/s")
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
}

// BenchmarkPushConsume: b.N 1 KiB messages already in a 4-queue topic, one
// official push consumer (default options: 20 consume goroutines, pull
// batch 32) receives them all. Reports msgs/s.
func BenchmarkPushConsume(b *testing.B) {
	br := rmqtest.Start(b)
	const topic = "bench-consume"
	if _, err := br.Server.Topics().Ensure(topic, 4); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	st := br.Server.Core().Store()
	batch := make([]*store.Message, 0, 256)
	for i := 0; i < b.N; i++ {
		batch = append(batch, &store.Message{Topic: topic, QueueID: i % 4, Body: body,
			Properties: map[string]string{"UNIQ_KEY": fmt.Sprintf("%032x", i)}})
		if len(batch) == cap(batch) || i == b.N-1 {
			if err := st.Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	var got atomic.Int64
	done := make(chan struct{})
	c := newPushConsumer(b, br.NameSrv, "g-bench")
	if err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		if got.Add(int64(len(msgs))) == int64(b.N) {
			close(done)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Shutdown() })
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", got.Load(), b.N)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
}
