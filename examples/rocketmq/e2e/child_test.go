//go:build !race

package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokercore/brokercore/brokertest"
	"github.com/stretchr/testify/require"
)

type child struct {
	cmd  *exec.Cmd
	done chan error
}

// startChild runs the test binary as a child of the given kind and waits
// for its "ready" line.
func startChild(t testing.TB, kind string, env ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "E2E_CHILD="+kind), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case ready <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, out)
	}()
	c := &child{cmd: cmd, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() { c.kill() })
	select {
	case line := <-ready:
		require.Equal(t, "ready", line)
	case err := <-c.done:
		t.Fatalf("child %s exited: %v", kind, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("child %s not ready", kind)
	}
	return c
}

// kill sends SIGKILL and waits; idempotent.
func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		<-c.done
		c.done <- nil
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (c *child) stop(t testing.TB) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-c.done:
		c.done <- err
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("child did not stop")
	}
}

// freeAddr is an address for a server the test starts later (brokertest.FreeAddr:
// outside the ephemeral range, so no outgoing connection takes it first).
func freeAddr(t testing.TB) string { return brokertest.FreeAddr(t) }

func hasSuffix(id, instance string) bool { return strings.HasSuffix(id, "@"+instance) }
