package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brokercore/brokercore/brokertest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("RMQ_MAIN_CHILD") == "1" {
		// Run as the program itself (signal test).
		ctx, stop := signalContext()
		defer stop()
		os.Exit(run(ctx, strings.Fields(os.Getenv("RMQ_MAIN_ARGS")), os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// freeAddr is an address for a server the test starts later (brokertest.FreeAddr:
// outside the ephemeral range, so no outgoing connection takes it first).
func freeAddr(t *testing.T) string { return brokertest.FreeAddr(t) }

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesAndStopsCleanly(t *testing.T) {
	orig := debug.SetGCPercent(100)
	debug.SetGCPercent(orig)
	dir := t.TempDir()
	ns, br := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"-data", dir, "-namesrv-addr", ns, "-broker-addr", br, "-metrics-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-gogc", "250"}, &out)
	}()
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", br)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 250, debug.SetGCPercent(250), "-gogc is the running program's collector target")
	cancel()
	require.Equal(t, 0, <-done)
	require.Equal(t, orig, debug.SetGCPercent(orig), "run restores the collector target it found")
	require.Contains(t, out.String(), "rocketmq broker stopped")
	require.DirExists(t, filepath.Join(dir, "store"))
}

func TestBadFlagsExitTwo(t *testing.T) {
	var out syncBuf
	require.Equal(t, 2, run(context.Background(), []string{"-nope"}, &out))
	require.Equal(t, 2, run(context.Background(), []string{"-log-level", "loud"}, &out))
	require.Equal(t, 2, run(context.Background(), []string{"-gogc", "lots"}, &out))
	t.Setenv("GOGC", "lots")
	require.Equal(t, 2, run(context.Background(), nil, &out))
	require.Contains(t, out.String(), `GOGC="lots"`)
}

func TestSIGTERMExitsZero(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		br := freeAddr(t)
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), "RMQ_MAIN_CHILD=1", "RMQ_MAIN_ARGS=-data "+t.TempDir()+" -namesrv-addr "+freeAddr(t)+
			" -broker-addr "+br+" -metrics-addr - -grpc-addr -")
		var out syncBuf
		cmd.Stderr = &out
		require.NoError(t, cmd.Start())
		require.Eventually(t, func() bool {
			c, err := net.Dial("tcp", br)
			if err == nil {
				c.Close()
			}
			return err == nil
		}, 20*time.Second, 20*time.Millisecond)
		require.NoError(t, cmd.Process.Signal(sig))
		require.NoError(t, cmd.Wait(), out.String())
		require.Equal(t, 0, cmd.ProcessState.ExitCode())
		require.Contains(t, out.String(), "rocketmq broker stopped")
	}
}
