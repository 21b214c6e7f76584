package store

import (
	"fmt"
	"runtime"
	"testing"
)

// The store at RocketMQ queue counts (issue 24, targets at 100,000 queues:
// Close < 100 ms, Open < 1 s, heap < 64 MiB plus the documented per-queue
// budget). Each writes a 100 MB log, so they run only when named:
//
//	go test -run '^$' -bench 'CloseQueues|OpenQueues' -benchtime 3x -count 5 ./store

const scaleQueues = 100_000

// fillQueues appends one 1 KiB record to each of nq queues (topic "bench").
func fillQueues(b *testing.B, s *Store, nq int) {
	b.Helper()
	batch := make([]*Message, 0, 100)
	for q := 0; q < nq; q++ {
		batch = append(batch, benchMsg(q))
		if len(batch) == cap(batch) || q == nq-1 {
			if err := s.Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// reportHeap reports the live heap (heapMiB) and what it grew by over base,
// per queue (heapB/queue).
func reportHeap(b *testing.B, base uint64, nq int) {
	h := liveHeap()
	b.ReportMetric(float64(h)/(1<<20), "heapMiB")
	b.ReportMetric(float64(int64(h)-int64(base))/float64(nq), "heapB/queue")
}

// BenchmarkCloseQueues times Close of a store that has just taken one 1 KiB
// record in each of 100,000 queues (every queue dirty since the last
// checkpoint), and reports the live heap with that store open.
func BenchmarkCloseQueues(b *testing.B) {
	if !explicitlySelected("CloseQueues") {
		b.Skip("writes 100 MB per op; select explicitly with -bench=CloseQueues")
	}
	nq := scaleQueues
	b.Run(fmt.Sprintf("queues=%d", nq), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := b.TempDir()
			base := liveHeap()
			s := openT(b, dir, Options{Sync: SyncNone})
			fillQueues(b, s, nq)
			if got := s.Stats().Queues; got != nq {
				b.Fatalf("queues = %d, want %d", got, nq)
			}
			reportHeap(b, base, nq)
			b.StartTimer()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed())/float64(b.N)/1e6, "ms/op")
	})
}

// BenchmarkOpenQueues times Open of a cleanly closed store of 100,000
// queues holding one 1 KiB record each (prepared once), and reports the live
// heap with it open.
func BenchmarkOpenQueues(b *testing.B) {
	if !explicitlySelected("OpenQueues") {
		b.Skip("writes 100 MB; select explicitly with -bench=OpenQueues")
	}
	nq := scaleQueues
	b.Run(fmt.Sprintf("queues=%d", nq), func(b *testing.B) {
		dir := b.TempDir()
		s := openT(b, dir, Options{Sync: SyncNone})
		fillQueues(b, s, nq)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		base := liveHeap()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s := openT(b, dir, Options{Sync: SyncNone})
			b.StopTimer()
			if got := s.Stats().Queues; got != nq {
				b.Fatalf("queues = %d, want %d", got, nq)
			}
			if i == b.N-1 {
				reportHeap(b, base, nq)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed())/float64(b.N)/1e6, "ms/op")
	})
}
