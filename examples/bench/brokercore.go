package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

const benchTopic = "bench"

// newMessages returns k messages of the bench topic, queue 0, sharing body.
func newMessages(k int, body []byte) []*store.Message {
	ms := make([]*store.Message, k)
	for i := range ms {
		ms[i] = &store.Message{Topic: benchTopic, Body: body}
	}
	return ms
}

// storeAppendCase is brokercore's store under SyncNone: one producer calling
// Append with batch messages per call.
func storeAppendCase(system, ref string, batch, producers int, n int64) *bcase {
	op := "Append of 1"
	if batch > 1 {
		op = fmt.Sprintf("Append of %d", batch)
	}
	return &bcase{system: system, ref: ref, op: op, run: func(e *env) (sample, error) {
		return storeAppend(e, store.SyncNone, batch, producers, n, 0)
	}}
}

// storeDurableCase is brokercore's store under SyncGroup: producers
// goroutines each calling Append of one message, every call returning after
// the fsync it shares with the others (group commit).
func storeDurableCase(system, ref string, producers int, n int64, budget time.Duration) *bcase {
	return &bcase{system: system, ref: ref, op: "Append of 1 (fsynced)", run: func(e *env) (sample, error) {
		return storeAppend(e, store.SyncGroup, 1, producers, n, budget)
	}}
}

func storeAppend(e *env, policy store.SyncPolicy, batch, producers int, n int64, budget time.Duration) (sample, error) {
	dir, err := e.dir("store")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{Sync: policy})
	if err != nil {
		return sample{}, err
	}
	defer st.Close()
	body := payload(bodySize)
	q := newQuota(n, budget)
	var lat latencies
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	tm := startTimer()
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := newMessages(batch, body)
			var mine []time.Duration
			defer func() { lat.add(mine...) }()
			for {
				k := q.take(int64(batch))
				if k == 0 {
					return
				}
				t := time.Now()
				if err := st.Append(msgs[:k]...); err != nil {
					errs <- err
					return
				}
				mine = append(mine, time.Since(t))
			}
		}()
	}
	wg.Wait()
	el, cpu := tm.stop()
	close(errs)
	if err := <-errs; err != nil {
		return sample{}, err
	}
	msgs := st.MaxOffset(benchTopic, 0)
	s := sample{msgs: msgs, bytes: msgs * bodySize, elapsed: el, cpu: cpu, lat: lat.all, disk: dirSize(dir)}
	if policy == store.SyncGroup {
		stats := st.Stats()
		s.fsyncs = int64(stats.Syncs)
		s.note = fmt.Sprintf("%.1f msgs/fsync", float64(stats.Messages)/float64(max(stats.Syncs, 1)))
	}
	return s, st.Close()
}

// filledStore opens a store in a fresh directory and appends n messages of
// size bytes to queue 0 of the bench topic, in batches of 128, then fsyncs
// and closes nothing: the caller owns the store.
func filledStore(e *env, name string, n int64, size int, opts store.Options) (*store.Store, string, error) {
	st, dir, err := freshStore(e, name, n, size, opts, nil)
	if err != nil {
		return nil, dir, err
	}
	if err := st.Sync(); err != nil {
		st.Close()
		return nil, dir, err
	}
	return st, dir, nil
}

// freshStore opens a SyncNone store (opts otherwise) in a fresh directory
// and appends n messages of size bytes to the bench topic, message i on
// queue queueOf(i) (nil: queue 0), in batches of 128; the caller owns it.
func freshStore(e *env, name string, n int64, size int, opts store.Options, queueOf func(i int64) int) (*store.Store, string, error) {
	dir, err := e.dir(name)
	if err != nil {
		return nil, "", err
	}
	opts.Sync = store.SyncNone
	st, err := store.Open(dir, opts)
	if err != nil {
		return nil, dir, err
	}
	msgs := newMessages(128, payload(size))
	for i := int64(0); i < n; {
		k := min(n-i, 128)
		if queueOf != nil {
			for j := range k {
				msgs[j].QueueID = queueOf(i + j)
			}
		}
		if err := st.Append(msgs[:k]...); err != nil {
			st.Close()
			return nil, dir, err
		}
		i += k
	}
	return st, dir, nil
}

