package schedule

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// synthLog is a TimerTopic of n records generated on demand (nothing is
// stored), so a benchmark measures the scheduler's memory, not the log's.
// Record i is due at start + a pseudo-random spread over span.
type synthLog struct {
	n         int64
	start     time.Time
	span      time.Duration
	delivered int
}

func (l *synthLog) due(off int64) time.Time {
	return l.start.Add(time.Duration(off*7919%l.n) * (l.span / time.Duration(l.n)))
}

func (l *synthLog) Append(msgs ...*store.Message) error {
	for _, m := range msgs {
		if !isSystemTopic(m.Topic) {
			l.delivered++
		}
	}
	return nil
}

func (l *synthLog) Read(topic string, q int, off int64, max int) ([]*store.Message, error) {
	if topic != TimerTopic || q != 0 {
		return nil, nil
	}
	var out []*store.Message
	for ; off < l.n && len(out) < min(max, store.MaxReadBatch); off++ {
		out = append(out, &store.Message{Topic: TimerTopic, QueueOffset: off, StoredAt: l.start, Body: []byte("x"),
			Properties: map[string]string{PropRealTopic: "t", PropUniqKey: "k" + strconv.FormatInt(off, 10),
				PropTimerDeliverMS: strconv.FormatInt(l.due(off).UnixMilli(), 10)}})
	}
	return out, nil
}

func (l *synthLog) MinOffset(string, int) int64 { return 0 }
func (l *synthLog) MaxOffset(topic string, q int) int64 {
	if topic == TimerTopic && q == 0 {
		return l.n
	}
	return 0
}

// pendingTimers indexes n timers spread over 30 days, then reopens the
// index as a new Scheduler would and loads the first window. It returns
// the heap in use with everything pending and the reopen time.
func pendingTimers(tb testing.TB, n int64) (heap uint64, reopen time.Duration, inWindow int64) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &synthLog{n: n, start: start, span: 30 * 24 * time.Hour}
	path := filepath.Join(tb.TempDir(), "progress")
	now := func() time.Time { return start.Add(-time.Minute) } // nothing due yet
	s, err := New(l, Options{Now: now, ProgressPath: path})
	require.NoError(tb, err)
	d := drive(s)
	d.timers(now())
	d.end(tb)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = ms.HeapAlloc
	require.Zero(tb, l.delivered)
	s = nil
	runtime.GC()

	begin := time.Now()
	s2, err := New(l, Options{Now: now, ProgressPath: path})
	require.NoError(tb, err)
	d = drive(s2)
	d.timers(now()) // loads the first slot
	reopen = time.Since(begin)
	d.end(tb)
	require.Zero(tb, s2.Stats().Timers.Rebuilds, "reopened, not rebuilt")
	return heap, reopen, s2.Stats().Timers.InWindow
}

// TestPendingTimersDoNotLiveInMemory: 100k pending timers over 30 days (10M
// with BROKERCORE_LONG=1) keep only one slot in memory, and the heap stays
// far below the 128 MiB budget of the 10M case.
func TestPendingTimersDoNotLiveInMemory(t *testing.T) {
	n := int64(100_000)
	if os.Getenv("BROKERCORE_LONG") == "1" {
		n = 10_000_000
	}
	heap, reopen, win := pendingTimers(t, n)
	t.Logf("%d pending timers: heap %.1f MiB, reopen %v, %d in the window", n, float64(heap)/(1<<20), reopen, win)
	require.Less(t, heap, uint64(128<<20))
	perSlot := n / (30 * 24)
	require.LessOrEqual(t, win, 2*perSlot+10, "one slot's timers in memory")
}

// BenchmarkPendingTimers10M30Days reports heap and reopen time for 10M
// pending timers over 30 days (targets: heap < 128 MiB, reopen < 2 s). One
// iteration takes about a minute; run with -benchtime=1x.
func BenchmarkPendingTimers10M30Days(b *testing.B) {
	for i := 0; i < b.N; i++ {
		heap, reopen, win := pendingTimers(b, 10_000_000)
		b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(reopen.Milliseconds()), "reopen-ms")
		b.ReportMetric(float64(win), "in-window")
	}
}

// BenchmarkTimers100kDueInOneSecondTick10ms: 100k timers due within the
// same second (spread over it), store SyncNone, real clock, Tick 10 ms.
// Reports delivered msgs/s (from the first due time to the last delivery)
// and the lag behind each timer's due time. Targets: >= 100k msgs/s, p99 <
// 100 ms.
func BenchmarkTimers100kDueInOneSecondTick10ms(b *testing.B) { benchTimers(b, time.Second, true) }

// BenchmarkTimers100kDueInOneSecondTick10msProgressInLog is the same with
// zero Options: progress rides in the store's batch (no progress-file fsync
// per batch) and the index is in memory. The difference to the above is the
// cost of the progress journal's one fsync per delivered batch.
func BenchmarkTimers100kDueInOneSecondTick10msProgressInLog(b *testing.B) {
	benchTimers(b, time.Second, false)
}

// BenchmarkTimers100kDueAtOnceTick10ms is the same with every timer due at
// the same millisecond: msgs/s is then the delivery capacity (the spread
// case cannot show more than the arrival rate, 100k/s).
func BenchmarkTimers100kDueAtOnceTick10ms(b *testing.B) { benchTimers(b, 0, true) }

func benchTimers(b *testing.B, spread time.Duration, progressFile bool) {
	const n = 100_000
	var all []time.Duration
	var rate []float64
	for i := 0; i < b.N; i++ {
		st, err := store.Open(filepath.Join(b.TempDir(), "log"), store.Options{Sync: store.SyncNone})
		require.NoError(b, err)
		log := &lagLog{Log: st, due: make(map[string]time.Time, n), want: n, done: make(chan struct{})}
		done := log.done
		opts := Options{Tick: 10 * time.Millisecond}
		if progressFile {
			opts.ProgressPath = filepath.Join(b.TempDir(), "progress")
		}
		s, err := New(log, opts)
		require.NoError(b, err)
		require.NoError(b, s.Start())
		first := time.Now().Add(2 * time.Second)
		batch := make([]*store.Message, 0, 1000)
		for j := 0; j < n; j++ {
			due := first.Add(time.Duration(j) * spread / n)
			m, err := s.At(&store.Message{Topic: "bench", QueueID: j % 4, Body: make([]byte, 100)}, due)
			require.NoError(b, err)
			log.due[m.Properties[PropUniqKey]] = time.UnixMilli(ceilMilli(due))
			if batch = append(batch, m); len(batch) == cap(batch) {
				require.NoError(b, log.Append(batch...))
				batch = batch[:0]
			}
		}
		require.True(b, time.Now().Before(first), "producing took longer than the head start")
		<-done
		rate = append(rate, n/time.Since(first).Seconds())
		require.NoError(b, s.Stop())
		require.NoError(b, st.Close())
		all = append(all, log.lags...)
	}
	slices.Sort(all)
	slices.Sort(rate)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e6 }
	b.ReportMetric(rate[len(rate)/2], "msgs/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(all[len(all)-1])/1e6, "max-ms")
}
