package grpcapi_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/internal/cpuclock"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// BenchmarkGRPCACLPaired is BenchmarkGRPCACL's two workloads with both
// sides in one process at once: a broker with ACL off served by a client
// that does not sign, and a broker with ACL on served by a client that
// signs as the benchmark's user, their messages alternated in
// 2×pairedSlices slices (the order swapped every slice). The drift of a
// shared machine's load and disk, which moves CPU per message from one run
// to the next by more than access control costs, reaches both sides alike.
// off- and on-cpu-µs/msg are the whole process's CPU over each side's
// slices (client and broker: the v5 client's own signing is in on); on/off
// is their ratio. The control serves both sides with ACL off and no
// signing: how far its on/off lands from 1 is what the method cannot tell
// apart here.
//
//	go test -run '^$' -bench 'GRPCACLPaired' -benchtime 20000x -count 6 ./grpcapi/
func BenchmarkGRPCACLPaired(b *testing.B) {
	for _, w := range []string{"send", "receive-ack"} {
		for _, control := range []bool{false, true} {
			name := w
			if control {
				name += ",control"
			}
			b.Run(name, func(b *testing.B) { benchGRPCACLPaired(b, w, !control) })
		}
	}
}

// pairedSlices is how many slices of its messages each side of
// BenchmarkGRPCACLPaired takes.
const pairedSlices = 20

func benchGRPCACLPaired(b *testing.B, workload string, on bool) {
	var sides [2]func(n int)
	for i, side := range []bool{false, on} {
		br, cr := pairedBroker(b, side)
		if workload == "send" {
			sides[i] = pairedSender(b, br, cr)
		} else {
			sides[i] = pairedReceiver(b, br, cr, b.N)
		}
	}
	var cpu [2]time.Duration
	b.ResetTimer()
	for i := range pairedSlices {
		n := b.N / pairedSlices
		if i < b.N%pairedSlices {
			n++
		}
		for k := range 2 {
			w := (i + k) % 2 // off first in even slices, on first in odd ones
			cpu0 := cpuclock.Self()
			sides[w](n)
			cpu[w] += cpuclock.Self() - cpu0
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu[0].Microseconds())/float64(b.N), "off-cpu-µs/msg")
	b.ReportMetric(float64(cpu[1].Microseconds())/float64(b.N), "on-cpu-µs/msg")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "on/off")
}

// pairedBroker is the program with flush=sync and ACL off or on, and the
// credentials its client signs with (none when off).
func pairedBroker(b *testing.B, on bool) (*rmqtest.Broker, credentials.SessionCredentials) {
	cfg := server.Config{Flush: "sync"}
	if !on {
		return rmqtest.StartConfig(b, cfg), credentials.SessionCredentials{}
	}
	c, err := acl.Parse([]byte(benchACLDoc))
	require.NoError(b, err)
	cfg.ACL, err = acl.New(c, acl.Options{})
	require.NoError(b, err)
	return rmqtest.StartConfig(b, cfg), credentials.SessionCredentials{AccessKey: "bench", AccessSecret: "bench-secret"}
}

// pairedSender is a slice of BenchmarkGRPCSend16's workload: n 1 KiB sends
// from 16 goroutines of one producer.
func pairedSender(b *testing.B, br *rmqtest.Broker, cr credentials.SessionCredentials) func(int) {
	const topic = "bench-send"
	p, err := rmq.NewProducer(configCreds(br.GRPC, "", cr), rmq.WithTopics(topic))
	require.NoError(b, err)
	require.NoError(b, startWithin(b, p.Start))
	b.Cleanup(func() { _ = p.GracefulStop() })
	body := make([]byte, 1024)
	return func(n int) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					if _, err := p.Send(context.Background(), &rmq.Message{Topic: topic, Body: body}); err != nil {
						b.Errorf("send: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// pairedReceiver is a slice of BenchmarkGRPCReceiveAck32's workload: 16
// goroutines of one simple consumer receive (up to 32 at a time) and ack
// exactly n of the messages prefilled for all the slices.
func pairedReceiver(b *testing.B, br *rmqtest.Broker, cr credentials.SessionCredentials, total int) func(int) {
	const topic, group = "bench-recv", "bench-recv-g"
	prefill(b, br, topic, total)
	c, err := rmq.NewSimpleConsumer(configCreds(br.GRPC, group, cr), rmq.WithSimpleAwaitDuration(time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	require.NoError(b, err)
	require.NoError(b, startWithin(b, c.Start))
	b.Cleanup(func() { _ = c.GracefulStop() })
	return func(n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var left atomic.Int64 // messages of this slice not yet asked for
		left.Store(int64(n))
		take := func() int64 {
			for {
				l := left.Load()
				if l <= 0 {
					return 0
				}
				if k := min(l, 32); left.CompareAndSwap(l, l-k) {
					return k
				}
			}
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for k := take(); k > 0; k = take() {
					mvs, err := receive(ctx, c, int32(k), 30*time.Second)
					if err != nil || int64(len(mvs)) > k {
						b.Errorf("receive %d: %d messages, %v", k, len(mvs), err)
						return
					}
					left.Add(k - int64(len(mvs))) // asked for more than came: this goroutine asks again
					for _, mv := range mvs {
						if err := c.Ack(ctx, mv); err != nil {
							b.Errorf("ack: %v", err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		if l := left.Load(); l > 0 && !b.Failed() {
			b.Fatalf("slice ended with %d of %d messages not received", l, n)
		}
	}
}
