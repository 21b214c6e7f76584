package grpcapi_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/internal/cpuclock"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// The benchmarks' broker=child rows run the program in a child process (the
// test binary itself, told by these variables to serve), so the client's
// CPU and the broker's are measured apart.
const (
	benchChildEnv   = "GRPCAPI_BENCH_CHILD"   // "real" (rmqtest's program, -flush async) or "null" (nullServer)
	benchDirEnv     = "GRPCAPI_BENCH_DIR"     // its data directory
	benchPrefillEnv = "GRPCAPI_BENCH_PREFILL" // real: 1 KiB messages stored in bench-recv first
	benchBatchEnv   = "GRPCAPI_BENCH_BATCH"   // null: "1" prepares the batch of bench-recv
)

// runBenchChild serves until it is killed; it prints "ready <endpoint>".
func runBenchChild(kind string) int {
	dir := os.Getenv(benchDirEnv)
	var br *rmqtest.Broker
	var err error
	switch kind {
	case "real":
		if br, err = rmqtest.New(server.Config{Dir: dir, Flush: "async"}); err == nil {
			if n, _ := strconv.Atoi(os.Getenv(benchPrefillEnv)); n > 0 {
				err = fill(br, "bench-recv", n)
			}
		}
	case "null":
		var null *nullServer
		if br, null, err = newNullProgram(dir); err == nil && os.Getenv(benchBatchEnv) == "1" {
			err = null.prepare(br, "bench-recv")
		}
	default:
		err = fmt.Errorf("unknown child %q", kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 1
	}
	fmt.Println("ready " + br.GRPC)
	select {} // until killed
}

// startBenchChild starts a child of the given kind and returns it as a
// benchmark target; it is killed when the benchmark ends.
func startBenchChild(b *testing.B, kind string, env ...string) target {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), benchChildEnv+"="+kind, benchDirEnv+"="+b.TempDir()), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			ready <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(done)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	var line string
	select {
	case line = <-ready:
	case <-done:
		b.Fatalf("bench child %s exited before it was ready", kind)
	case <-time.After(30 * time.Second):
		b.Fatalf("bench child %s not ready in 30 s", kind)
	}
	ep, ok := strings.CutPrefix(line, "ready ")
	if !ok {
		b.Fatalf("bench child %s said %q", kind, line)
	}
	pid := cmd.Process.Pid
	return target{endpoint: ep, brokerCPU: func() (time.Duration, bool) { return cpuclock.Process(pid) }}
}
