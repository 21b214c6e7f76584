package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run starts the program and blocks until ctx is done (SIGINT/SIGTERM),
// then shuts down cleanly. It returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("rocketmq", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg server.Config
	fs.StringVar(&cfg.Dir, "data", "./rocketmq-data", "data directory")
	fs.StringVar(&cfg.NameSrvAddr, "namesrv-addr", server.DefaultNameSrvAddr, "name server listen address")
	fs.StringVar(&cfg.BrokerAddr, "broker-addr", server.DefaultBrokerAddr, "broker listen address (advertised to clients; 0.0.0.0 is advertised as 127.0.0.1)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", server.DefaultMetricsAddr, `Prometheus /metrics and /admin/ HTTP address ("-" = off)`)
	fs.IntVar(&cfg.QueueNums, "queues", server.DefaultQueueNums, "queues of an auto-created topic")
	fs.DurationVar(&cfg.LockMaxLiveTime, "lock-max-live-time", 60*time.Second, "orderly queue lock lease")
	fs.StringVar(&cfg.Flush, "flush", "sync", "sync: answer a send after its fsync (group commit); async: fsync every second (Apache's default)")
	grpcFlags(fs, &cfg)
	aclf := addACLFlags(fs, &cfg)
	rf := replicatedFlags(fs)
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	gogc, err := server.GCPercent()
	if err != nil {
		fmt.Fprintln(stderr, "bad environment:", err)
		return 2
	}
	fs.IntVar(&gogc, "gogc", gogc, "garbage collector target percent (-1 = off; default: GOGC when set, else 400: see server.DefaultGCPercent)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(stderr, "bad -log-level:", err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	if err := aclf.load(&cfg, cfg.Logger); err != nil {
		cfg.Logger.Error("bad -acl file", "err", err)
		return 2
	}
	defer aclf.watch(ctx, cfg.ACL, cfg.Logger)()
	prev := server.SetGCPercent(gogc)
	defer server.SetGCPercent(prev)
	if rf.id != "" {
		return runReplicated(ctx, cfg, rf, cfg.Logger)
	}
	s, err := server.Start(cfg)
	if err != nil {
		cfg.Logger.Error("start", "err", err)
		return 1
	}
	<-ctx.Done()
	cfg.Logger.Info("shutting down")
	if err := s.Close(); err != nil {
		cfg.Logger.Error("shutdown", "err", err)
		return 1
	}
	return 0
}
