package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/brokercore/brokercore/store"
)

// The queues workload (issue 24): the store at RocketMQ queue counts.
// Append(1) of 1 KiB under SyncNone spread round-robin over 1, 10,000 and
// 100,000 queues (every queue created before the timed part), and Close and
// Open of a store whose log holds one record per queue at 100,000 queues,
// next to the same log in one queue. The Close and Open rows note the live
// heap the open store takes (after a collection, above the process without
// it).
const wQueues = "queues"

const (
	queuesRef     = "brokercore SyncNone Append(1), 1 queue"
	closeQueueRef = "brokercore store Close, 1 queue"
	openQueueRef  = "brokercore store Open, 1 queue"
)

// queueCases lists the rows of the queues workload.
func queueCases(cfg *config) []*bcase {
	some, many := cfg.someQueues, cfg.manyQueues
	return []*bcase{
		queueAppendCase(queuesRef, "", 1, 1, cfg.appendN),
		queueAppendCase("brokercore SyncNone Append(1), 10,000 queues", queuesRef, some, 10_000, cfg.appendN),
		queueAppendCase("brokercore SyncNone Append(1), 100,000 queues", queuesRef, many, 100_000, cfg.appendN),
		queueCloseCase(closeQueueRef, "", 1, many),
		queueCloseCase("brokercore store Close, 100,000 queues", closeQueueRef, many, many),
		queueOpenCase(openQueueRef, "", 1, many),
		queueOpenCase("brokercore store Open, 100,000 queues", openQueueRef, many, many),
	}
}

// sizeNote says when a row ran at fewer queues than its name (-quick,
// -tiny).
func sizeNote(got, named int) string {
	if got == named {
		return ""
	}
	return fmt.Sprintf("%s queues, not %s (smaller run)", thousands(got), thousands(named))
}

// thousands writes n with commas: 100,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// queueMessages returns one message per queue of the bench topic, sharing
// body.
func queueMessages(queues int, body []byte) []*store.Message {
	ms := make([]*store.Message, queues)
	for q := range ms {
		ms[q] = &store.Message{Topic: benchTopic, QueueID: q, Body: body}
	}
	return ms
}

// queueAppendCase appends n messages one per call, round-robin over queues
// queues that all exist (took one append each) before the timed part.
func queueAppendCase(system, ref string, queues, named int, n int64) *bcase {
	return &bcase{system: system, ref: ref, op: "Append of 1", queues: queues, run: func(e *env) (sample, error) {
		dir, err := e.dir("queues")
		if err != nil {
			return sample{}, err
		}
		defer os.RemoveAll(dir)
		st, err := store.Open(dir, store.Options{Sync: store.SyncNone})
		if err != nil {
			return sample{}, err
		}
		defer st.Close()
		msgs := queueMessages(queues, payload(bodySize))
		if queues > 1 {
			for _, m := range msgs {
				if err := st.Append(m); err != nil {
					return sample{}, err
				}
			}
		}
		lat := make([]time.Duration, 0, n)
		tm := startTimer()
		for i := range n {
			t := time.Now()
			if err := st.Append(msgs[i%int64(queues)]); err != nil {
				return sample{}, err
			}
			lat = append(lat, time.Since(t))
		}
		el, cpu := tm.stop()
		s := sample{msgs: n, bytes: n * bodySize, elapsed: el, cpu: cpu, lat: lat, note: sizeNote(queues, named)}
		return s, st.Close()
	}}
}

// fillQueues opens a SyncNone store in a fresh directory and appends n
// messages of 1 KiB spread round-robin over queues queues; the caller owns
// the store.
func fillQueues(e *env, queues int, n int) (*store.Store, string, error) {
	return freshStore(e, "fill", int64(n), bodySize, store.Options{}, func(i int64) int { return int(i % int64(queues)) })
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// heapNote describes the live heap a store of queues queues takes.
func heapNote(heap int64, queues int) string {
	if queues == 1 {
		return fmt.Sprintf("heap %.1f MiB", float64(heap)/(1<<20))
	}
	return fmt.Sprintf("heap %.1f MiB (%.0f B/queue)", float64(heap)/(1<<20), float64(heap)/float64(queues))
}

// queueCloseCase times Close of a store that has just taken n records over
// queues queues (every queue changed since the last checkpoint: Close
// fsyncs the log, writes the index and the checkpoint). Each repetition
// fills a new store, untimed.
func queueCloseCase(system, ref string, queues, n int) *bcase {
	return &bcase{system: system, ref: ref, op: "Close", timeRow: true, queues: queues, run: func(e *env) (sample, error) {
		before := liveHeap()
		st, dir, err := fillQueues(e, queues, n)
		defer os.RemoveAll(dir)
		if err != nil {
			return sample{}, err
		}
		heap := liveHeap() - before
		tm := startTimer()
		err = st.Close()
		el, cpu := tm.stop()
		if err != nil {
			return sample{}, err
		}
		notes := []string{fmt.Sprintf("%d msgs of %d B", n, bodySize), heapNote(heap, queues)}
		if s := sizeNote(queues, 100_000); queues > 1 && s != "" {
			notes = append(notes, s)
		}
		return sample{msgs: int64(n), bytes: int64(n) * bodySize, elapsed: el, cpu: cpu, lat: []time.Duration{el},
			heap: heap, note: strings.Join(notes, "; ")}, nil
	}}
}

// queueOpenCase times Open of a cleanly closed store of n records over
// queues queues (prepared once) and notes the heap it takes.
func queueOpenCase(system, ref string, queues, n int) *bcase {
	var dir string
	c := &bcase{system: system, ref: ref, op: "Open (recovery included)", timeRow: true, queues: queues}
	c.prepare = func(e *env) error {
		st, d, err := fillQueues(e, queues, n)
		dir = d
		if err != nil {
			return err
		}
		return st.Close()
	}
	c.cleanup = func() { os.RemoveAll(dir) }
	c.run = func(e *env) (sample, error) {
		before := liveHeap()
		tm := startTimer()
		st, err := store.Open(dir, store.Options{Sync: store.SyncNone})
		if err != nil {
			return sample{}, err
		}
		el, cpu := tm.stop()
		heap := liveHeap() - before
		got := st.Stats().Queues
		if err := st.Close(); err != nil {
			return sample{}, err
		}
		if got != queues {
			return sample{}, fmt.Errorf("open: %d queues, want %d", got, queues)
		}
		notes := []string{fmt.Sprintf("%d msgs of %d B", n, bodySize), heapNote(heap, queues)}
		if s := sizeNote(queues, 100_000); queues > 1 && s != "" {
			notes = append(notes, s)
		}
		return sample{msgs: int64(n), bytes: int64(n) * bodySize, elapsed: el, cpu: cpu, lat: []time.Duration{el},
			heap: heap, note: strings.Join(notes, "; ")}, nil
	}
	return c
}
