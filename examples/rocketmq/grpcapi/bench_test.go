package grpcapi_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/brokercore/brokercore/examples/rocketmq/internal/cpuclock"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/store"
)

// The benchmarks run the program as users do (rmqtest: brokercore.Open
// under the remoting and gRPC listeners), so their figures compare with
// e2e's remoting benchmarks of the same workload (BenchmarkSyncSend16,
// BenchmarkPushConsume) and the HTTP broker's. Run them once each:
//
//	go test -run '^$' -bench . -benchtime 20000x ./grpcapi/ ./e2e/

// BenchmarkGRPCSend16: the stock v5 producer, 16 goroutines sending 1 KiB
// messages (Send, synchronous) to a 4-queue topic on loopback over TLS.
// Reports msgs/s, p50/p99 send latency, process CPU per message and how
// many messages each store append (and, flush=sync, each fsync) carried.
// flush=async,broker=child runs the program in a child process, so the CPU
// splits: client-cpu-µs/msg is this process (the stock client), broker-cpu-
// µs/msg the child (Linux /proc).
func BenchmarkGRPCSend16(b *testing.B) {
	for _, flush := range []string{"sync", "async"} {
		b.Run("flush="+flush, func(b *testing.B) { benchSend(b, flush) })
	}
	b.Run("flush=async,broker=child", func(b *testing.B) { benchSendTo(b, startBenchChild(b, "real")) })
}

// BenchmarkGRPCSend16Null is BenchmarkGRPCSend16's workload against the
// null server (nullServer: the real routes, heartbeats, settings and TLS,
// SendMessage answered OK at once, nothing stored): the floor the stock
// client, grpc-go and this machine leave, whatever a broker does. Compare
// it with BenchmarkGRPCSend16/flush=async in the same run. broker=child
// serves it from a child process.
func BenchmarkGRPCSend16Null(b *testing.B) {
	b.Run("inproc", func(b *testing.B) {
		br, _ := startNull(b)
		benchSendTo(b, target{endpoint: br.GRPC})
	})
	b.Run("broker=child", func(b *testing.B) { benchSendTo(b, startBenchChild(b, "null")) })
}

func benchSend(b *testing.B, flush string) {
	br := rmqtest.StartConfig(b, server.Config{Flush: flush})
	benchSendTo(b, target{endpoint: br.GRPC, stats: br.Server.Core().Store().Stats, flush: flush})
}

// target is what a benchmark runs against: the endpoint; the store's stats
// when it is a real broker in this process; the CPU time of the broker's
// process when it is a child (nil: it is this process).
type target struct {
	endpoint  string
	stats     func() store.Stats
	flush     string
	brokerCPU func() (time.Duration, bool)
}

