package store

import (
	"fmt"
	"runtime"
	"testing"
)

// The store at RocketMQ queue counts (issue 24, targets at 100,000 queues:
// Close < 100 ms, Open < 1 s, heap < 64 MiB plus the documented per-queue
// budget). Every row holds 100,000 records of 1 KiB, one per queue at
// queues=100000 and all in one queue at queues=1 (the reference: what the
// log itself costs). Each writes 100 MB or more, so they run only when named:
//
//	go test -run '^$' -bench 'CloseQueues|OpenQueues' -benchtime 3x ./store
//
// heapMiB is the live heap after a GC with the store open; heapB/queue, at
// queues=100000, is what it takes above a store of the same log in one
// queue, per queue.

const scaleRecords = 100_000

var scaleCounts = []int{1, scaleRecords}

// fillQueues appends scaleRecords records of 1 KiB spread round-robin over
// nq queues (topic "bench").
func fillQueues(b *testing.B, s *Store, nq int) {
	b.Helper()
	batch := make([]*Message, 0, 100)
	for i := range scaleRecords {
		batch = append(batch, benchMsg(i%nq))
		if len(batch) == cap(batch) || i == scaleRecords-1 {
			if err := s.Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if got := s.Stats().Queues; got != nq {
		b.Fatalf("queues = %d, want %d", got, nq)
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// scaleHeap measures the live heap with a store of nq queues open, either
// just filled or (reopen) closed after the fill and opened again.
func scaleHeap(b *testing.B, nq int, reopen bool) uint64 {
	dir := b.TempDir()
	s := openT(b, dir, Options{Sync: SyncNone})
	fillQueues(b, s, nq)
	if reopen {
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		s = openT(b, dir, Options{Sync: SyncNone})
	}
	h := liveHeap()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return h
}

// reportHeap reports the live heap now and, above one queue, what it takes
// per queue above ref (the same log in one queue).
func reportHeap(b *testing.B, nq int, ref uint64) {
	h := liveHeap()
	b.ReportMetric(float64(h)/(1<<20), "heapMiB")
	if nq > 1 {
		b.ReportMetric(float64(int64(h)-int64(ref))/float64(nq), "heapB/queue")
	}
}

// BenchmarkCloseQueues times Close of a store that has just taken its
// records (every queue changed since the last checkpoint; Close fsyncs the
// log, writes the index and the checkpoint), and reports the live heap
// before it.
func BenchmarkCloseQueues(b *testing.B) {
	if !explicitlySelected("CloseQueues") {
		b.Skip("writes 100 MB per op; select explicitly with -bench=CloseQueues")
	}
	for _, nq := range scaleCounts {
		b.Run(fmt.Sprintf("queues=%d", nq), func(b *testing.B) {
			var ref uint64
			if nq > 1 {
				ref = scaleHeap(b, 1, false)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s := openT(b, b.TempDir(), Options{Sync: SyncNone})
				fillQueues(b, s, nq)
				reportHeap(b, nq, ref)
				b.StartTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/1e6, "ms/op")
		})
	}
}

// BenchmarkOpenQueues times Open of a cleanly closed store (prepared once),
// and reports the live heap with it open.
func BenchmarkOpenQueues(b *testing.B) {
	if !explicitlySelected("OpenQueues") {
		b.Skip("writes 100 MB; select explicitly with -bench=OpenQueues")
	}
	for _, nq := range scaleCounts {
		b.Run(fmt.Sprintf("queues=%d", nq), func(b *testing.B) {
			var ref uint64
			if nq > 1 {
				ref = scaleHeap(b, 1, true)
			}
			dir := b.TempDir()
			s := openT(b, dir, Options{Sync: SyncNone})
			fillQueues(b, s, nq)
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := openT(b, dir, Options{Sync: SyncNone})
				b.StopTimer()
				if got := s.Stats().Queues; got != nq {
					b.Fatalf("queues = %d, want %d", got, nq)
				}
				if i == b.N-1 {
					reportHeap(b, nq, ref)
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
}
