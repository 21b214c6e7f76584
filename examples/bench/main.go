// Command bench compares brokercore with raw tidwall/wal and an embedded
// NATS JetStream server in one process: appends without fsync, durable
// appends, consumption with and without acks, and reopening a large log.
// Every system runs the same workload round-robin, repetition after
// repetition, so machine drift hits all of them alike; the result is one
// Markdown table.
//
//	go run . report               # every row; writes ../../BENCHMARKS.md (see report -h)
//	go run . modules              # the cluster's and ACL's tables (other modules' benchmarks) into it
//	go run .                      # full run, under 5 minutes on 2 cores
//	go run . -quick               # under a minute, smaller sizes, 1 repetition
//	go run . -workloads consume   # only some workloads (append,durable,consume,reopen,timers,pop,queues)
//	go run . -dir /mnt/disk       # put the temporary data there
//	go run . -cpuprofile cpu.out  # profile the run (all systems share the process)
//
// Data lives in a temporary directory under -dir and is removed at the end,
// also on Ctrl-C. Nothing listens on a socket: the JetStream client uses an
// in-process connection.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

func main() {
	maybeChild()
	if err := mainErr(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func mainErr(args []string, out, progress io.Writer) error {
	if len(args) > 0 && args[0] == "report" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return reportCmd(ctx, args[1:], progress)
	}
	if len(args) > 0 && args[0] == "modules" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return modulesCmd(ctx, args[1:], progress)
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(progress)
	quick := fs.Bool("quick", false, "smaller sizes and one repetition: under a minute")
	dir := fs.String("dir", os.TempDir(), "parent directory of the temporary data root")
	workloads := fs.String("workloads", "all", "comma-separated subset of "+strings.Join(allWorkloads, ","))
	reps := fs.Int("reps", 0, "repetitions per case (0 = 3 full, 2 quick)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ws, err := parseWorkloads(*workloads)
	if err != nil {
		return err
	}
	cfg := &config{sizes: fullSizes, quick: *quick, dir: *dir, workloads: ws, out: out, progress: progress}
	if *quick {
		cfg.sizes = quickSizes
	}
	if *reps > 0 {
		cfg.reps = *reps
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started, load := time.Now(), loadAvg()
	treeRev = gitRev()
	res, err := run(ctx, cfg)
	if err != nil {
		return err
	}
	report(out, cfg, res, started, load)
	for _, r := range res {
		if r.err != nil {
			return fmt.Errorf("%s / %s: %w", r.c.workload, r.c.system, r.err)
		}
	}
	return nil
}
