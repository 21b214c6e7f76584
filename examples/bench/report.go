package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// row is the aggregate of one case over its repetitions.
type row struct {
	r        *results
	msgs     int64
	rate     float64 // median of the per-repetition rates, messages per second
	lo, hi   float64 // lowest and highest per-repetition rate
	mbps     float64 // body MB (10^6 bytes) per second
	p50, p99 time.Duration
	spread   float64       // (max-min)/median of the per-repetition rates; -1 = one repetition
	diskPer  float64       // bytes on disk per message, 0 = not measured
	mean     time.Duration // mean elapsed time of one repetition
	cpu      time.Duration // process CPU time over all repetitions
	heap     int64         // the largest live heap a repetition noted, 0 = not measured
	perFsync float64       // messages per fsync over all repetitions, 0 = not counted
}

func aggregate(r *results) row {
	w := row{r: r, spread: -1}
	var el time.Duration
	var bytes, disk, diskMsgs, fsyncs, fsyncMsgs int64
	var lat []time.Duration
	var rates []float64
	for _, s := range r.samples {
		w.msgs += s.msgs
		bytes += s.bytes
		el += s.elapsed
		w.cpu += s.cpu
		lat = append(lat, s.lat...)
		rates = append(rates, float64(s.msgs)/s.elapsed.Seconds())
		if s.disk > 0 {
			disk += s.disk
			diskMsgs += s.msgs
		}
		w.heap = max(w.heap, s.heap)
		if s.fsyncs > 0 {
			fsyncs += s.fsyncs
			fsyncMsgs += s.msgs
		}
	}
	if fsyncs > 0 {
		w.perFsync = float64(fsyncMsgs) / float64(fsyncs)
	}
	if len(r.samples) > 0 {
		w.mean = el / time.Duration(len(r.samples))
	}
	if el > 0 {
		w.mbps = float64(bytes) / el.Seconds() / 1e6
	}
	if len(rates) > 0 {
		sorted := slices.Clone(rates)
		slices.Sort(sorted)
		w.rate, w.lo, w.hi = median(sorted), sorted[0], sorted[len(sorted)-1]
	}
	slices.Sort(lat)
	w.p50, w.p99 = percentile(lat, 50), percentile(lat, 99)
	if len(rates) > 1 {
		slices.Sort(rates)
		w.spread = (rates[len(rates)-1] - rates[0]) / median(rates)
	}
	if diskMsgs > 0 {
		w.diskPer = float64(disk) / float64(diskMsgs)
	}
	return w
}

// median of sorted values: the middle one, or the mean of the two middle ones.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// report prints the header, the table and the targets.
func report(out io.Writer, cfg *config, res []*results, started time.Time, loadBefore string) {
	mode := "full"
	if cfg.quick {
		mode = "quick"
	}
	fmt.Fprintf(out, "brokercore bench — %s run, %d repetition(s) interleaved round-robin, %s total\n\n",
		mode, cfg.reps, time.Since(started).Round(time.Second))
	fmt.Fprintf(out, "machine: %s; load average before %s, after %s\n", machine(), loadBefore, loadAvg())
	fmt.Fprintf(out, "versions: %s\n\n", strings.Join(versions(), ", "))
	tables(out, cfg, res)
}

// machine names the CPU, its count and the platform.
func machine() string {
	return fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d), %s/%s, %s",
		cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// tables prints the result table, one row per case, and the target check.
