package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidwall/wal"
)

// BenchmarkAppendKeys is the key index's cost on Append(1) of 1 KiB under
// SyncNone (as BenchmarkAppendVsRawWal): messages without keys, with a key
// and a UNIQ_KEY property (KeyProperties), the same with the key index off,
// and raw wal writes of the keyed record's bytes. Run it alternated
// (-count) and compare medians of the same run.
func BenchmarkAppendKeys(b *testing.B) {
	keys := make([]string, 4096)
	ids := make([]string, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprintf("order-%08d", i)
		ids[i] = fmt.Sprintf("7F0000010000%020X", i)
	}
	keyed := func(m *Message, i int) {
		m.Keys = append(m.Keys[:0], keys[i%len(keys)])
		m.Properties["UNIQ_KEY"] = ids[i%len(ids)]
	}
	for _, c := range []struct {
		name string
		keys bool
		off  bool
	}{{"nokeys", false, false}, {"keys", true, false}, {"keys-indexoff", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			s := openT(b, b.TempDir(), Options{Sync: SyncNone, NoKeyIndex: c.off, KeyProperties: []string{"UNIQ_KEY"}})
			defer s.Close()
			m := benchMsg(0)
			m.Properties = map[string]string{}
			b.ReportAllocs()
			b.SetBytes(int64(len(body1K)))
			flushDirtyPages()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if c.keys {
					keyed(m, i)
				}
				if err := s.Append(m); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, b.N)
		})
	}
	b.Run("rawwal", func(b *testing.B) {
		m := benchMsg(0)
		m.Properties = map[string]string{}
		keyed(m, 1)
		m.StoredAt = time.Now()
		rec := appendRecord(nil, m, true)
		l, err := wal.Open(b.TempDir(), &wal.Options{NoSync: true, SegmentSize: DefaultSegmentSize, SegmentCacheSize: 1, AllowEmpty: true})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.ReportAllocs()
		b.SetBytes(int64(len(body1K)))
		flushDirtyPages()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := l.Write(uint64(i)+1, rec); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, b.N)
	})
}

// BenchmarkKeyIndexReopen100K measures Close and Open of a store holding
// 100,000 messages with one distinct key each (1 KiB bodies, 16 MiB
// segments: the last segment's keys are read back from it at Open), with
// the key index on and off, and a LookupKey among them.
func BenchmarkKeyIndexReopen100K(b *testing.B) {
	const n = 100_000
	for _, off := range []bool{false, true} {
		name := "keyindex"
		if off {
			name = "indexoff"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			o := Options{Sync: SyncNone, NoKeyIndex: off}
			s := openT(b, dir, o)
			batch := make([]*Message, 100)
			for i := 0; i < n; i += len(batch) {
				for j := range batch {
					batch[j] = &Message{Topic: "bench", Body: body1K, Keys: []string{fmt.Sprintf("key-%d", i+j)}}
				}
				if err := s.Append(batch...); err != nil {
					b.Fatal(err)
				}
			}
			var closeDur, openDur, lookDur time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				var err error
				if s, err = Open(dir, o); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if !off {
					ms, err := s.LookupKey("bench", fmt.Sprintf("key-%d", (i*7919)%n), time.Time{}, time.Time{}, 64)
					if err != nil || len(ms) != 1 {
						b.Fatalf("lookup: %v %d", err, len(ms))
					}
				}
				closeDur += t1.Sub(t0)
				openDur += t2.Sub(t1)
				lookDur += time.Since(t2)
			}
			b.StopTimer()
			s.Close()
			b.ReportMetric(float64(closeDur.Microseconds())/float64(b.N)/1000, "close-ms")
			b.ReportMetric(float64(openDur.Microseconds())/float64(b.N)/1000, "open-ms")
			if !off {
				b.ReportMetric(float64(lookDur.Microseconds())/float64(b.N), "lookup-µs")
			}
		})
	}
}

// BenchmarkKeyIndexCPU isolates the key index's own work per keyed message
// (a key and a UNIQ_KEY property), which the end-to-end rows of
// BenchmarkAppendKeys cannot resolve on a loaded machine: "add" is what
// Append does under the store lock (hash both keys, append two entries),
// "seal" what the checkpoint after a segment roll does per message, off the
// append path (sort and encode the entries of a 16 MiB segment of 1 KiB
// messages).
func BenchmarkKeyIndexCPU(b *testing.B) {
	s := &Store{opts: Options{KeyProperties: []string{"UNIQ_KEY"}}}
	m := benchMsg(0)
	m.Keys = []string{"order-00000042"}
	m.Properties = map[string]string{"UNIQ_KEY": "7F000001000000000000000000000042"}
	msgs := []*Message{m}
	pl := []placed{{q: &queue{}, entry: entry{logOffset: 1, storedAt: 2}}}
	b.Run("add", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if len(s.keyMem) >= 1<<16 {
				s.keyMem = s.keyMem[:0]
			}
			pl[0].entry.logOffset = int64(i)
			s.indexKeys(msgs, pl)
		}
	})
	b.Run("seal", func(b *testing.B) {
		const perSegment = 16 << 10 // 1 KiB messages in a 16 MiB segment
		entries := make([]keyEntry, 2*perSegment)
		b.ReportAllocs()
		for i := 0; i < b.N; i += perSegment {
			for j := range entries {
				entries[j] = keyEntry{hash: keyHash("t", fmt.Sprint(i+j)), logOffset: int64(j / 2)}
			}
			b.StartTimer()
			encodeKeyFile(keyFile{first: 0, end: perSegment}, entries)
			b.StopTimer()
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/msg")
	})
}
