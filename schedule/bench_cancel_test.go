package schedule

import (
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/fsx"
	"github.com/stretchr/testify/require"
)

// cancelBench indexes n timers spread over 30 days (synthLog: nothing is
// stored but the index) and returns the scheduler, stopped, with every
// timer indexed and pending.
func cancelBench(b *testing.B, n int64) (*Scheduler, *synthLog) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &synthLog{n: n, start: start, span: 30 * 24 * time.Hour}
	now := func() time.Time { return start.Add(-time.Minute) }
	s, err := New(l, Options{Now: now, ProgressPath: filepath.Join(b.TempDir(), "progress")})
	require.NoError(b, err)
	d := drive(s)
	d.timers(now())
	d.end(b)
	require.EqualValues(b, n, s.timers.st.ingested)
	return s, l
}

// BenchmarkCancel reports the cost of Cancel with 10k and 1M pending timers
// (spread over 30 days, one slot file per hour): of a pending timer (the
// scan of every slot, a read of the record to confirm the key, a progress
// write), of the same through CancelAt (one slot scanned), and of a key no
// timer has (the scan alone).
func BenchmarkCancel(b *testing.B) {
	for _, n := range []int64{10_000, 1_000_000} {
		b.Run("pending="+strconv.FormatInt(n, 10), func(b *testing.B) {
			s, l := cancelBench(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Distinct timers, spread over the slots.
				k := "k" + strconv.FormatInt(int64(i)*104729%l.n, 10)
				if err := s.Cancel(k); err != nil && !errors.Is(err, ErrCancelled) {
					b.Fatal(err)
				}
			}
		})
		b.Run("at/pending="+strconv.FormatInt(n, 10), func(b *testing.B) {
			s, l := cancelBench(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := int64(i) * 104729 % l.n
				if err := s.CancelAt("k"+strconv.FormatInt(off, 10), l.due(off)); err != nil && !errors.Is(err, ErrCancelled) {
					b.Fatal(err)
				}
			}
		})
		b.Run("unknown/pending="+strconv.FormatInt(n, 10), func(b *testing.B) {
			s, _ := cancelBench(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Cancel("no such key"); !errors.Is(err, ErrTimerNotFound) {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProgressWrite is the progress file's cost per delivered batch:
// one journal record (an append and one fsync; a compaction now and then)
// next to the atomic replace the file was before the journal (a temp file
// written and fsynced, a rename, a directory fsync: fsx.WriteFile). The
// record is a real one: 18 levels and the timers' state.
func BenchmarkProgressWrite(b *testing.B) {
	p := progress{levels: map[int]int64{}, timer: timerState{ingested: 1 << 20, done: timerKey{due: 1700000000000, off: 1 << 19}, index: 77}}
	for l := 1; l <= 18; l++ {
		p.levels[l] = int64(l) << 20
	}
	rec := func(i int) []byte {
		p.levels[1] = int64(i)
		return encodeProgress(p)
	}
	b.Run("journal", func(b *testing.B) {
		j := &progressJournal{fs: fsx.OS, path: filepath.Join(b.TempDir(), "progress")}
		defer j.close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := j.write(rec(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replace", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "progress")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := fsx.WriteFile(fsx.OS, path, rec(i), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
}