// benchSendTo runs the 16 senders against tg.
func benchSendTo(b *testing.B, tg target) {
	topic := "bench-send"
	p := newProducer(b, tg.endpoint, topic)
	body := make([]byte, 1024)
	if _, err := p.Send(context.Background(), &rmq.Message{Topic: topic, Body: body}); err != nil {
		b.Fatal(err)
	}
	const workers = 16
	lat := make([][]time.Duration, workers)
	var next atomic.Int64
	var st0 store.Stats
	if tg.stats != nil {
		st0 = tg.stats()
	}
	b.ReportAllocs()
	b.ResetTimer()
	m := tg.meter()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := p.Send(context.Background(), &rmq.Message{Topic: topic, Body: body}); err != nil {
					b.Errorf("send: %v", err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	m.stop()
	b.StopTimer()
	reportLatency(b, lat, el)
	m.report(b, b.N)
	if tg.stats == nil {
		return
	}
	// How many sends each store append and each fsync carried.
	st := tg.stats()
	if n := st.Appends - st0.Appends; n > 0 {
		b.ReportMetric(float64(st.Messages-st0.Messages)/float64(n), "msgs/append")
	}
	if n := st.Syncs - st0.Syncs; n > 0 && tg.flush == "sync" {
		b.ReportMetric(float64(st.SyncedRecords-st0.SyncedRecords)/float64(n), "msgs/fsync")
	}
}

// cpuMeter measures the CPU time of this process and, for a child broker,
// of the child over one benchmark's span.
type cpuMeter struct {
	tg          target
	cpu0, cpu   time.Duration // this process
	bcpu0, bcpu time.Duration // the child broker
	child       bool          // its CPU could be read
}

func (tg target) meter() *cpuMeter {
	m := &cpuMeter{tg: tg, cpu0: cpuclock.Self()}
	if tg.brokerCPU != nil {
		m.bcpu0, m.child = tg.brokerCPU()
	}
	return m
}

func (m *cpuMeter) stop() {
	m.cpu = cpuclock.Self() - m.cpu0
	if m.child {
		b, ok := m.tg.brokerCPU()
		m.bcpu, m.child = b-m.bcpu0, ok
	}
}

// report reports the process's CPU time per message (client and server
// together, steadier than msgs/s on a shared machine), or with a child
// broker this process's (the client's) and the child's apart.
func (m *cpuMeter) report(b *testing.B, msgs int) {
	if m.cpu <= 0 || msgs <= 0 {
		return
	}
	if m.tg.brokerCPU == nil {
		b.ReportMetric(float64(m.cpu.Microseconds())/float64(msgs), "cpu-µs/msg")
		return
	}
	b.ReportMetric(float64(m.cpu.Microseconds())/float64(msgs), "client-cpu-µs/msg")
	if m.child {
		b.ReportMetric(float64(m.bcpu.Microseconds())/float64(msgs), "broker-cpu-µs/msg")
	}
}

func reportLatency(b *testing.B, lat [][]time.Duration, el time.Duration) {
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

// prefill appends n 1 KiB messages to a 4-queue topic of the program.
func prefill(b testing.TB, br *rmqtest.Broker, topic string, n int) {
	if err := fill(br, topic, n); err != nil {
		b.Fatal(err)
	}
}

func fill(br *rmqtest.Broker, topic string, n int) error {
	if _, err := br.Server.Topics().Ensure(topic, 4); err != nil {
		return err
	}
	body := make([]byte, 1024)
	batch := make([]*store.Message, 0, 256)
	for i := 0; i < n; i++ {
		batch = append(batch, &store.Message{Topic: topic, QueueID: i % 4, Body: body, Properties: map[string]string{"UNIQ_KEY": fmt.Sprintf("bench-%d", i)}})
		if len(batch) == cap(batch) || i == n-1 {
			if err := br.Server.Core().Store().Append(batch...); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}

// BenchmarkGRPCPushConsume: b.N 1 KiB messages already in a 4-queue topic;
// one stock push consumer (20 consumption goroutines, batch 32 from the
// server's settings; each message acked by its own call) consumes them all.
// The same workload as e2e's BenchmarkPushConsume over remoting. Reports
// msgs/s.
func BenchmarkGRPCPushConsume(b *testing.B) {
	br := rmqtest.Start(b)
	topic := "bench-push"
	prefill(b, br, topic, b.N)
	var n, first atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	c, err := rmq.NewPushConsumer(config(br.GRPC, "bench-push-g"),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: func(*rmq.MessageView) rmq.ConsumerResult {
			v := n.Add(1)
			if v == 1 {
				first.Store(time.Now().UnixNano())
			}
			if v == int64(b.N) {
				once.Do(func() { close(done) })
			}
			return rmq.SUCCESS
		}}))
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.GracefulStop() }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", n.Load(), b.N)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	// Without the start (settings, the first assignment 1 s after Start):
	// the v5.1.4 push consumer still pauses 1 s whenever its 1,024-message
	// cache is full, which bounds this figure.
	if f := first.Load(); f > 0 && b.N > 1 {
		b.ReportMetric(float64(b.N-1)/time.Since(time.Unix(0, f)).Seconds(), "msgs/s-after-first")
	}
}

// BenchmarkGRPCReceiveAck32: b.N 1 KiB messages already in a 4-queue
// topic; one stock simple consumer, 16 goroutines each receiving batches of
// 32 (invisible 30 s, await 1 s) and acking every message (the client acks
// one per call).
//
// msgs/s is the broker's rate while messages are available: b.N divided
// by the time from the first receive to the last ack. Once the last
// message is acked, receives still long-polling for messages that will
// never come are cancelled, so no long-poll wait is counted (an idle
// receive would otherwise sit out the whole await). cpu-µs/msg is the
// process's CPU (client and server) over the same span per message.
func BenchmarkGRPCReceiveAck32(b *testing.B) {
	b.Run("inproc", func(b *testing.B) {
		br := rmqtest.Start(b)
		prefill(b, br, "bench-recv", b.N)
		benchReceiveAck(b, target{endpoint: br.GRPC}, "bench-recv")
	})
	b.Run("broker=child", func(b *testing.B) {
		benchReceiveAck(b, startBenchChild(b, "real", fmt.Sprintf("%s=%d", benchPrefillEnv, b.N)), "bench-recv")
	})
}

// BenchmarkGRPCReceiveAck32Null is BenchmarkGRPCReceiveAck32's workload
// against the null server (nullServer: every receive answers the same
// prebuilt batch of 32 real frames at once, every ack answers OK at once):
// the floor the stock client, grpc-go and this machine leave.
func BenchmarkGRPCReceiveAck32Null(b *testing.B) {
	b.Run("inproc", func(b *testing.B) {
		br, null := startNull(b)
		null.prepareBatch(b, br, "bench-recv")
		benchReceiveAck(b, target{endpoint: br.GRPC}, "bench-recv")
	})
	b.Run("broker=child", func(b *testing.B) {
		benchReceiveAck(b, startBenchChild(b, "null", benchBatchEnv+"=1"), "bench-recv")
	})
}

// benchReceiveAck runs the 16 receive+ack loops of one simple consumer
// against br until b.N messages were acked.
func benchReceiveAck(b *testing.B, tg target, topic string) {
	c := newSimpleConsumer(b, tg.endpoint, "bench-recv-g", topic, time.Second, nil)
	var done, receives, empty atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	m := tg.meter()
	start := time.Now()
	var end time.Time
	var endOnce sync.Once
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mvs, err := receive(ctx, c, 32, 30*time.Second)
				if ctx.Err() != nil {
					return // everything is acked: this long poll is not counted
				}
				if err != nil {
					b.Errorf("receive: %v", err)
					return
				}
				receives.Add(1)
				if len(mvs) == 0 {
					empty.Add(1)
				}
				for _, mv := range mvs {
					if err := c.Ack(ctx, mv); err != nil {
						if ctx.Err() != nil {
							return // b.N acked by others (the null server never runs dry)
						}
						b.Errorf("ack: %v", err)
						return
					}
					if done.Add(1) == int64(b.N) {
						endOnce.Do(func() {
							end = time.Now()
							m.stop()
							cancel()
						})
					}
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if end.IsZero() {
		b.Fatalf("acked %d of %d", done.Load(), b.N)
	}
	b.ReportMetric(float64(b.N)/end.Sub(start).Seconds(), "msgs/s")
	b.ReportMetric(float64(done.Load())/float64(max(receives.Load(), 1)), "msgs/receive")
	b.ReportMetric(float64(empty.Load()), "empty-receives")
	m.report(b, b.N)
}
