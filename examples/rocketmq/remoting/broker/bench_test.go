package broker_test

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
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
		f, _ := wire.Encode(c)
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
				f, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
				if err != nil {
					b.Error(err)
					return
				}
				if resp, err := wire.Decode(f); err != nil || resp.Code != wire.Success {
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

// BenchmarkRawSyncSend16 is the official client's send pattern with none of
// its CPU: 16 goroutines each send one SEND_MESSAGE (1 KiB, flush=async)
// and wait for its answer, over one shared connection; a request is written
// under a lock in four writes (length, header length, header, body) as
// rocketmq-client-go writes it, and one reader goroutine hands each answer
// to its sender. What separates it from e2e's BenchmarkSyncSend16 is the
// client's own work.
func BenchmarkRawSyncSend16(b *testing.B) {
	br := rmqtest.StartConfig(b, server.Config{Flush: "async"})
	body := make([]byte, 1024)
	c, err := net.Dial("tcp", br.Broker)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const workers = 16
	var (
		wmu     sync.Mutex
		pending sync.Map // opaque -> chan *wire.Command
	)
	rdone := make(chan struct{})
	go func() {
		defer close(rdone)
		r := bufio.NewReader(c)
		for {
			f, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
			if err != nil {
				return
			}
			resp, err := wire.Decode(f)
			if err != nil {
				b.Error(err)
				return
			}
			if ch, ok := pending.LoadAndDelete(resp.Opaque); ok {
				ch.(chan *wire.Command) <- resp
			}
		}
	}()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := make(chan *wire.Command, 1)
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				req := sendReqBody("bench", int(n%4), body)
				req.Opaque = int32(n)
				f, _ := wire.Encode(req)
				pending.Store(req.Opaque, ch)
				wmu.Lock()
				hl := int(f[7]) | int(f[6])<<8 | int(f[5])<<16
				for _, part := range [][]byte{f[:4], f[4:8], f[8 : 8+hl], f[8+hl:]} {
					if _, err := c.Write(part); err != nil {
						wmu.Unlock()
						b.Error(err)
						return
					}
				}
				wmu.Unlock()
				if resp := <-ch; resp.Code != wire.Success {
					b.Errorf("send: %+v", resp)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.StopTimer()
	c.Close()
	<-rdone
}
