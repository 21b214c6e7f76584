package pop

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/cpuclock"
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

// benchBody is the body size of the cost-per-message benchmarks (issue 15).
const benchBody = 1024

// benchStore is a SyncNone store with perQueue messages of benchBody
// bytes in each of queues queues of topic "T".
func benchStore(b *testing.B, queues, perQueue int) *store.Store {
	b.Helper()
	var hook atomic.Pointer[Service]
	st := realStore(b, b.TempDir(), &hook)
	b.Cleanup(func() { st.Close() })
	fillQueues(b, st, queues, perQueue)
	return st
}

func fillQueues(b *testing.B, st *store.Store, queues, perQueue int) {
	b.Helper()
	body := make([]byte, benchBody)
	for q := range queues {
		for left := perQueue; left > 0; {
			k := min(left, 1024)
			msgs := make([]*store.Message, k)
			for i := range msgs {
				msgs[i] = &store.Message{Topic: "T", QueueID: q, Body: body}
			}
			if err := st.Append(msgs...); err != nil {
				b.Fatal(err)
			}
			left -= k
		}
	}
}

// popAckLoop pops batches of 32 from queue (or AllQueues) and acks every
// message until n were acked; it reports msgs/s.
func popAckLoop(b *testing.B, s *Service, queue, n int) {
	b.Helper()
	popAckLoopWith(b, s, queue, n, false)
}

// popAckLoopWith is popAckLoop; with copied, each ack gets a copy of the
// handle string, as a handle that came over a network would be (no
// recognition of the pop's own strings: the full decode and MAC check).
func popAckLoopWith(b *testing.B, s *Service, queue, n int, copied bool) {
	b.Helper()
	ctx := context.Background()
	req := Request{Group: "g", Topic: "T", ClientID: "c", QueueID: queue, Max: MaxBatch, Invisible: time.Minute}
	runtime.GC() // the fill's garbage is not the loop's cost
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuclock.Self()
	for got := 0; got < n; {
		r, err := s.Pop(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Messages) == 0 {
			b.Fatalf("empty pop after %d of %d", got, n)
		}
		for _, d := range r.Messages {
			h := d.Handle
			if copied {
				h = strings.Clone(h)
			}
			if err := s.Ack(h); err != nil {
				b.Fatal(err)
			}
		}
		got += len(r.Messages)
	}
	el, cpu := time.Since(start), cpuclock.Self()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/msg")
	}
}

// BenchmarkPopAckBatch32 is pop+ack of 1 KiB messages, batch 32, one
// consumer, one queue, SyncNone store. One op = one message popped and
// acked.
func BenchmarkPopAckBatch32(b *testing.B) {
	st := benchStore(b, 1, b.N)
	s := New(st, Options{})
	defer s.Close()
	popAckLoop(b, s, 0, b.N)
}

// BenchmarkPopAckBatch32CopiedHandles is BenchmarkPopAckBatch32 acking
// copies of the handles (the full path of a handle from elsewhere).
func BenchmarkPopAckBatch32CopiedHandles(b *testing.B) {
	st := benchStore(b, 1, b.N)
	s := New(st, Options{})
	defer s.Close()
	popAckLoopWith(b, s, 0, b.N, true)
}

// BenchmarkPopAckInFlight is BenchmarkPopAckBatch32 with inflight messages
// popped earlier at the head of the same queue and never acked: the
// committed offset is stuck below all of them, so the queue's state spans
// the whole backlog. It reports the heap each in-flight message costs.
func BenchmarkPopAckInFlight(b *testing.B) {
	for _, inflight := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			st := benchStore(b, 1, inflight)
			s := New(st, Options{})
			defer s.Close()
			before := heapInUse()
			hold := Request{Group: "g", Topic: "T", ClientID: "holder", QueueID: 0, Max: MaxBatch, Invisible: time.Hour}
			for held := 0; held < inflight; {
				r, err := s.Pop(context.Background(), hold)
				if err != nil || len(r.Messages) == 0 {
					b.Fatal(err, held)
				}
				held += len(r.Messages)
			}
			perMsg := float64(heapInUse()-before) / float64(max(inflight, 1))
			fillQueues(b, st, 1, b.N)
			popAckLoop(b, s, 0, b.N)
			if inflight > 0 {
				b.ReportMetric(perMsg, "heapB/inflight")
			}
		})
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkPopAckQueues is pop+ack batch 32 over 1 queue and over 256
// queues popped with AllQueues (rotation), the same total of messages.
func BenchmarkPopAckQueues(b *testing.B) {
	for _, queues := range []int{1, 256} {
		b.Run(fmt.Sprintf("queues=%d", queues), func(b *testing.B) {
			per := (b.N + queues - 1) / queues
			st := benchStore(b, queues, per)
			s := New(st, Options{})
			defer s.Close()
			q := 0
			if queues > 1 {
				q = AllQueues
			}
			popAckLoop(b, s, q, per*queues)
		})
	}
}

// staticSource is a Source over prebuilt messages that reads without
// copying: it leaves pop's own cost per message, without the store's.
type staticSource struct {
	msgs []*store.Message
}

func newStaticSource(n int) *staticSource {
	s := &staticSource{msgs: make([]*store.Message, n)}
	body := make([]byte, benchBody)
	for i := range s.msgs {
		s.msgs[i] = &store.Message{Topic: "T", QueueOffset: int64(i), Body: body}
	}
	return s
}

func (s *staticSource) Read(_ string, q int, off int64, max int) ([]*store.Message, error) {
	if q != 0 || off >= int64(len(s.msgs)) {
		return nil, nil
	}
	return s.msgs[off:min(off+int64(max), int64(len(s.msgs)))], nil
}
func (s *staticSource) MinOffset(string, int) int64 { return 0 }
func (s *staticSource) MaxOffset(_ string, q int) int64 {
	if q != 0 {
		return 0
	}
	return int64(len(s.msgs))
}
func (s *staticSource) Queues(string) []int { return []int{0} }

// BenchmarkPopAckBatch32NoStore is BenchmarkPopAckBatch32 over
// staticSource: pop's own cost per message popped and acked (handles,
// in-flight table, commits), without the store's reads.
func BenchmarkPopAckBatch32NoStore(b *testing.B) {
	s := New(newStaticSource(b.N), Options{})
	defer s.Close()
	popAckLoop(b, s, 0, b.N)
}
