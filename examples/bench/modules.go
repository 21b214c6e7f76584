package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The modules subcommand measures what this module cannot import: the raft
// cluster (examples/cluster) and the RocketMQ-compatible broker's access
// control (examples/rocketmq). It builds those modules' test binaries, runs
// one benchmark per process, the cases of a table alternated round after
// round (the order rotated each round), and writes their tables into
// BENCHMARKS.md between modulesBegin and modulesEnd (report keeps them).

const (
	modulesBegin = "<!-- modules:begin -->"
	modulesEnd   = "<!-- modules:end -->"
)

// benchCase is one benchmark of a module's test binary, run alone in a
// process.
type benchCase struct {
	label     string // the row's name
	bin       string // key into the built binaries
	bench     string // exact -test.bench pattern
	benchtime string
	tmpdir    string // TMPDIR for the benchmark's files ("": the run's own)
}

// modTable is a set of cases alternated with each other, and how to write
// them.
type modTable struct {
	title string
	cases []benchCase
	write func(out io.Writer, res map[string][]metrics)
}

// metrics is one benchmark line's unit → value.
type metrics map[string]float64

// modBinary is a test binary to build: go test -c of pkg in module dir.
type modBinary struct{ dir, pkg string }

var modBinaries = map[string]modBinary{
	"replica": {"../cluster", "./replica"},
	"e2e":     {"../rocketmq", "./e2e"},
	"grpcapi": {"../rocketmq", "./grpcapi"},
}

