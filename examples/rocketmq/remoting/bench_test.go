package remoting_test

import (
	"bufio"
	"encoding/binary"
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
		pending sync.Map // opaque -> chan *remoting.Command
	)
	rdone := make(chan struct{})
	go func() {
		defer close(rdone)
		r := bufio.NewReader(c)
		for {
			f, err := remoting.ReadFrame(r, remoting.DefaultMaxFrame)
			if err != nil {
				return
			}
			resp, err := remoting.Decode(f)
			if err != nil {
				b.Error(err)
				return
			}
			if ch, ok := pending.LoadAndDelete(resp.Opaque); ok {
				ch.(chan *remoting.Command) <- resp
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
			ch := make(chan *remoting.Command, 1)
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				req := sendReqBody("bench", int(n%4), body)
				req.Opaque = int32(n)
				f, _ := remoting.Encode(req)
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
				if resp := <-ch; resp.Code != remoting.Success {
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

// clientSendHeader is the JSON header of one official-client send, as
// rocketmq-client-go v2 writes it.
const clientSendHeader = `{"code":10,"language":"GO","version":317,"opaque":12345,"flag":0,"remark":"","extFields":` +
	`{"batch":"false","bname":"broker-a","bornTimestamp":"1764590000123","defaultTopic":"TBW102",` +
	`"defaultTopicQueueNums":"4","flag":"0","maxReconsumeTimes":"0","producerGroup":"pg-1",` +
	`"properties":"UNIQ_KEY\u0001AC11000100002A9F00000000000004D2\u0002WAIT\u0001true\u0002",` +
	`"queueId":"2","reconsumeTimes":"0","sysFlag":"0","topic":"bench-send","unitMode":"false"}}`

// BenchmarkDecodeClientSend decodes the official client's send frame
// (header and a 1 KiB body).
func BenchmarkDecodeClientSend(b *testing.B) {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(clientSendHeader)))
	frame = append(frame, clientSendHeader...)
	frame = append(frame, make([]byte, 1024)...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := remoting.Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
}
