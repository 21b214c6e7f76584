package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestPopRowsAckEveryMessageOfEveryQueue runs the three pop rows at a small
// size: each run pops and acks every message of every queue (it fails
// otherwise: an empty pop before the end, or a queue whose committed
// offset is short of its end), and every row reaches the table, the 256
// queues one with its target line.
func TestPopRowsAckEveryMessageOfEveryQueue(t *testing.T) {
	var out bytes.Buffer
	cfg := &config{sizes: sizes{reps: 2, consumeN: 1000}, quick: true, dir: t.TempDir(), workloads: []string{wPop}, out: &out, progress: timedWriter{t}}
	res, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	report(&out, cfg, res, time.Now(), loadAvg())
	t.Log("\n" + out.String())
	if len(res) != 3 {
		t.Fatalf("%d pop rows, want 3", len(res))
	}
	for _, r := range res {
		if r.err != nil {
			t.Errorf("%s failed: %v", r.c.system, r.err)
			continue
		}
		if len(r.samples) != cfg.reps {
			t.Errorf("%s: %d samples, want %d", r.c.system, len(r.samples), cfg.reps)
		}
		for _, s := range r.samples {
			if s.msgs != cfg.consumeN || len(s.lat) == 0 {
				t.Errorf("%s: %d messages, %d pops; want %d messages", r.c.system, s.msgs, len(s.lat), cfg.consumeN)
			}
		}
		if !strings.Contains(out.String(), "| "+r.c.system+" |") {
			t.Errorf("row %q missing from the table", r.c.system)
		}
	}
	if !strings.Contains(out.String(), "| pop+ack, 256 queues AllQueues ≥ 0.6× 1 queue |") {
		t.Error("the 256-queue target is missing from the targets")
	}
}