// modulesCmd is `go run . modules [-rounds N] [-only cluster|acl] [-o FILE]`.
func modulesCmd(ctx context.Context, args []string, progress io.Writer) error {
	fs := flag.NewFlagSet("bench modules", flag.ContinueOnError)
	fs.SetOutput(progress)
	rounds := fs.Int("rounds", 5, "rounds: every case of a table runs once per round")
	only := fs.String("only", "", "run one table set: cluster or acl (default both)")
	outPath := fs.String("o", defaultReportPath, "file whose modules section to replace (- = print the section)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 {
		return fmt.Errorf("-rounds %d: want at least 1", *rounds)
	}
	tables := modTables()
	if *only != "" {
		prefix, ok := tableSet[*only]
		if !ok {
			return fmt.Errorf("-only %q: want cluster or acl", *only)
		}
		tables = slices.DeleteFunc(tables, func(t modTable) bool { return !strings.HasPrefix(t.title, prefix) })
	}
	tmp, err := os.MkdirTemp("", "bench-modules-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bins, err := buildModuleBinaries(ctx, tmp, tables, progress)
	if err != nil {
		return err
	}
	ran := map[string][]byte{}
	for _, set := range setOrder {
		if *only != "" && set != *only {
			continue
		}
		block, err := runSet(ctx, set, tables, bins, *rounds, tmp, progress)
		if err != nil {
			return err
		}
		ran[set] = block
	}
	var old []byte
	if *outPath != "-" {
		if old, err = os.ReadFile(*outPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	sec := composeModulesSection(modulesSection(old), ran)
	if *outPath == "-" {
		_, err := os.Stdout.Write(sec)
		return err
	}
	return os.WriteFile(*outPath, replaceModulesSection(old, sec), 0o644)
}

// The table sets, in the order the section lists them, and the title
// their tables start with.
var (
	setOrder = []string{"cluster", "acl"}
	tableSet = map[string]string{"cluster": "Replication", "acl": "Access control"}
)

// setMarkers delimit one table set's block in the modules section, so
// -only replaces that set's tables and keeps the other's.
func setMarkers(set string) (begin, end string) {
	return "<!-- modules:" + set + ":begin -->", "<!-- modules:" + set + ":end -->"
}

// runSet runs the tables of one set and returns its block: its tables and
// a line with the date, the rounds and the load, between its markers.
func runSet(ctx context.Context, set string, tables []modTable, bins map[string]string, rounds int, tmp string,
	progress io.Writer) ([]byte, error) {
	begin, end := setMarkers(set)
	started, load := time.Now(), loadAvg()
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n", begin)
	for _, t := range tables {
		if !strings.HasPrefix(t.title, tableSet[set]) {
			continue
		}
		res, err := runModTable(ctx, t, bins, rounds, tmp, progress)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.title, err)
		}
		fmt.Fprintf(&b, "### %s\n\n", t.title)
		t.write(&b, res)
		fmt.Fprintln(&b)
	}
	fmt.Fprintf(&b, "- date: %s, %d rounds, took %s; machine: %s; load average before %s, after %s\n%s",
		started.UTC().Format("2006-01-02 15:04 UTC"), rounds, time.Since(started).Round(time.Second), machine(), load,
		loadAvg(), end)
	return b.Bytes(), nil
}

// composeModulesSection is the modules section: each set's block from ran,
// or else from the old section (nil: none), in setOrder.
func composeModulesSection(old []byte, ran map[string][]byte) []byte {
	var sec bytes.Buffer
	fmt.Fprintf(&sec, "%s\n## The cluster and access control (other modules)\n\n", modulesBegin)
	fmt.Fprintf(&sec, "<!-- Generated by `cd examples/bench && go run . modules`. Do not edit: rerun it. -->\n\n")
	fmt.Fprintf(&sec, "Test binaries of examples/cluster and examples/rocketmq, one benchmark per process, the cases of each\n"+
		"table alternated over the rounds its date line gives (order rotated each round). Figures are medians\n"+
		"over the rounds, [min–max]; \"ratio\" is the ratio of the medians, \"per-round\" the median of each\n"+
		"round's own ratio. `-only cluster` or `-only acl` reruns one set and keeps the other's tables.\n\n")
	for _, set := range setOrder {
		block := ran[set]
		if block == nil {
			block = oldSetBlock(old, set)
		}
		if block != nil {
			sec.Write(bytes.TrimRight(block, "\n"))
			sec.WriteString("\n\n")
		}
	}
	sec.WriteString(modulesEnd + "\n")
	return sec.Bytes()
}

// oldSetBlock is set's block in an earlier modules section, between its
// markers (nil: none).
func oldSetBlock(sec []byte, set string) []byte {
	begin, end := setMarkers(set)
	i, j := bytes.Index(sec, []byte(begin)), bytes.Index(sec, []byte(end))
	if i < 0 || j < i {
		return nil
	}
	return sec[i : j+len(end)]
}

// replaceModulesSection returns doc with its modules section replaced by
// sec (appended when doc has none).
func replaceModulesSection(doc, sec []byte) []byte {
	i, j := bytes.Index(doc, []byte(modulesBegin)), bytes.Index(doc, []byte(modulesEnd))
	if i < 0 || j < i {
		if len(doc) > 0 && !bytes.HasSuffix(doc, []byte("\n\n")) {
			doc = append(bytes.TrimRight(doc, "\n"), "\n\n"...)
		}
		return append(doc, sec...)
	}
	out := append([]byte{}, doc[:i]...)
	out = append(out, bytes.TrimRight(sec, "\n")...)
	return append(out, doc[j+len(modulesEnd):]...)
}

// modulesSection is doc's modules section with its markers, nil if none.
func modulesSection(doc []byte) []byte {
	i, j := bytes.Index(doc, []byte(modulesBegin)), bytes.Index(doc, []byte(modulesEnd))
	if i < 0 || j < i {
		return nil
	}
	return doc[i : j+len(modulesEnd)]
}

func buildModuleBinaries(ctx context.Context, tmp string, tables []modTable, progress io.Writer) (map[string]string, error) {
	bins := map[string]string{}
	for _, t := range tables {
		for _, c := range t.cases {
			if _, ok := bins[c.bin]; ok {
				continue
			}
			mb := modBinaries[c.bin]
			exe := filepath.Join(tmp, c.bin+".test")
			fmt.Fprintf(progress, "building %s %s\n", mb.dir, mb.pkg)
			cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", exe, mb.pkg)
			cmd.Dir, cmd.Stdout, cmd.Stderr = mb.dir, progress, progress
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("build %s %s: %w", mb.dir, mb.pkg, err)
			}
			bins[c.bin] = exe
		}
	}
	return bins, nil
}

