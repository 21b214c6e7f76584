package main

import (
	"fmt"
	"os"
	"sync"
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
// It does less than the store (no checksums, no index, no offsets, no atomic
// batches) but keeps the segment being written in memory, which the store's
// own writer does not.
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

// walHandoff64 is the floor of group commit at 64 producers: the reference
// loop's WriteBatch(64) + fsync, fed by 64 goroutines that each hand it one
// record and wait for its fsync, as a synchronous Append must.
const walHandoff64 = "wal WriteBatch(64) + fsync, fed by 64 waiting producers"

// walHandoffCase is walBatch64Sync's loop fed by producers goroutines
// through the least a group committer needs (a mutex, a slice, a channel
// each); no offsets, index, checksums or checks. Against the one-loop
// reference it measures what waking and running the producers costs on
// this machine, which any synchronous multi-producer append pays.
func walHandoffCase(producers int, n int64, budget time.Duration) *bcase {
	return &bcase{system: walHandoff64, op: "WriteBatch of producers + fsync", run: func(e *env) (sample, error) {
		dir, err := e.dir("wal")
		if err != nil {
			return sample{}, err
		}
		defer os.RemoveAll(dir)
		l, err := wal.Open(dir, &wal.Options{SegmentSize: walSegmentSize, SegmentCacheSize: 1})
		if err != nil {
			return sample{}, err
		}
		defer l.Close()
		h := &handoff{live: producers, full: make(chan struct{}, 1)}
		q := newQuota(n, budget)
		body := payload(bodySize)
		var lat latencies
		var wg sync.WaitGroup
		tm := startTimer()
		for range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				defer func() { lat.add(mine...) }()
				done := make(chan error, 1)
				for q.take(1) == 1 {
					t := time.Now()
					if err := h.put(body, done); err != nil {
						break
					}
					mine = append(mine, time.Since(t))
				}
				h.leave()
			}()
		}
		msgs, fsyncs, werr := h.run(l)
		wg.Wait()
		el, cpu := tm.stop()
		if werr != nil {
			return sample{}, werr
		}
		s := sample{msgs: msgs, bytes: msgs * bodySize, elapsed: el, cpu: cpu, lat: lat.all, disk: dirSize(dir), fsyncs: fsyncs}
		s.note = fmt.Sprintf("%.1f msgs/fsync", float64(msgs)/float64(max(fsyncs, 1)))
		return s, l.Close()
	}}
}

// handoff is the minimal group committer of walHandoffCase: a round is
// written once every live producer has put its record.
type handoff struct {
	mu    sync.Mutex
	recs  [][]byte
	waits []chan error
	live  int
	full  chan struct{} // a round is complete (or the last producer left)
}

func (h *handoff) signalLocked() {
	if len(h.recs) >= h.live {
		select {
		case h.full <- struct{}{}:
		default:
		}
	}
}

// put hands rec to the round and waits for its fsync.
func (h *handoff) put(rec []byte, done chan error) error {
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.waits = append(h.waits, done)
	h.signalLocked()
	h.mu.Unlock()
	return <-done
}

// leave: a producer is done; rounds no longer wait for it.
func (h *handoff) leave() {
	h.mu.Lock()
	h.live--
	h.signalLocked()
	h.mu.Unlock()
}

// run writes rounds until every producer left; it answers every waiter.
func (h *handoff) run(l *wal.Log) (msgs, fsyncs int64, err error) {
	var wb wal.Batch
	var recs [][]byte
	var waits []chan error
	for {
		<-h.full
		h.mu.Lock()
		recs, h.recs = h.recs, recs[:0]
		waits, h.waits = h.waits, waits[:0]
		live := h.live
		h.mu.Unlock()
		if len(recs) > 0 {
			wb.Clear()
			for _, r := range recs {
				msgs++
				wb.Write(uint64(msgs), r)
			}
			err = l.WriteBatch(&wb) // fsyncs (NoSync false)
			fsyncs++
			for _, c := range waits {
				c <- err
			}
		}
		if live == 0 || err != nil {
			return msgs, fsyncs, err
		}
	}
}
