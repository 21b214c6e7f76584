package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestTimerRowsDeliverEveryTimerOnceAndNeverEarly runs the four timer rows
// at a small size: each system delivers every timer exactly once and never
// before its time (the runs fail otherwise), and every row reaches the
// table with a lag for each timer.
func TestTimerRowsDeliverEveryTimerOnceAndNeverEarly(t *testing.T) {
	var out bytes.Buffer
	cfg := &config{sizes: sizes{reps: 1, timerN: 500}, quick: true, dir: t.TempDir(), workloads: []string{wTimers}, out: &out, progress: timedWriter{t}}
	res, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	report(&out, cfg, res, time.Now(), loadAvg())
	t.Log("\n" + out.String())
	if len(res) != 4 {
		t.Fatalf("%d timer rows, want 4", len(res))
	}
	for _, r := range res {
		if r.err != nil {
			t.Errorf("%s failed: %v", r.c.system, r.err)
			continue
		}
		for _, s := range r.samples {
			if s.msgs != cfg.timerN || int64(len(s.lat)) != cfg.timerN {
				t.Errorf("%s: %d timers, %d lags; want %d", r.c.system, s.msgs, len(s.lat), cfg.timerN)
			}
		}
		if !strings.Contains(out.String(), "| "+r.c.system+" |") {
			t.Errorf("row %q missing from the table", r.c.system)
		}
	}
}