// runModTable runs every case once per round, rotated, and returns each
// case's metrics by round.
func runModTable(ctx context.Context, t modTable, bins map[string]string, rounds int, tmp string, progress io.Writer) (map[string][]metrics, error) {
	res := map[string][]metrics{}
	for r := range rounds {
		for k := range t.cases {
			c := t.cases[(k+r)%len(t.cases)]
			m, err := runBenchCase(ctx, c, bins[c.bin], tmp)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.label, err)
			}
			fmt.Fprintf(progress, "round %d/%d %-40s %v\n", r+1, rounds, c.label, m)
			res[c.label] = append(res[c.label], m)
		}
	}
	return res, nil
}

func runBenchCase(ctx context.Context, c benchCase, exe, tmp string) (metrics, error) {
	cmd := exec.CommandContext(ctx, exe, "-test.run", "^$", "-test.bench", c.bench, "-test.benchtime", c.benchtime)
	cmd.Dir = filepath.Join(modBinaries[c.bin].dir, modBinaries[c.bin].pkg) // as go test runs it
	dir := tmp
	if c.tmpdir != "" {
		dir = c.tmpdir
	}
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, tail(out, 2000))
	}
	var found []metrics
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m, ok := parseBenchLine(sc.Text()); ok {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("pattern %q gave %d benchmark lines, want 1\n%s", c.bench, len(found), tail(out, 2000))
	}
	return found[0], nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// parseBenchLine reads "BenchmarkX-2  N  v1 unit1  v2 unit2 ...".
func parseBenchLine(line string) (metrics, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return nil, false
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return nil, false
	}
	m := metrics{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return nil, false
		}
		m[f[i+1]] = v
	}
	return m, true
}

// stat is the median and range of one metric over a case's rounds.
type stat struct{ med, lo, hi float64 }

func statOf(ms []metrics, unit string) (stat, bool) {
	var v []float64
	for _, m := range ms {
		if x, ok := m[unit]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return stat{}, false
	}
	slices.Sort(v)
	return stat{median(v), v[0], v[len(v)-1]}, true
}

func (s stat) String() string { return fmt.Sprintf("%s [%s–%s]", num(s.med), num(s.lo), num(s.hi)) }

