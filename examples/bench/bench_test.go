package main

import (
	"fmt"
	"testing"

	"github.com/brokercore/brokercore/store"
	"github.com/tidwall/wal"
)

// BenchmarkAppend1KiB is the append rows' core without the harness: 1 KiB
// messages, one or 128 per call, raw wal next to store Append under
// SyncNone, on the same segment size. CPU per message and allocations are
// what the store adds over the wal whose format it writes. One op = one message.
func BenchmarkAppend1KiB(b *testing.B) {
	body := payload(bodySize)
	for _, batch := range []int{1, 128} {
		b.Run(fmt.Sprintf("wal/batch=%d", batch), func(b *testing.B) {
			l, err := wal.Open(b.TempDir(), &wal.Options{NoSync: true, SegmentSize: walSegmentSize, SegmentCacheSize: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			var wb wal.Batch
			b.ReportAllocs()
			b.SetBytes(bodySize)
			next := uint64(1)
			for i := 0; i < b.N; i += batch {
				k := min(batch, b.N-i)
				wb.Clear()
				for j := range k {
					wb.Write(next+uint64(j), body)
				}
				if err := l.WriteBatch(&wb); err != nil {
					b.Fatal(err)
				}
				next += uint64(k)
			}
		})
		b.Run(fmt.Sprintf("store/batch=%d", batch), func(b *testing.B) {
			st, err := store.Open(b.TempDir(), store.Options{Sync: store.SyncNone})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			msgs := newMessages(batch, body)
			b.ReportAllocs()
			b.SetBytes(bodySize)
			for i := 0; i < b.N; i += batch {
				if err := st.Append(msgs[:min(batch, b.N-i)]...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
