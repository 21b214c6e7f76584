// Command broker is a small real message broker over HTTP+JSON, composed
// from every brokercore package: store, pop, lock, schedule, consumer and
// offset. See README.md for the API with curl lines.
//
//	go run ./examples/broker                 # 127.0.0.1:8080, data in ./brokercore-data
//	go run ./examples/broker -addr :9000 -data /var/lib/bc -sync interval
//	go run ./examples/broker --demo          # a scripted tour against itself, then exit
//
// SIGINT or SIGTERM shuts it down cleanly: the listener closes, long polls
// wake, the scheduler generation stops, offsets are flushed and the store is
// closed; the exit code is 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/brokercore/brokercore/schedule"
)

// shutdownTimeout bounds how long in-flight requests may finish after a
// signal; long polls are woken at once, so this is rarely reached.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run is main without the process: it parses args, serves until ctx ends
// (the signal) and returns the exit code. ready, when set, gets the
// address actually listened on (tests listen on port 0).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(addr string)) int {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.Addr, "addr", DefaultAddr, "listen address")
	fs.StringVar(&cfg.DataDir, "data", DefaultDataDir, "data directory (store, offsets, schedule progress, handle key)")
	fs.StringVar(&cfg.Sync, "sync", DefaultSync, "fsync policy: group (each append answered after fsync; concurrent appends share one), interval, none")
	fs.StringVar(&cfg.Name, "name", DefaultName, "broker name used in queue locks")
	fs.StringVar(&cfg.Levels, "levels", schedule.DefaultLevels, "delay levels; level L is the L-th entry")
	fs.Int64Var(&cfg.MaxBody, "max-body", DefaultMaxBody, "request body limit in bytes")
	fs.DurationVar(&cfg.MaxPoll, "max-poll", DefaultMaxPoll, "longest long-poll wait a pop may ask for")
	fs.BoolVar(&cfg.OffsetFallback, "offset-backup", false, "if the offsets file is corrupt, start from its backup offsets.bak (logged) instead of refusing to start")
	verbose := fs.Bool("v", false, "log every package's debug lines")
	demo := fs.Bool("demo", false, "run a scripted tour against an in-process broker in a temporary directory, then exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "broker: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if _, err := syncPolicy(cfg.Sync); err != nil {
		fmt.Fprintf(stderr, "broker: -%v\n", err)
		return 2
	}
	if _, err := schedule.ParseLevels(cfg.Levels); err != nil {
		fmt.Fprintf(stderr, "broker: -levels: %v\n", err)
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = logger

	if *demo {
		if err := runDemo(ctx, stdout, logger); err != nil {
			logger.Error("demo failed", "err", err)
			return 1
		}
		return 0
	}
	if err := serve(ctx, cfg, ready); err != nil {
		logger.Error("broker stopped with an error", "err", err)
		return 1
	}
	return 0
}

// serve runs the broker until ctx ends, then shuts it down in order.
func serve(ctx context.Context, cfg Config, ready func(addr string)) error {
	b, err := newBroker(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", b.cfg.Addr)
	if err != nil {
		return errors.Join(err, b.Close())
	}
	srv := b.NewServer(b.cfg.Addr)
	b.log.Info("brokercore broker listening", "addr", "http://"+ln.Addr().String(),
		"data", b.cfg.DataDir, "sync", b.cfg.Sync)
	if ready != nil {
		ready(ln.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served: // the listener failed under us
		return errors.Join(err, b.Close())
	case <-ctx.Done():
	}
	b.log.Info("shutting down: closing listener, waking long polls")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = b.Shutdown(sctx, srv)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err == nil {
		b.log.Info("broker stopped cleanly")
	}
	return err
}
