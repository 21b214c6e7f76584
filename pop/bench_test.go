package pop

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
)

// BenchmarkPopAck measures the Pop+Ack round trip on the real store
// (SyncNone): 16 concurrent consumers pop (AllQueues for 8 queues) and ack
// every message one by one. One op = one message popped and acked.
func BenchmarkPopAck(b *testing.B) {
	for _, queues := range []int{1, 8} {
		for _, batch := range []int{1, 32} {
			b.Run(fmt.Sprintf("queues=%d/batch=%d/consumers=16", queues, batch), func(b *testing.B) {
				benchPopAck(b, queues, batch, 16)
			})
		}
	}
}

func benchPopAck(b *testing.B, queues, batch, consumers int) {
	var hook atomic.Pointer[Service]
	st := realStore(b, b.TempDir(), &hook)
	defer st.Close()
	n := b.N
	for q := range queues {
		per := n / queues
		if q < n%queues {
			per++
		}
		for per > 0 {
			k := min(per, 1024)
			msgs := make([]*store.Message, k)
			for i := range msgs {
				msgs[i] = &store.Message{Topic: "T", QueueID: q, Body: make([]byte, 64)}
			}
			if err := st.Append(msgs...); err != nil {
				b.Fatal(err)
			}
			per -= k
		}
	}
	s := New(st, Options{})
	hook.Store(s)
	defer s.Close()
	qid := 0
	if queues > 1 {
		qid = AllQueues
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acked atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := Request{Group: "g", Topic: "T", ClientID: fmt.Sprint("c", c), QueueID: qid, Max: batch,
				Invisible: time.Minute, Poll: time.Second}
			for acked.Load() < int64(n) {
				r, err := s.Pop(ctx, req)
				if err != nil {
					return // ctx cancelled: all done
				}
				for _, d := range r.Messages {
					if err := s.Ack(d.Handle); err != nil {
						b.Error(err)
						return
					}
				}
				if acked.Add(int64(len(r.Messages))) >= int64(n) {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if acked.Load() != int64(n) {
		b.Fatalf("acked %d of %d", acked.Load(), n)
	}
	b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
	if testing.Verbose() {
		b.Logf("%+v", s.Stats())
	}
}

// BenchmarkFIFORepopSameAttempt measures a FIFO retry with the same attempt
// id: the same 32-message batch again with fresh handles.
func BenchmarkFIFORepopSameAttempt(b *testing.B) {
	var hook atomic.Pointer[Service]
	st := realStore(b, b.TempDir(), &hook)
	defer st.Close()
	appendN(b, st, "T", 0, 32)
	s := New(st, Options{})
	defer s.Close()
	req := Request{Group: "g", Topic: "T", ClientID: "c", QueueID: 0, Max: 32, Invisible: time.Hour, FIFO: true, AttemptID: "X"}
	ctx := context.Background()
	if r, err := s.Pop(ctx, req); err != nil || len(r.Messages) != 32 {
		b.Fatal(err, len(r.Messages))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := s.Pop(ctx, req)
		if err != nil || len(r.Messages) != 32 || r.Messages[0].Attempts != 1 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "repops/s")
}