// popAckCase is brokercore's pop service over a prefilled store: one
// consumer pops batches of 32 and acks every message by its handle. Offsets
// are committed through a file-backed offset.Manager (flushed every
// offset.DefaultFlushEvery), as a host would run it. Every repetition uses a
// new consumer group, so each one consumes the whole log from offset 0.
func popAckCase(system, ref string, n int64) *bcase {
	var (
		st    *store.Store
		dir   string
		round int
	)
	c := &bcase{system: system, ref: ref, op: "Pop of 32 + 32 Acks"}
	c.prepare = func(e *env) error {
		var err error
		st, dir, err = filledStore(e, "pop", n, bodySize, store.Options{})
		return err
	}
	c.cleanup = func() {
		if st != nil {
			st.Close()
		}
		os.RemoveAll(dir)
	}
	c.run = func(e *env) (sample, error) {
		round++
		mgr, err := offset.Open(offset.Options{Path: filepath.Join(dir, fmt.Sprintf("offsets-%d", round))})
		if err != nil {
			return sample{}, err
		}
		defer mgr.Close()
		svc := pop.New(st, pop.Options{Offsets: mgr})
		defer svc.Close()
		req := pop.Request{Group: fmt.Sprintf("g%d", round), Topic: benchTopic, ClientID: "c", QueueID: 0,
			Max: pop.MaxBatch, Invisible: time.Minute}
		got, lat, el, cpu, err := popAckAll(e.ctx, svc, req, n)
		if err != nil {
			return sample{}, err
		}
		if com, ok := mgr.Committed(req.Group, benchTopic, 0); !ok || com != n {
			return sample{}, fmt.Errorf("pop: committed offset %d (%v) after acking %d", com, ok, n)
		}
		if err := svc.Close(); err != nil {
			return sample{}, err
		}
		return sample{msgs: got, bytes: got * bodySize, elapsed: el, cpu: cpu, lat: lat}, mgr.Close()
	}
	return c
}

// storeReadCase reads the whole prefilled queue with Read(…, 32): the
// consume path with no delivery state at all.
func storeReadCase(system, ref string, n int64) *bcase {
	var (
		st  *store.Store
		dir string
	)
	c := &bcase{system: system, ref: ref, op: "Read of 32"}
	c.prepare = func(e *env) error {
		var err error
		st, dir, err = filledStore(e, "read", n, bodySize, store.Options{})
		return err
	}
	c.cleanup = func() {
		if st != nil {
			st.Close()
		}
		os.RemoveAll(dir)
	}
	c.run = func(e *env) (sample, error) {
		var lat []time.Duration
		var off int64
		tm := startTimer()
		for off < n {
			t := time.Now()
			ms, err := st.Read(benchTopic, 0, off, 32)
			if err != nil {
				return sample{}, err
			}
			if len(ms) == 0 {
				return sample{}, fmt.Errorf("read: empty at %d of %d", off, n)
			}
			lat = append(lat, time.Since(t))
			off += int64(len(ms))
		}
		el, cpu := tm.stop()
		return sample{msgs: off, bytes: off * bodySize, elapsed: el, cpu: cpu, lat: lat}, nil
	}
	return c
}

// storeReopenCase times store.Open of a closed store holding n messages,
// until Open has returned (recovery included) and the queue reports all n.
func storeReopenCase(system, ref string, n int64, size int) *bcase {
	var dir string
	c := &bcase{system: system, ref: ref, op: "Open (recovery included)"}
	c.prepare = func(e *env) error {
		st, d, err := filledStore(e, "reopen", n, size, store.Options{})
		dir = d
		if err != nil {
			return err
		}
		return st.Close()
	}
	c.cleanup = func() { os.RemoveAll(dir) }
	c.run = func(e *env) (sample, error) {
		tm := startTimer()
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			return sample{}, err
		}
		got := st.MaxOffset(benchTopic, 0)
		el, cpu := tm.stop()
		replayed := st.Stats().Replayed
		if err := st.Close(); err != nil {
			return sample{}, err
		}
		if got != n {
			return sample{}, fmt.Errorf("reopen: %d messages, want %d", got, n)
		}
		note := fmt.Sprintf("%d msgs of %d B; %d replayed", n, size, replayed)
		return sample{msgs: n, bytes: n * int64(size), elapsed: el, cpu: cpu, lat: []time.Duration{el}, disk: dirSize(dir), note: note}, nil
	}
	return c
}

// popAckAll pops batches of req and acks every message until n messages
// were acked; it returns how many it acked and one latency per pop+ack
// round trip.
func popAckAll(ctx context.Context, svc *pop.Service, req pop.Request, n int64) (got int64, lat []time.Duration, wall, cpu time.Duration, err error) {
	tm := startTimer()
	for got < n {
		t := time.Now()
		r, err := svc.Pop(ctx, req)
		if err != nil {
			return got, nil, 0, 0, err
		}
		if len(r.Messages) == 0 {
			return got, nil, 0, 0, fmt.Errorf("pop: empty answer after %d of %d messages", got, n)
		}
		for _, d := range r.Messages {
			if err := svc.Ack(d.Handle); err != nil {
				return got, nil, 0, 0, err
			}
		}
		lat = append(lat, time.Since(t))
		got += int64(len(r.Messages))
	}
	wall, cpu = tm.stop()
	return got, lat, wall, cpu, nil
}
