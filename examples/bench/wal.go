package main

import (
	"fmt"
	"os"
	"time"

	"github.com/tidwall/wal"
)

// walSegmentSize matches store.DefaultSegmentSize, so raw wal and the store
// roll segments (and fsync them on roll) at the same byte counts.
const walSegmentSize = 16 << 20

// walBatch64Sync is the reference of group commit at 64 producers: one
// writer doing WriteBatch of 64 and wal's fsync in a loop.
const walBatch64Sync = "wal WriteBatch(64) + fsync"

// walAppendCase is raw tidwall/wal: one writer, Write of one entry (batch 1)
// or WriteBatch of batch entries, with wal's own fsync per write when sync.
// It is the ceiling: no checksums, no index, no offsets, no atomic batches.
func walAppendCase(system string, batch int, sync bool, n int64, budget time.Duration) *bcase {
	op := "Write"
	if batch > 1 {
		op = fmt.Sprintf("WriteBatch of %d", batch)
	}
	if sync {
		op += " + fsync"
	}
	return &bcase{
		system: system,
		op:     op,
		run: func(e *env) (sample, error) {
			dir, err := e.dir("wal")
			if err != nil {
				return sample{}, err
			}
			defer os.RemoveAll(dir)
			l, err := wal.Open(dir, &wal.Options{NoSync: !sync, SegmentSize: walSegmentSize, SegmentCacheSize: 1})
			if err != nil {
				return sample{}, err
			}
			defer l.Close()
			body := payload(bodySize)
			q := newQuota(n, budget)
			var b wal.Batch
			var lat []time.Duration
			next := uint64(1)
			tm := startTimer()
			for {
				k := q.take(int64(batch))
				if k == 0 {
					break
				}
				t := time.Now()
				if batch == 1 {
					err = l.Write(next, body)
				} else {
					b.Clear()
					for i := range k {
						b.Write(next+uint64(i), body)
					}
					err = l.WriteBatch(&b)
				}
				if err != nil {
					return sample{}, err
				}
				lat = append(lat, time.Since(t))
				next += uint64(k)
			}
			el, cpu := tm.stop()
			msgs := int64(next - 1)
			s := sample{msgs: msgs, bytes: msgs * bodySize, elapsed: el, cpu: cpu, lat: lat, disk: dirSize(dir)}
			return s, l.Close()
		},
	}
}