func tables(out io.Writer, cfg *config, res []*results) {
	rows := map[string]row{}
	isRef := map[string]bool{}
	for _, r := range res {
		rows[r.c.system] = aggregate(r)
		isRef[r.c.ref] = true
	}
	fmt.Fprintln(out, "| workload | system | msgs (all reps) | msgs/s: median [range] | MB/s | CPU/msg | p50 | p99 | latency of | vs reference | spread | note |")
	fmt.Fprintln(out, "|---|---|--:|--:|--:|--:|--:|--:|---|---|--:|---|")
	for _, r := range res {
		w := rows[r.c.system]
		if r.err != nil {
			fmt.Fprintf(out, "| %s | %s | | | | | | | %s | | | FAILED: %v |\n", r.c.workload, r.c.system, r.c.op, r.err)
			continue
		}
		vs := "—"
		if isRef[r.c.system] {
			vs = "reference"
		}
		if r.c.ref != "" {
			if ref, ok := rows[r.c.ref]; ok && ref.rate > 0 && ref.r.err == nil && w.rate > 0 {
				x := w.rate / ref.rate
				if r.c.timeRow { // speed is the inverse of the time
					x = float64(ref.mean) / float64(w.mean)
				}
				vs = fmt.Sprintf("%.2f× %s", x, r.c.ref)
			}
		}
		spread := "—"
		if w.spread >= 0 {
			spread = fmt.Sprintf("%.0f%%", 100*w.spread)
		}
		var notes []string
		if w.diskPer > 0 {
			notes = append(notes, fmt.Sprintf("disk %.0f B/msg", w.diskPer))
		}
		if len(r.samples) > 0 && r.samples[len(r.samples)-1].note != "" {
			notes = append(notes, r.samples[len(r.samples)-1].note)
		}
		if r.c.workload == wReopen && cfg.reopenN != fullSizes.reopenN {
			notes = append(notes, fmt.Sprintf("quick: %d messages, not %d", cfg.reopenN, fullSizes.reopenN))
		}
		p50, p99, mbps := dur(w.p50), dur(w.p99), fmt.Sprintf("%.1f", w.mbps)
		cpu := "—"
		if w.cpu > 0 && w.msgs > 0 {
			cpu = dur(w.cpu / time.Duration(w.msgs))
		}
		if r.c.timeRow {
			p99 = "max " + dur(w.p99) // one sample per repetition
			mbps = "—"                // nothing is read or written
			if w.cpu > 0 {
				cpu = dur(w.cpu/time.Duration(len(r.samples))) + " per " + strings.ToLower(strings.Fields(r.c.op)[0])
			}
		}
		rate := fmt.Sprintf("%.0f", w.rate)
		if w.hi > w.lo {
			rate = fmt.Sprintf("%.0f [%.0f–%.0f]", w.rate, w.lo, w.hi)
		}
		if r.c.timeRow {
			rate = "—" // the time is the result: p50 and max
		}
		fmt.Fprintf(out, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.c.workload, r.c.system, w.msgs, rate, mbps, cpu, p50, p99, r.c.op, vs, spread, strings.Join(notes, "; "))
	}
	fmt.Fprintln(out)
	targets(out, rows)
}

// target compares two rows by throughput (want is the least acceptable
// ratio a/b), or checks one row a (b empty) against a bound: its median
// time, the heap it noted, or its messages per fsync.
type target struct {
	name string
	a, b string
	want float64
	time bool // want bounds a's time for the same messages over b's, not a/b

	maxTime     time.Duration // a's median time (p50 of a time row) below it
	maxHeap     func(queues int) int64
	queues      int
	minPerFsync float64
}

// storeHeapBudget is the store's documented heap bound (store/doc.go):
// 64 MiB plus 512 bytes of state per queue (buffered index entries come on
// top; a reopened store has none).
func storeHeapBudget(queues int) int64 { return 64<<20 + 512*int64(queues) }

func targets(out io.Writer, rows map[string]row) {
	const q100k = "brokercore store Open, 100,000 queues"
	const sg64 = "brokercore SyncGroup, 64 producers"
	ts := []target{
		{name: "store SyncNone Append(1) time ≤ 1.25× raw wal Write time", a: "brokercore SyncNone Append(1)", b: "wal Write", want: 1.25, time: true},
		{name: "store SyncNone Append(128) time ≤ 1.25× raw wal WriteBatch(128) time", a: "brokercore SyncNone Append(128)", b: "wal WriteBatch(128)", want: 1.25, time: true},
		{name: "SyncGroup at 64 producers ≥ 0.8× raw wal WriteBatch(64) + fsync", a: sg64, b: walBatch64Sync, want: 0.8},
		{name: "SyncGroup at 64 producers ≥ 50 msgs per fsync", a: sg64, minPerFsync: 50},
		{name: "floor: 64 producers handing off to that loop ≥ 0.8× raw wal WriteBatch(64) + fsync", a: walHandoff64, b: walBatch64Sync, want: 0.8},
		{name: "SyncGroup at 64 producers ≥ JetStream SyncAlways, 64 publishers", a: sg64, b: "jetstream SyncAlways, 64 publishers", want: 1},
		{name: "SyncGroup at 64 producers ≥ JetStream SyncAlways, 1 publisher", a: sg64, b: "jetstream SyncAlways, 1 publisher", want: 1},
		{name: "pop+ack ≥ 2× JetStream fetch+ack", a: "brokercore pop 32 + Ack each", b: "jetstream fetch 32 + Ack each", want: 2},
		{name: "pop+ack, 256 queues AllQueues ≥ 0.6× 1 queue", a: "brokercore pop 32 + Ack, 256 queues AllQueues", b: popRef, want: 0.6},
		{name: "reopen faster than JetStream restart (median time)", a: "brokercore store Open", b: "jetstream server restart", want: 1},
		{name: "recovery after kill faster than JetStream's (median time)", a: "brokercore store Open after kill", b: "jetstream restart after kill", want: 1},
		{name: "Append(1) at 10,000 queues ≥ 0.85× 1 queue", a: "brokercore SyncNone Append(1), 10,000 queues", b: queuesRef, want: 0.85},
		{name: "Append(1) at 100,000 queues ≥ 0.7× 1 queue", a: "brokercore SyncNone Append(1), 100,000 queues", b: queuesRef, want: 0.7},
		{name: "Close at 100,000 queues < 100 ms (median)", a: "brokercore store Close, 100,000 queues", maxTime: 100 * time.Millisecond},
		{name: "Open at 100,000 queues < 1 s (median)", a: q100k, maxTime: time.Second},
		{name: "heap of the store open at 100,000 queues < 64 MiB + 512 B/queue", a: q100k, maxHeap: storeHeapBudget, queues: 100_000},
	}
	fmt.Fprintln(out, "| target | measured | met |")
	fmt.Fprintln(out, "|---|---|---|")
	for _, t := range ts {
		measured, met, ok := t.check(rows)
		if !ok {
			continue
		}
		verdict := "yes"
		if !met {
			verdict = "**no**"
		}
		fmt.Fprintf(out, "| %s | %s | %s |\n", t.name, measured, verdict)
	}
}

