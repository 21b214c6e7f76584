//go:build !race

package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/brokercore/brokercore/examples/rocketmq/internal/cpuclock"
)

// BenchmarkRemotingACLChildPaired is BenchmarkRemotingACL's send to a broker
// in a child process with both sides running at once: a child broker with
// ACL off sent to by a v2 producer that does not sign, and one with ACL on
// sent to by a producer that signs (the official client's own signing, as
// a user with ACL on pays it), their sends alternated in 2×pairedChunks
// slices (the order swapped every slice), both children on the same disk.
// The drift of a shared machine's load and disk, which moves the broker's
// CPU per message from one run to the next by more than access control
// costs, reaches both sides alike. off- and on-broker-cpu-µs/msg are each
// child's CPU over its own slices, on/off their ratio; off- and
// on-client-cpu-µs/msg this process's (the clients'). The control runs ACL
// off in both children and signs in neither: how far its on/off lands from
// 1 is what the method cannot tell apart on this machine.
//
//	go test -run '^$' -bench 'RemotingACLChildPaired' -benchtime 20000x -count 6 ./e2e/
func BenchmarkRemotingACLChildPaired(b *testing.B) {
	for _, flush := range []string{"sync", "async"} {
		for _, control := range []bool{false, true} {
			name := "flush=" + flush
			if control {
				name += ",control"
			}
			b.Run(name, func(b *testing.B) { benchACLChildPaired(b, flush, !control) })
		}
	}
}

// childSide is one side of BenchmarkRemotingACLChildPaired: a child broker
// and the producer that sends to it.
type childSide struct {
	c *child
	p rocketmq.Producer
}

func benchACLChildPaired(b *testing.B, flush string, on bool) {
	var sides [2]childSide
	for i, side := range []bool{false, on} {
		sides[i] = startChildSide(b, flush, side)
	}
	var bcpu, ccpu [2]time.Duration
	body := make([]byte, 1024)
	b.ResetTimer()
	alternateSlices(b, func(w, n int) {
		pid := sides[w].c.cmd.Process.Pid
		b0, ok0 := cpuclock.Process(pid)
		c0 := cpuclock.Self()
		sendSlice(b, sides[w].p, body, n)
		ccpu[w] += cpuclock.Self() - c0
		b1, ok1 := cpuclock.Process(pid)
		if !ok0 || !ok1 {
			b.Fatal("cpuclock: no CPU time for the child broker")
		}
		bcpu[w] += b1 - b0
	})
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(per(bcpu[0]), "off-broker-cpu-µs/msg")
	b.ReportMetric(per(bcpu[1]), "on-broker-cpu-µs/msg")
	b.ReportMetric(float64(bcpu[1])/float64(bcpu[0]), "on/off")
	b.ReportMetric(per(ccpu[0]), "off-client-cpu-µs/msg")
	b.ReportMetric(per(ccpu[1]), "on-client-cpu-µs/msg")
	for i := range sides {
		sides[i].c.stop(b)
	}
}

// startChildSide starts a child broker with flush and ACL off or on, and a
// producer for it that signs when on.
func startChildSide(b *testing.B, flush string, on bool) childSide {
	ns, env := aclChildEnv(b, flush, on, false)
	var cr primitive.Credentials
	if on {
		cr = benchCreds
	}
	s := childSide{c: startChild(b, "broker", env...)}
	s.p = newProducer(b, ns, producer.WithCredentials(cr))
	sendSync(b, s.p, primitive.NewMessage("bench-send", make([]byte, 1024)))
	return s
}

// sendSlice sends n 1 KiB messages with 16 goroutines of p.
func sendSlice(b *testing.B, p rocketmq.Producer, body []byte, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				r, err := p.SendSync(context.Background(), primitive.NewMessage("bench-send", body))
				if err != nil || r.Status != primitive.SendOK {
					b.Errorf("send: %v %v", err, r)
					return
				}
			}
		})
	}
	wg.Wait()
}
