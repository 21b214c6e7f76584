package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/nats-io/nats.go/jetstream"
)

// A crash cannot be staged inside this process: the store holds its flock
// and goroutines until Close, and an embedded nats-server cannot be killed
// without its shutdown path. So the crashed log is made by a child process
// (this same binary, told by the environment) that fills it and exits with
// every acknowledged write in the page cache and no Close, Sync or shutdown
// — what kill -9 leaves. Each repetition then restores a copy of that
// directory (untimed) and times the recovery in this process.

const (
	envChild = "BROKERCORE_BENCH_CHILD" // "store" or "jetstream"
	envDir   = "BROKERCORE_BENCH_DIR"
	envN     = "BROKERCORE_BENCH_N"
	envSize  = "BROKERCORE_BENCH_SIZE"
)

// maybeChild runs the child side and exits if the environment asks for it.
// Call it first in main (and TestMain).
func maybeChild() {
	sys := os.Getenv(envChild)
	if sys == "" {
		return
	}
	n, err1 := strconv.ParseInt(os.Getenv(envN), 10, 64)
	size, err2 := strconv.Atoi(os.Getenv(envSize))
	dir := os.Getenv(envDir)
	if err1 != nil || err2 != nil || dir == "" {
		fmt.Fprintln(os.Stderr, "bench child: bad environment")
		os.Exit(2)
	}
	if err := childFill(sys, dir, n, size); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(1)
	}
	os.Exit(0) // no Close, no Sync, no shutdown: the crash
}

func childFill(sys, dir string, n int64, size int) error {
	e := &env{ctx: context.Background()}
	switch sys {
	case "store":
		st, err := store.Open(dir, store.Options{Sync: store.SyncNone})
		if err != nil {
			return err
		}
		msgs := newMessages(128, payload(size))
		for left := n; left > 0; {
			k := min(left, 128)
			if err := st.Append(msgs[:k]...); err != nil {
				return err
			}
			left -= k
		}
		return nil
	case "jetstream":
		node, err := startJS(dir, false, jetstream.WithPublishAsyncMaxPending(4096))
		if err != nil {
			return err
		}
		if err := node.createStream(e.ctx); err != nil {
			return err
		}
		return fillJS(e.ctx, node, n, size)
	}
	return fmt.Errorf("unknown system %q", sys)
}

// crashedLog runs the child for sys and returns the directory it left.
func crashedLog(e *env, sys string, n int64, size int) (string, error) {
	dir, err := e.dir("crashed-" + sys)
	if err != nil {
		return "", err
	}
	exe, err := os.Executable()
	if err != nil {
		return dir, err
	}
	cmd := exec.CommandContext(e.ctx, exe)
	cmd.Env = append(os.Environ(), envChild+"="+sys, envDir+"="+dir,
		envN+"="+strconv.FormatInt(n, 10), envSize+"="+strconv.Itoa(size))
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("child %s: %w: %s", sys, err, out)
	}
	return dir, nil
}

// copyTree copies the regular files and directories of src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o750)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// storeCrashCase times store.Open of a log whose writer died without Close.
func storeCrashCase(system, ref string, n int64, size int) *bcase {
	var pristine string
	c := &bcase{system: system, ref: ref, op: "Open after kill (recovery included)"}
	c.prepare = func(e *env) error {
		var err error
		pristine, err = crashedLog(e, "store", n, size)
		return err
	}
	c.cleanup = func() { os.RemoveAll(pristine) }
	c.run = func(e *env) (sample, error) {
		dir, err := e.dir("store-recover")
		if err != nil {
			return sample{}, err
		}
		defer os.RemoveAll(dir)
		if err := copyTree(pristine, dir); err != nil {
			return sample{}, err
		}
		tm := startTimer()
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			return sample{}, err
		}
		got := st.MaxOffset(benchTopic, 0)
		el, cpu := tm.stop()
		stats := st.Stats()
		if err := st.Close(); err != nil {
			return sample{}, err
		}
		note := fmt.Sprintf("%d of %d msgs of %d B recovered; %d replayed, %d B cut", got, n, size, stats.Replayed, stats.RecoveryCut)
		return sample{msgs: got, bytes: got * int64(size), elapsed: el, cpu: cpu, lat: []time.Duration{el}, note: note}, nil
	}
	return c
}

// jsCrashCase times a server start over a store whose server died without
// shutdown.
func jsCrashCase(system string, n int64, size int) *bcase {
	var pristine string
	c := &bcase{system: system, op: "server start after kill (recovery included)"}
	c.prepare = func(e *env) error {
		var err error
		pristine, err = crashedLog(e, "jetstream", n, size)
		return err
	}
	c.cleanup = func() { os.RemoveAll(pristine) }
	c.run = func(e *env) (sample, error) {
		dir, err := e.dir("js-recover")
		if err != nil {
			return sample{}, err
		}
		defer os.RemoveAll(dir)
		if err := copyTree(pristine, dir); err != nil {
			return sample{}, err
		}
		tm := startTimer()
		node, err := startJS(dir, false)
		if err != nil {
			return sample{}, err
		}
		defer node.stop()
		s, err := node.js.Stream(e.ctx, jsStream)
		if err != nil {
			return sample{}, err
		}
		el, cpu := tm.stop()
		got := int64(s.CachedInfo().State.Msgs)
		note := fmt.Sprintf("%d of %d msgs of %d B recovered", got, n, size)
		return sample{msgs: got, bytes: got * int64(size), elapsed: el, cpu: cpu, lat: []time.Duration{el}, note: note}, nil
	}
	return c
}
