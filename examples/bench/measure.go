package main

import (
	"crypto/rand"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// bodySize is the message body of every append and consume workload: 1 KiB.
const bodySize = 1024

// sample is what one run of one case measured. msgs and bytes count message
// bodies only, so every system is credited with the same payload whatever
// its framing; disk is what the run left on disk, framing included.
type sample struct {
	msgs    int64
	bytes   int64
	elapsed time.Duration
	cpu     time.Duration   // process CPU time spent in the run
	lat     []time.Duration // one entry per operation (the row says what an operation is)
	disk    int64           // bytes on disk after the run, 0 = not measured
	heap    int64           // live heap the system took, 0 = not measured
	fsyncs  int64           // fsyncs the run made, 0 = not counted
	note    string
}

// latencies collects per-operation latencies from any number of goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d ...time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

// percentile returns the nearest-rank percentile p (0..100) of sorted ds.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1)*p/100 + 0.5)
	return sorted[min(i, len(sorted)-1)]
}

// payload returns a random body of n bytes, so that nothing in the path can
// win by compressing it.
func payload(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// dirSize sums the sizes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// quota hands out a fixed number of messages to concurrent producers and
// closes when either the messages or the time budget run out. A time budget
// of 0 means no budget.
type quota struct {
	left     atomic.Int64
	budget   time.Duration
	deadline atomic.Int64 // unix nanoseconds: set by the first take (0 = not yet)
}

func newQuota(n int64, budget time.Duration) *quota {
	q := &quota{budget: budget}
	q.left.Store(n)
	return q
}

// take reserves up to k messages and returns how many it got (0 = stop).
// The time budget starts at the first take, not when the quota is made:
// a machine slow to start the producers still gets the whole budget.
func (q *quota) take(k int64) int64 {
	if q.budget > 0 {
		now := time.Now().UnixNano()
		if !q.deadline.CompareAndSwap(0, now+int64(q.budget)) && now > q.deadline.Load() {
			return 0
		}
	}
	for {
		left := q.left.Load()
		if left <= 0 {
			return 0
		}
		got := min(k, left)
		if q.left.CompareAndSwap(left, left-got) {
			return got
		}
	}
}

// timer measures a run's wall-clock time and the CPU time (user + system)
// the whole process spent in it: server, client and background goroutines
// alike. On a shared machine CPU per message is steadier than wall time,
// because waiting for a core does not count.
type timer struct {
	start time.Time
	cpu   time.Duration
}

func startTimer() timer { return timer{start: time.Now(), cpu: processCPU()} }

func (t timer) stop() (wall, cpu time.Duration) {
	return time.Since(t.start), processCPU() - t.cpu
}
