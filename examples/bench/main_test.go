package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	maybeChild() // the crash rows re-execute this binary to make a crashed log
	os.Exit(m.Run())
}

// TestEveryCaseRunsAndLeavesNoDataBehind runs every workload at a tiny size
// and checks that each row made it into the table without failing, that the
// reopen rows saw every message, and that the data root was removed.
func TestEveryCaseRunsAndLeavesNoDataBehind(t *testing.T) {
	parent := t.TempDir()
	var out bytes.Buffer
	progress := timedWriter{t}
	cfg := &config{sizes: tinySizes, quick: true, dir: parent, workloads: allWorkloads, out: &out, progress: progress}
	res, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	report(&out, cfg, res, time.Now(), loadAvg())
	t.Log("\n" + out.String())
	for _, r := range res {
		if r.err != nil {
			t.Errorf("%s / %s failed: %v", r.c.workload, r.c.system, r.err)
			continue
		}
		if len(r.samples) != cfg.reps {
			t.Errorf("%s / %s: %d samples, want %d", r.c.workload, r.c.system, len(r.samples), cfg.reps)
		}
		for _, s := range r.samples {
			if s.msgs <= 0 || s.elapsed <= 0 || len(s.lat) == 0 {
				t.Errorf("%s / %s: empty sample %+v", r.c.workload, r.c.system, s)
			}
		}
		if r.c.workload == wReopen && strings.HasPrefix(r.c.system, "brokercore") {
			for _, s := range r.samples {
				if s.msgs != cfg.reopenN {
					t.Errorf("%s recovered %d of %d messages", r.c.system, s.msgs, cfg.reopenN)
				}
			}
		}
		if !strings.Contains(out.String(), "| "+r.c.system+" |") {
			t.Errorf("row %q missing from the table", r.c.system)
		}
	}
	if len(res) != 36 {
		t.Errorf("%d cases, want 36", len(res))
	}
	for _, v := range []string{"nats-server/v2 v", "nats.go v", "tidwall/wal v"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("versions line lacks %q", v)
		}
	}
	left, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("data left behind under %s: %v", parent, left)
	}
}

// TestWorkloadFilterKeepsTableOrderAndRejectsUnknownNames guards -workloads.
func TestWorkloadFilterKeepsTableOrderAndRejectsUnknownNames(t *testing.T) {
	got, err := parseWorkloads("reopen, append")
	if err != nil || strings.Join(got, ",") != "append,reopen" {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := parseWorkloads("append,fsync"); err == nil {
		t.Fatal("unknown workload accepted")
	}
	if got, _ := parseWorkloads(""); len(got) != len(allWorkloads) {
		t.Fatalf("empty filter ran %v", got)
	}
}

type timedWriter struct{ t *testing.T }

func (w timedWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s %s", time.Now().Format("15:04:05.000"), strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestReportWritesBenchmarksMD runs the generator of BENCHMARKS.md as
// `go run . report -tiny -o FILE` does and checks the document names the
// machine, the date and the load average and has every row and the targets.
func TestReportWritesBenchmarksMD(t *testing.T) {
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	// The modules section is `go run . modules`' own: report keeps it.
	sec := modulesBegin + "\n### the cluster's table\n" + modulesEnd
	if err := os.WriteFile(out, []byte("# old\n\n"+sec+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := mainErr([]string{"report", "-tiny", "-dir", t.TempDir(), "-o", out}, io.Discard, timedWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	t.Log("\n" + doc)
	for _, want := range []string{"# Benchmarks", "go run . report", "- date: ", "- run: tiny", "- machine: ",
		"- load average (1, 5, 15 min) before ", "| target | measured | met |", "msgs/s: median [range]"} {
		if !strings.Contains(doc, want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	if got := string(modulesSection(raw)); got != sec {
		t.Errorf("modules section %q, want %q", got, sec)
	}
	if strings.Contains(doc, "# old") {
		t.Error("the rest of the old document was kept")
	}
	for _, c := range cases(&config{sizes: tinySizes, workloads: allWorkloads}) {
		if !strings.Contains(doc, "| "+c.system+" |") {
			t.Errorf("row %q missing", c.system)
		}
	}
}
