package remoting_test

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// BenchmarkRawPipelinedSend is the broker's own ceiling for single-message
// SEND_MESSAGE (1 KiB, flush=async): 4 connections, each with up to 64
// requests in flight, no client library in the way.
func BenchmarkRawPipelinedSend(b *testing.B) {
	br := rmqtest.StartConfig(b, server.Config{Flush: "async"})
	body := make([]byte, 1024)
	frame := func(op int32) []byte {
		c := sendReqBody("bench", int(op%4), body)
		c.Opaque = op
		f, _ := remoting.Encode(c)
		return f
	}
	const conns, window = 4, 64
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", br.Broker)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			w := bufio.NewWriter(c)
			inflight := 0
			for {
				for inflight < window {
					n := next.Add(1)
					if n > int64(b.N) {
						break
					}
					w.Write(frame(int32(n)))
					inflight++
				}
				w.Flush()
				if inflight == 0 {
					return
				}
				f, err := remoting.ReadFrame(r, remoting.DefaultMaxFrame)
				if err != nil {
					b.Error(err)
					return
				}
				if resp, err := remoting.Decode(f); err != nil || resp.Code != remoting.Success {
					b.Errorf("send: %v %+v", err, resp)
					return
				}
				inflight--
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
