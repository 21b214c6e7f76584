package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The first four workloads, in the order they run and print (timers.go,
// pop.go and queues.go add theirs).
const (
	wAppend  = "append"  // 1 KiB appends, no fsync per message
	wDurable = "durable" // appends acknowledged after fsync
	wConsume = "consume" // read back a prefilled log, with and without acks
	wReopen  = "reopen"  // open/restart a log of many messages
)

var allWorkloads = []string{wAppend, wDurable, wConsume, wReopen, wTimers, wPop, wQueues}

// sizes say how much work each run does.
type sizes struct {
	reps      int           // round-robin repetitions of every case
	appendN   int64         // messages per append run
	durableN  int64         // most messages per durable run ...
	durableT  time.Duration // ... and its time budget
	consumeN  int64         // messages per consume run
	reopenN   int64         // messages in the reopened log
	reopenMsg int           // body size in the reopened log
	timerN    int64         // timers per timer run (timers.go)
	// The queues workload (queues.go): its rows are named for 10,000 and
	// 100,000 queues; smaller runs use fewer and say so.
	someQueues, manyQueues int
}

var (
	fullSizes = sizes{reps: 3, appendN: 300_000, durableN: 1_000_000, durableT: 3 * time.Second,
		consumeN: 200_000, reopenN: 1_000_000, reopenMsg: bodySize, timerN: 100_000,
		someQueues: 10_000, manyQueues: 100_000}
	quickSizes = sizes{reps: 2, appendN: 100_000, durableN: 1_000_000, durableT: time.Second,
		consumeN: 50_000, reopenN: 200_000, reopenMsg: bodySize, timerN: 100_000,
		someQueues: 10_000, manyQueues: 20_000}
)

// config is one invocation of the benchmark.
type config struct {
	sizes
	quick     bool
	dir       string   // parent of the temporary data root
	workloads []string // subset of allWorkloads to run
	out       io.Writer
	progress  io.Writer // one line per run; nil = quiet
}

// bcase is one row of the table: one system on one workload. prepare runs
// once before the first repetition (untimed: prefills), run once per
// repetition, cleanup after the last.
type bcase struct {
	workload string
	system   string
	ref      string // system of the reference row of the same workload; "" = none
	op       string // what one latency sample is
	timeRow  bool   // the time is the result (reopen, Close, Open): p50 and max, vs reference by time
	queues   int    // the queues the row ran at (queues workload), 0 = not a queue-count row
	prepare  func(e *env) error
	run      func(e *env) (sample, error)
	cleanup  func()
}

// env is what a case gets from the runner.
type env struct {
	ctx  context.Context
	root string // temporary data root, removed at the end
	cfg  *config
	seq  int
}

// dir returns a fresh directory under the data root.
func (e *env) dir(name string) (string, error) {
	e.seq++
	d := filepath.Join(e.root, fmt.Sprintf("%03d-%s", e.seq, name))
	return d, os.MkdirAll(d, 0o750)
}

// cases lists every row, in table order.
func cases(cfg *config) []*bcase {
	var all []*bcase
	for _, w := range cfg.workloads {
		var cs []*bcase
		switch w {
		case wAppend:
			cs = append(cs,
				walAppendCase("wal Write", 1, false, cfg.appendN, 0),
				walAppendCase("wal WriteBatch(128)", 128, false, cfg.appendN, 0),
				storeAppendCase("brokercore SyncNone Append(1)", "wal Write", 1, 1, cfg.appendN),
				storeAppendCase("brokercore SyncNone Append(128)", "wal WriteBatch(128)", 128, 1, cfg.appendN),
				jsAsyncCase("jetstream async publish, 256 in flight", "wal Write", 256, cfg.appendN),
			)
		case wDurable:
			cs = append(cs,
				walAppendCase("wal fsync per Write", 1, true, cfg.durableN, cfg.durableT),
				walAppendCase(walBatch64Sync, 64, true, cfg.durableN, cfg.durableT),
				walHandoffCase(64, cfg.durableN, cfg.durableT),
				storeDurableCase("brokercore SyncGroup, 1 producer", "jetstream SyncAlways, 1 publisher", 1, cfg.durableN, cfg.durableT),
				storeDurableCase("brokercore SyncGroup, 16 producers", "jetstream SyncAlways, 16 publishers", 16, cfg.durableN, cfg.durableT),
				storeDurableCase("brokercore SyncGroup, 64 producers", "jetstream SyncAlways, 64 publishers", 64, cfg.durableN, cfg.durableT),
				jsSyncCase("jetstream SyncAlways, 1 publisher", 1, cfg.durableN, cfg.durableT),
				jsSyncCase("jetstream SyncAlways, 16 publishers", 16, cfg.durableN, cfg.durableT),
				jsSyncCase("jetstream SyncAlways, 64 publishers", 64, cfg.durableN, cfg.durableT),
			)
		case wConsume:
			cs = append(cs,
				popAckCase("brokercore pop 32 + Ack each", "jetstream fetch 32 + Ack each", cfg.consumeN),
				jsFetchCase("jetstream fetch 32 + Ack each", true, cfg.consumeN),
				storeReadCase("brokercore store Read 32", "jetstream fetch 32, AckNone", cfg.consumeN),
				jsFetchCase("jetstream fetch 32, AckNone", false, cfg.consumeN),
			)
		case wReopen:
			cs = append(cs,
				storeReopenCase("brokercore store Open", "jetstream server restart", cfg.reopenN, cfg.reopenMsg),
				jsReopenCase("jetstream server restart", cfg.reopenN, cfg.reopenMsg),
				storeCrashCase("brokercore store Open after kill", "jetstream restart after kill", cfg.reopenN, cfg.reopenMsg),
				jsCrashCase("jetstream restart after kill", cfg.reopenN, cfg.reopenMsg),
			)
		case wTimers:
			cs = timerCases(cfg)
		case wPop:
			cs = popCases(cfg)
		case wQueues:
			cs = queueCases(cfg)
		}
		for _, c := range cs {
			c.workload = w
			c.timeRow = c.timeRow || w == wReopen
		}
		all = append(all, cs...)
	}
	return all
}

// results gathers the samples of one case.
type results struct {
	c       *bcase
	samples []sample
	err     error
}

// run executes every case reps times, interleaved: repetition r runs the
// cases of each workload in an order rotated by r, so that no system always
// runs first (on a cold cache) or last, and machine drift hits every system
// alike.
func run(ctx context.Context, cfg *config) ([]*results, error) {
	root, err := os.MkdirTemp(cfg.dir, "brokercore-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	e := &env{ctx: ctx, root: root, cfg: cfg}

	all := cases(cfg)
	res := make([]*results, len(all))
	for i, c := range all {
		res[i] = &results{c: c}
	}
	defer func() {
		for _, r := range res {
			if r.c.cleanup != nil {
				r.c.cleanup()
			}
		}
	}()
	for _, w := range cfg.workloads {
		var group []*results
		for _, r := range res {
			if r.c.workload == w {
				group = append(group, r)
			}
		}
		for _, r := range group {
			if r.c.prepare == nil {
				continue
			}
			start := time.Now()
			if err := r.c.prepare(e); err != nil {
				r.err = fmt.Errorf("prepare: %w", err)
			}
			cfg.logf("prepared %-9s %-45s in %v", w, r.c.system, time.Since(start).Round(time.Millisecond))
		}
		for rep := range cfg.reps {
			for k := range group {
				r := group[(k+rep)%len(group)]
				if r.err != nil {
					continue
				}
				if err := ctx.Err(); err != nil {
					return res, err
				}
				runtime.GC() // no system pays for the garbage of the one before
				s, err := r.c.run(e)
				if err != nil {
					r.err = err
					cfg.logf("FAILED   %-9s %-45s: %v", w, r.c.system, err)
					continue
				}
				r.samples = append(r.samples, s)
				cfg.logf("rep %d/%d  %-9s %-45s %8d msgs in %v", rep+1, cfg.reps, w, r.c.system, s.msgs, s.elapsed.Round(time.Millisecond))
			}
		}
		for _, r := range group {
			if r.c.cleanup != nil {
				r.c.cleanup()
				r.c.cleanup = nil
			}
		}
	}
	return res, nil
}

func (cfg *config) logf(format string, args ...any) {
	if cfg.progress != nil {
		fmt.Fprintf(cfg.progress, format+"\n", args...)
	}
}

// parseWorkloads turns the -workloads flag into a list in table order.
func parseWorkloads(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" || s == "all" {
		return allWorkloads, nil
	}
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allWorkloads, f) {
			return nil, fmt.Errorf("unknown workload %q (have %s)", f, strings.Join(allWorkloads, ","))
		}
		want[f] = true
	}
	var out []string
	for _, w := range allWorkloads {
		if want[w] {
			out = append(out, w)
		}
	}
	return out, nil
}