// check measures t against the rows; ok is false when a row it needs is
// missing or empty.
func (t target) check(rows map[string]row) (measured string, met, ok bool) {
	a, okA := rows[t.a]
	if !okA || a.rate == 0 || a.r.err != nil {
		return "", false, false
	}
	switch {
	case t.maxTime > 0:
		return fmt.Sprintf("%s (max %s)", dur(a.p50), dur(a.p99)), a.p50 < t.maxTime, true
	case t.maxHeap != nil:
		if a.heap == 0 {
			return "", false, false
		}
		queues := t.queues
		if a.r.c.queues > 0 {
			queues = a.r.c.queues // a smaller run: its own budget
		}
		limit := t.maxHeap(queues)
		return fmt.Sprintf("%.1f MiB at %s queues, bound %.1f MiB", float64(a.heap)/(1<<20), thousands(queues), float64(limit)/(1<<20)),
			a.heap < limit, true
	case t.minPerFsync > 0:
		if a.perFsync == 0 {
			return "", false, false
		}
		return fmt.Sprintf("%.1f msgs/fsync", a.perFsync), a.perFsync >= t.minPerFsync, true
	}
	b, okB := rows[t.b]
	if !okB || b.rate == 0 || b.r.err != nil {
		return "", false, false
	}
	switch {
	case t.time:
		ratio := b.rate / a.rate // a's time for the same messages over b's
		measured = fmt.Sprintf("%.3f× the time (%.0f vs %.0f msgs/s)", ratio, a.rate, b.rate)
		if a.cpu > 0 && b.cpu > 0 {
			ca, cb := a.cpu/time.Duration(a.msgs), b.cpu/time.Duration(b.msgs)
			measured += fmt.Sprintf("; CPU %s vs %s per msg (%.3f×)", dur(ca), dur(cb), float64(ca)/float64(cb))
		}
		return measured, ratio <= t.want, true
	case a.r.c.timeRow:
		return fmt.Sprintf("%s vs %s (%.3f× faster)", dur(a.p50), dur(b.p50), float64(b.p50)/float64(a.p50)), a.p50 < b.p50, true
	default:
		ratio := a.rate / b.rate
		return fmt.Sprintf("%.3f× (%.0f vs %.0f msgs/s)", ratio, a.rate, b.rate), ratio >= t.want, true
	}
}

// dur prints a duration with three significant digits.
func dur(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.3gs", d.Seconds())
	}
}

// versions reads the module versions linked into this binary.
func versions() []string {
	out := []string{"go " + runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return append(out, "build info unavailable")
	}
	want := []string{
		"github.com/brokercore/brokercore",
		"github.com/tidwall/wal",
		"github.com/nats-io/nats-server/v2",
		"github.com/nats-io/nats.go",
	}
	for _, p := range want {
		for _, d := range bi.Deps {
			if d.Path != p {
				continue
			}
			v := d.Version
			if d.Replace != nil {
				v = "local " + d.Replace.Path
				if d.Replace.Version != "" {
					v = d.Replace.Version
				}
				if rev := treeRev; rev != "" {
					v += " @ " + rev
				}
			}
			out = append(out, p+" "+v)
		}
	}
	return out
}

// treeRev is the tree's commit when the run started (a long run may see
// commits land before it reports).
var treeRev string

// gitRev names the commit of the working tree, if git can tell.
func gitRev() string {
	b, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(b))
	if st, err := exec.Command("git", "status", "--porcelain", "--", ":(top)store", ":(top)pop", ":(top)offset").Output(); err == nil && len(st) > 0 {
		rev += "+changes"
	}
	return rev
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
