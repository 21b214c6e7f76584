package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// aclFlags are -acl, -insecure-allow-remote and -metrics-public.
type aclFlags struct {
	path string
}

func addACLFlags(fs *flag.FlagSet, cfg *server.Config) *aclFlags {
	f := &aclFlags{}
	fs.StringVar(&f.path, "acl", "", "access control file (JSON users and rules, see the README); reloaded on SIGHUP; \"\" = ACL off")
	fs.BoolVar(&cfg.InsecureAllowRemote, "insecure-allow-remote", false,
		"allow listening on non-loopback addresses with ACL off (anyone who can connect may read, write and reset everything)")
	fs.BoolVar(&cfg.PublicMetrics, "metrics-public", false, "serve /metrics without credentials while ACL is on")
	return f
}

// load opens the ACL file into cfg.ACL (nothing when -acl is unset).
func (f *aclFlags) load(cfg *server.Config, log *slog.Logger) error {
	if f.path == "" {
		return nil
	}
	az, err := acl.Open(f.path, acl.Options{Logger: log.With("pkg", "acl")})
	if err != nil {
		return err
	}
	cfg.ACL, cfg.ACLFile = az, f.path
	return nil
}

// watch reloads the ACL file on every SIGHUP until ctx is done; the
// returned stop waits for the watcher. A bad file is logged and the rules
// in force stay.
func (f *aclFlags) watch(ctx context.Context, az *acl.Authorizer, log *slog.Logger) (stop func()) {
	if az == nil {
		return func() {}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := az.ReloadFile(f.path); err != nil {
					log.Error("acl reload failed; the rules in force stay", "path", f.path, "err", err)
				} else {
					log.Info("acl reloaded", "path", f.path)
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		wg.Wait()
	}
}
