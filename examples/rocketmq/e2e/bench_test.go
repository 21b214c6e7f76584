//go:build !race

package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/brokercore/brokercore/examples/rocketmq/internal/cpuclock"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/store"
)

// BenchmarkSyncSend16: the official producer, 16 goroutines sending 1 KiB
// messages synchronously to a 4-queue topic on loopback, under flush=sync
// (each send fsynced by the store's group commit) and flush=async (fsync
// every second). Reports msgs/s, p50/p99 send latency and the CPU time per
// message. These run at Go's default collector target, the test process's;
// flush=async,gogc=400 runs at the program's (server.DefaultGCPercent),
// client and broker alike. flush=async,broker=child runs the broker in a
// child process that starts as the program does (its collector target
// too), so the CPU splits exactly: client-cpu-µs/msg is this process (the
// official client and the benchmark's goroutines), broker-cpu-µs/msg the
// child (Linux /proc), with the broker's read and write system calls per
// message (the store's appends count as writes). E2E_BROKER_CPUPROFILE=file
// writes the child's CPU profile.
func BenchmarkSyncSend16(b *testing.B) {
	for _, flush := range []string{"sync", "async"} {
		b.Run("flush="+flush, func(b *testing.B) {
			br := rmqtest.StartConfig(b, server.Config{Flush: flush})
			benchSyncSend(b, br.NameSrv, nil)
		})
	}
	b.Run("flush=async,gogc=400", func(b *testing.B) {
		defer withGCPercent(server.DefaultGCPercent)()
		br := rmqtest.StartConfig(b, server.Config{Flush: "async"})
		benchSyncSend(b, br.NameSrv, nil)
	})
	b.Run("flush=async,broker=child", func(b *testing.B) {
		benchChildSend(b, "broker", "E2E_DIR="+b.TempDir(), "E2E_FLUSH=async")
	})
}

// withGCPercent runs the rest of a benchmark at the collector target the
// program runs with (server.DefaultGCPercent), client and broker alike
// (one process), and returns the restore.
func withGCPercent(p int) func() {
	prev := server.SetGCPercent(p)
	return func() { server.SetGCPercent(prev) }
}

// BenchmarkSyncSend16Null is BenchmarkSyncSend16's workload against the
// null broker (nullBroker: the real name server and remoting server, every
// send answered SUCCESS at once, nothing stored): the floor the official
// client and this machine leave, whatever a broker does. Compare it with
// BenchmarkSyncSend16/flush=async in the same run. The ",wal" row adds the
// one thing every broker on brokercore's store does per send: a
// tidwall/wal write of the send's record (nullLog), so no such broker can
// beat it. broker=child runs the null broker in a child process (client
// CPU in its own process).
func BenchmarkSyncSend16Null(b *testing.B) {
	b.Run("inproc", func(b *testing.B) {
		benchSyncSend(b, startNullT(b).NameSrv, nil)
	})
	b.Run("inproc,gogc=400", func(b *testing.B) {
		defer withGCPercent(server.DefaultGCPercent)()
		benchSyncSend(b, startNullT(b).NameSrv, nil)
	})
	b.Run("inproc,gogc=400,wal", func(b *testing.B) {
		defer withGCPercent(server.DefaultGCPercent)()
		benchSyncSend(b, startNullLogT(b, b.TempDir()).NameSrv, nil)
	})
	b.Run("broker=child", func(b *testing.B) { benchChildSend(b, "nullbroker") })
}

// benchChildSend runs the 16 senders against a broker of the given child
// kind, reporting its CPU and its read and write system calls per message.
func benchChildSend(b *testing.B, kind string, env ...string) {
	ns := freeAddr(b)
	env = append(env, "E2E_NS="+ns, "E2E_BR="+freeAddr(b), "E2E_CPUPROFILE="+os.Getenv("E2E_BROKER_CPUPROFILE"))
	c := startChild(b, kind, env...)
	pid := c.cmd.Process.Pid
	r0, w0 := procSyscalls(pid)
	benchSyncSend(b, ns, func() (time.Duration, bool) { return cpuclock.Process(pid) })
	if r1, w1 := procSyscalls(pid); r1 > 0 && b.N >= 1000 {
		b.ReportMetric(float64(r1-r0)/float64(b.N), "broker-reads/msg")
		b.ReportMetric(float64(w1-w0)/float64(b.N), "broker-writes/msg")
	}
	c.stop(b)
}

func newBenchMessage() *primitive.Message {
	return primitive.NewMessage("bench-send", benchBody)
}

var benchBody = make([]byte, 1024)

// benchSyncSend runs the 16 senders against the name server ns; brokerCPU,
// when not nil, reads the CPU time of a broker in another process.
func benchSyncSend(b *testing.B, ns string, brokerCPU func() (time.Duration, bool)) {
	p := newProducer(b, ns)
	body := make([]byte, 1024)
	sendSync(b, p, primitive.NewMessage("bench-send", body)) // route, connection, topic
	const workers = 16
	lat := make([][]time.Duration, workers)
	var next atomic.Int64
	b.ResetTimer()
	cpu0 := cpuclock.Self()
	var bcpu0 time.Duration
	if brokerCPU != nil {
		bcpu0, _ = brokerCPU()
	}
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
	cpu := cpuclock.Self() - cpu0
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) == 0 {
		return
	}
	n := float64(len(all))
	b.ReportMetric(n/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	if brokerCPU == nil {
		b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/msg")
		return
	}
	b.ReportMetric(float64(cpu.Microseconds())/n, "client-cpu-µs/msg")
	if bcpu, ok := brokerCPU(); ok {
		b.ReportMetric(float64((bcpu-bcpu0).Microseconds())/n, "broker-cpu-µs/msg")
	}
}

// procSyscalls is the number of read and write system calls process pid
// made (Linux /proc/pid/io; 0, 0 elsewhere).
func procSyscalls(pid int) (reads, writes int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
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
