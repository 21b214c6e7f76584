package schedule

import (
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
)

// benchDeliver measures delivering 100k due messages spread over `levels`
// levels: from Start until the last one is appended to its real topic.
// Producing them is not timed.
func benchDeliver(b *testing.B, levels int, realStore, withProgress bool, maxBatch int) {
	const total = 100_000
	body := make([]byte, 100)
	b.ReportAllocs()
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		clk := newAtomicClock()
		var log Log
		closeLog := func() {}
		if realStore {
			st, err := store.Open(filepath.Join(dir, "log"), store.Options{Sync: store.SyncNone, Now: clk.Now})
			if err != nil {
				b.Fatal(err)
			}
			log, closeLog = st, func() { _ = st.Close() }
		} else {
			log = newFakeLog(clk.Now)
		}
		opts := Options{Now: clk.Now, Tick: time.Millisecond, MaxBatch: maxBatch}
		if withProgress {
			opts.ProgressPath = filepath.Join(dir, "progress")
		}
		s, err := New(log, opts)
		if err != nil {
			b.Fatal(err)
		}
		batch := make([]*store.Message, 0, 1000)
		for j := 0; j < total; j++ {
			d, err := s.Delay(&store.Message{Topic: "bench", QueueID: j % 4, Body: body}, 1+j%levels)
			if err != nil {
				b.Fatal(err)
			}
			if batch = append(batch, d); len(batch) == cap(batch) {
				if err := log.Append(batch...); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		clk.Advance(3 * time.Hour)
		b.StartTimer()
		start := time.Now()
		if err := s.Start(); err != nil {
			b.Fatal(err)
		}
		for s.Stats().Delivered < total {
			runtime.Gosched()
		}
		elapsed += time.Since(start)
		b.StopTimer()
		if err := s.Stop(); err != nil {
			b.Fatal(err)
		}
		closeLog()
	}
	b.ReportMetric(float64(total*b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(total*b.N), "ns/msg")
}

func BenchmarkDeliver100kOneLevelStoreSyncNone(b *testing.B) { benchDeliver(b, 1, true, false, 0) }
func BenchmarkDeliver100k18LevelsStoreSyncNone(b *testing.B) { benchDeliver(b, 18, true, false, 0) }

// The progress file is fsynced once per batch: its cost is per batch, so it
// shrinks with MaxBatch.
func BenchmarkDeliver100kOneLevelStoreSyncNoneWithProgressFile(b *testing.B) {
	benchDeliver(b, 1, true, true, 0)
}
func BenchmarkDeliver100k18LevelsStoreSyncNoneWithProgressFile(b *testing.B) {
	benchDeliver(b, 18, true, true, 0)
}
func BenchmarkDeliver100kOneLevelStoreSyncNoneWithProgressFileBatch256(b *testing.B) {
	benchDeliver(b, 1, true, true, 256)
}
func BenchmarkDeliver100kOneLevelFakeLog(b *testing.B) { benchDeliver(b, 1, false, false, 0) }
func BenchmarkDeliver100k18LevelsFakeLog(b *testing.B) { benchDeliver(b, 18, false, false, 0) }

// lagLog records, for every delivered message, appended-at minus due.
type lagLog struct {
	Log
	mu   sync.Mutex
	due  map[string]time.Time
	lags []time.Duration
	want int           // close done once this many were delivered
	done chan struct{} // nil after it was closed
}

func (l *lagLog) Append(msgs ...*store.Message) error {
	if err := l.Log.Append(msgs...); err != nil {
		return err
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		if !isSystemTopic(m.Topic) {
			l.lags = append(l.lags, now.Sub(l.due[m.Properties[PropUniqKey]]))
		}
	}
	if l.want > 0 && len(l.lags) >= l.want && l.done != nil {
		close(l.done)
		l.done = nil
	}
	return nil
}

// BenchmarkDeliveryLagRealClockTick10ms produces 1000 level-1 (1 s) messages
// over about a second on the real clock and reports the delivery lag (due ->
// appended) percentiles with Tick 10 ms. Target: p99 under 50 ms.
func BenchmarkDeliveryLagRealClockTick10ms(b *testing.B) { benchLag(b, true) }

// BenchmarkDeliveryLagRealClockTick10msFakeLog is the same over the in-memory
// log, to tell the scheduler's share of the lag from the store's.
func BenchmarkDeliveryLagRealClockTick10msFakeLog(b *testing.B) { benchLag(b, false) }

func benchLag(b *testing.B, realStore bool) {
	const n = 1000
	var all []time.Duration
	for i := 0; i < b.N; i++ {
		var st Log = newFakeLog(time.Now)
		closeLog := func() {}
		if realStore {
			s, err := store.Open(filepath.Join(b.TempDir(), "log"), store.Options{Sync: store.SyncNone})
			if err != nil {
				b.Fatal(err)
			}
			st, closeLog = s, func() { _ = s.Close() }
		}
		log := &lagLog{Log: st, due: map[string]time.Time{}, want: n, done: make(chan struct{})}
		done := log.done
		s, err := New(log, Options{Levels: "1s", Tick: 10 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(); err != nil {
			b.Fatal(err)
		}
		pace := time.NewTicker(10 * time.Millisecond) // 10 messages every 10 ms on the real clock
		for j := 0; j < n; j++ {
			d, _ := s.Delay(&store.Message{Topic: "bench", Body: []byte("x")}, 1)
			if err := log.Append(d); err != nil {
				b.Fatal(err)
			}
			log.mu.Lock()
			log.due[d.Properties[PropUniqKey]] = d.StoredAt.Add(time.Second)
			log.mu.Unlock()
			if j%10 == 9 {
				<-pace.C
			}
		}
		pace.Stop()
		<-done
		if err := s.Stop(); err != nil {
			b.Fatal(err)
		}
		closeLog()
		all = append(all, log.lags...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e6 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(all[len(all)-1])/1e6, "max-ms")
}