func num(x float64) string {
	switch {
	case x >= 1000:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// perRound is the median over rounds of a's metric over b's in the same
// round.
func perRound(a, b []metrics, unit string) float64 {
	var v []float64
	for i := range min(len(a), len(b)) {
		if x, y := a[i][unit], b[i][unit]; x > 0 && y > 0 {
			v = append(v, x/y)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return median(v)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func modTables() []modTable {
	return []modTable{replicationTable(), failoverTable(), aclTable()}
}

// replicationTable: 64 producers of 1 KiB, N raft groups of three members in
// one process against one store's SyncGroup, with what caps it on this
// machine: at cpu-µs/msg, ncpu cores deliver at most ncpu×10^6/cpu msgs/s.
// Four rows say where the rest goes: the 4-group case with every file on
// tmpfs (no disk), bare hashicorp/raft in memory (BenchmarkRaftFloor), and
// the disk's fsyncs alone at the 4-group case's batching and at the best
// its producers allow (BenchmarkFsyncFloor).
func replicationTable() modTable {
	cases := []benchCase{{label: "single SyncGroup", bin: "replica", bench: "^BenchmarkProduceGroups$/^single/", benchtime: "2s"}}
	for _, g := range []int{1, 2, 4} {
		cases = append(cases, benchCase{label: groupsLabel(g), bin: "replica",
			bench: fmt.Sprintf("^BenchmarkProduceGroups$/^replicated/groups=%d/", g), benchtime: "2s"})
	}
	if st, err := os.Stat(shmDir); err == nil && st.IsDir() {
		cases = append(cases, benchCase{label: shmLabel, bin: "replica",
			bench: "^BenchmarkProduceGroups$/^replicated/groups=4/", benchtime: "2s", tmpdir: shmDir})
	}
	cases = append(cases, benchCase{label: floorLabel, bin: "replica",
		bench: "^BenchmarkRaftFloor$/^inmem/groups=4/batch=1/", benchtime: "2s"})
	for _, p := range []int{10, 16} {
		cases = append(cases, benchCase{label: diskFloorLabel(p), bin: "replica",
			bench: fmt.Sprintf("^BenchmarkFsyncFloor$/^files=12/produces=%d$", p), benchtime: "2s"})
	}
	return modTable{title: "Replication: 64 producers, 1 KiB, three members in one process (examples/cluster/replica)", cases: cases,
		write: func(out io.Writer, res map[string][]metrics) { writeReplication(out, cases, res) }}
}

const (
	shmDir     = "/dev/shm"
	shmLabel   = "replicated, 4 raft groups, every file on tmpfs (not durable: no disk)"
	floorLabel = "bare hashicorp/raft, 4 groups: logs in memory, no store, no-op FSM, batched"
)

// diskFloorLabel is the row of the disk alone at p produces per entry
// (BenchmarkFsyncFloor).
func diskFloorLabel(p int) string {
	return fmt.Sprintf("the disk alone: twelve raft logs (4 groups × 3 members) appending and fdatasyncing %d KiB entries, nothing else", p)
}

// groupsLabel is the row of the replicated case with g raft groups.
func groupsLabel(g int) string { return fmt.Sprintf("replicated, %d raft group(s)", g) }

func writeReplication(out io.Writer, cases []benchCase, res map[string][]metrics) {
	ncpu := float64(runtime.NumCPU())
	single := res[cases[0].label]
	sr, _ := statOf(single, "msgs/s")
	fmt.Fprintf(out, "| case | msgs/s | vs single (ratio; per-round) | target ≥ 0.8× (4 groups) | cpu-µs/msg | cores used | produces/entry | raft round µs/entry | CPU cap: %.0f cores / cpu-µs/msg, vs single |\n", ncpu)
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
	for _, c := range cases {
		ms := res[c.label]
		if len(ms) == 0 {
			continue // a case this machine cannot run (no tmpfs, no fdatasync)
		}
		r, _ := statOf(ms, "msgs/s")
		cpu, _ := statOf(ms, "cpu-µs/msg")
		cores, _ := statOf(ms, "cores")
		vs, target, ppe, round, capv := "reference", "", "", "", ""
		if c.label != cases[0].label {
			vs = fmt.Sprintf("%.2f×; %.2f×", r.med/sr.med, perRound(ms, single, "msgs/s"))
			if pe, ok := statOf(ms, "produces/entry"); ok {
				ppe = num(pe.med)
			}
			if re, ok := statOf(ms, "raft-µs/entry"); ok {
				round = num(re.med)
			}
			if c.label == groupsLabel(4) {
				target = yesNo(r.med/sr.med >= 0.8)
			}
		}
		if cpu.med > 0 {
			cp := ncpu * 1e6 / cpu.med
			capv = fmt.Sprintf("%s msgs/s, %.2f×", num(cp), cp/sr.med)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.label, r, vs, target, num(cpu.med), num(cores.med), ppe, round, capv)
	}
	fmt.Fprint(out, replicationNotes)
}

func failoverTable() modTable {
	c := benchCase{label: "leader kill → first acknowledged produce", bin: "replica", bench: "^BenchmarkFailover$", benchtime: "5x"}
	return modTable{title: "Replication: failover, three members in one process (examples/cluster/replica)", cases: []benchCase{c},
		write: func(out io.Writer, res map[string][]metrics) {
			ms := res[c.label]
			p50, _ := statOf(ms, "p50-ms")
			mean, _ := statOf(ms, "ms/failover")
			et, _ := statOf(ms, "election-timeout-ms")
			won, _ := statOf(ms, "raft-elected-p50-ms")
			fmt.Fprintln(out, "| case | p50 ms (5 kills per round) | mean ms | of which raft's election, p50 ms | election timeout | target p50 ≤ 2× election timeout |")
			fmt.Fprintln(out, "|---|---|---|---|---|---|")
			fmt.Fprintf(out, "| %s | %s | %s | %s | %s ms | %s |\n", c.label, p50, mean, won, num(et.med), yesNo(p50.med <= 2*et.med))
			fmt.Fprintln(out, "\nRaft's election is the time until a survivor's hashicorp/raft state is Leader; the rest is the")
			fmt.Fprintln(out, "replica's (barrier, leader services) and the first produce's commit.")
		}}
}

// aclTable: the cost of authentication and authorization per message, ACL
// off against on, for the broker alone and with the official clients.
func aclTable() modTable {
	type pair struct {
		name, unit, off, on, paired string
		floor                       string // the case whose hmac-cpu-µs/msg is added to paired's off side
		control                     bool   // no target: how far from 1 the method lands
	}
	var cases []benchCase
	add := func(label, bin, bench, bt string) string {
		cases = append(cases, benchCase{label: label, bin: bin, bench: bench, benchtime: bt})
		return label
	}
	var pairs []pair
	hmacFloor := add("hmac floor", "e2e", "^BenchmarkSignedContentHMAC$", "1000000x")
	for _, flush := range []string{"sync", "async"} {
		pairs = append(pairs, pair{name: "remoting send, pre-signed frames (broker's check only), both brokers in one process, flush=" + flush,
			unit: "cpu-µs/msg", paired: add("raw paired "+flush, "e2e", "^BenchmarkRemotingACLRawPaired$/^flush="+flush+"$", "100000x")},
			pair{name: "floor: that ACL-off send plus one HMAC-SHA1 over its signed content, nothing else (the least any check costs)",
				unit: "cpu-µs/msg", paired: "raw paired " + flush, floor: hmacFloor},
			pair{name: "control: the same with ACL off in both brokers, flush=" + flush, unit: "cpu-µs/msg", control: true,
				paired: add("raw paired control "+flush, "e2e", "^BenchmarkRemotingACLRawPaired$/^flush="+flush+",control$", "100000x")})
	}
	for _, flush := range []string{"sync", "async"} {
		pre := "^BenchmarkRemotingACLChildPaired$/^flush=" + flush
		pairs = append(pairs, pair{name: "remoting send, v2 client (signing when on), both brokers in child processes, flush=" + flush,
			unit: "broker-cpu-µs/msg", paired: add("child paired "+flush, "e2e", pre+"$", "20000x")},
			pair{name: "control: the same with ACL off in both brokers and no signing, flush=" + flush, unit: "broker-cpu-µs/msg",
				control: true, paired: add("child paired control "+flush, "e2e", pre+",control$", "20000x")})
	}
	pairs = append(pairs,
		pair{name: "remoting receive + ack, v2 push consumer (whole process)", unit: "cpu-µs/msg",
			off: add("consume off", "e2e", "^BenchmarkRemotingACL$/^consume$/^acl=off$", "20000x"),
			on:  add("consume on", "e2e", "^BenchmarkRemotingACL$/^consume$/^acl=on$", "20000x")})
	for _, w := range []struct{ name, bench string }{
		{"gRPC send, v5 client (signing when on), flush=sync", "send"},
		{"gRPC receive + ack, v5 client (signing when on)", "receive-ack"}} {
		pre := "^BenchmarkGRPCACLPaired$/^" + w.bench
		pairs = append(pairs, pair{name: w.name + ", both brokers and clients in one process (whole process)", unit: "cpu-µs/msg",
			paired: add("grpc paired "+w.bench, "grpcapi", pre+"$", "20000x")},
			pair{name: "control: the same with ACL off in both brokers and no signing", unit: "cpu-µs/msg", control: true,
				paired: add("grpc paired control "+w.bench, "grpcapi", pre+",control$", "20000x")})
	}
	return modTable{title: "Access control: CPU per message, ACL off and on (examples/rocketmq)", cases: cases,
		write: func(out io.Writer, res map[string][]metrics) {
			fmt.Fprintln(out, "| workload | CPU measured | ACL off | ACL on | on / off (ratio; per-round) | target ≤ 1.10× |")
			fmt.Fprintln(out, "|---|---|---|---|---|---|")
			row := func(name, unit, offLabel, onLabel string) {
				off, _ := statOf(res[offLabel], unit)
				on, _ := statOf(res[onLabel], unit)
				ratio := on.med / off.med
				fmt.Fprintf(out, "| %s | %s | %s | %s | %.2f×; %.2f× | %s |\n", name, unit, off, on, ratio,
					perRound(res[onLabel], res[offLabel], unit), yesNo(ratio <= 1.10))
			}
			for _, p := range pairs {
				if p.floor != "" {
					off, _ := statOf(res[p.paired], "off-"+p.unit)
					h, _ := statOf(res[p.floor], "hmac-cpu-µs/msg")
					fmt.Fprintf(out, "| %s | %s | %s | + %s | %.2f× | (floor) |\n", p.name, p.unit, num(off.med), h, (off.med+h.med)/off.med)
					continue
				}
				if p.paired != "" {
					ms := res[p.paired]
					off, _ := statOf(ms, "off-"+p.unit)
					on, _ := statOf(ms, "on-"+p.unit)
					per, _ := statOf(ms, "on/off")
					ratio := on.med / off.med
					verdict := yesNo(ratio <= 1.10)
					if p.control {
						verdict = "(control)"
					}
					fmt.Fprintf(out, "| %s | %s | %s | %s | %.2f×; %.2f× | %s |\n", p.name, p.unit, off, on, ratio, per.med, verdict)
					continue
				}
				row(p.name, p.unit, p.off, p.on)
			}
			fmt.Fprint(out, aclNotes)
		}}
}

// replicationNotes follow the table.
const replicationNotes = `
The CPU cap is the rate the case could reach with every core busy on it at its measured CPU per
message: three replicas in one process do three stores' and three raft logs' work per message.
The raft round is from an entry's proposal to its apply on the leader. The tmpfs row is the same
code with no disk under it; the bare-raft row is hashicorp/raft alone doing less than the product
(nothing durable, nothing stored), with a minimal batcher: what the replicated rows lose to it is
their logs' fsyncs (twelve raft logs share this one disk at 4 groups), the stores and their own work.
The disk-alone rows are those fsyncs with nothing else running: twelve files, one goroutine each,
each appending an entry's bodies (10 KiB: what the 4-group case joins per entry; 16 KiB: the most
it could, 64 producers over 4 groups with one entry in flight per group) and fdatasyncing it. Every
entry is synced by all three members (the 4-group case measures 3 fsyncs per entry), so their
msgs/s is syncs/s × produces / 3: no replicated case batching that way can pass it on this disk,
whatever its own code costs.
`

// aclNotes follow the table.
const aclNotes = `
Every row but the v2 push consumer's is paired: a broker with ACL off and one with it on (each
with its own client where clients run) in one run on the same disk, their messages alternated in
20 slices each, so a shared machine's drift reaches both sides alike; "per-round" is the median of
each run's own on/off ratio. The control rows run ACL off in both sides and sign in neither: how
far their ratio lands from 1 is what the method cannot tell apart on this machine. With ACL on the
official client signs every request, and that is in the rows: the v5 client's signing in the
whole process's CPU; the v2 client's signing (the client's own CPU, not in the
broker's column) through its slower senders, which cost the broker more per message (fewer sends
per read and per fsync). The pre-signed rows send the same signed frames to both brokers: the
broker's own check alone; the floor row under each adds to its ACL-off side what one HMAC-SHA1
over the frame's signed content (header values and 1 KiB body, which the signature covers) costs
alone (BenchmarkSignedContentHMAC, same run): no check can cost less.
`
