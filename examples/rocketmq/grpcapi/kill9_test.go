package grpcapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/brokertest"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

// The kill -9 test runs the broker as a child process: the test binary
// itself, told by these variables to serve instead of testing.
const (
	childEnv     = "GRPCAPI_CHILD_BROKER" // the data directory
	childAddrEnv = "GRPCAPI_CHILD_ADDR"
)

// runChildBroker serves brokercore.Open (fsync before every answer, the
// default) over gRPC until it is killed.
func runChildBroker() int {
	dir, addr := os.Getenv(childEnv), os.Getenv(childAddrEnv)
	core, err := brokercore.Open(dir, brokercore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child broker:", err)
		return 1
	}
	if _, err := grpcapi.Start(core, addr, grpcapi.Options{CertDir: dir}); err != nil {
		fmt.Fprintln(os.Stderr, "child broker:", err)
		return 1
	}
	fmt.Println("ready")
	select {} // until SIGKILL: nothing is closed cleanly
}

type childBroker struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startChildBroker(t *testing.T, dir, addr string) *childBroker {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childAddrEnv+"="+addr)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &childBroker{cmd: cmd, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() && sc.Text() == "ready" {
			close(ready)
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.kill)
	select {
	case <-ready:
	case <-c.done:
		t.Fatal("child broker exited before it was ready")
	case <-time.After(30 * time.Second):
		t.Fatal("child broker not ready in 30 s")
	}
	return c
}

// kill is kill -9, and waits for the process to be gone.
func (c *childBroker) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// freeAddr is an address for a server the test starts later (brokertest.FreeAddr:
// outside the ephemeral range, so no outgoing connection takes it first).
func freeAddr(t *testing.T) string { return brokertest.FreeAddr(t) }

// TestKill9LoopLosesNoAcknowledgedSend: the broker is killed with SIGKILL
// and restarted on the same port and data while stock v5 producers send
// and a stock simple consumer receives and acks; every send the producer
// saw acknowledged is received afterwards. Two kills by default,
// BROKERCORE_LONG=1 runs ten.
func TestKill9LoopLosesNoAcknowledgedSend(t *testing.T) {
	t.Parallel()
	kills := 2
	if os.Getenv("BROKERCORE_LONG") == "1" {
		kills = 10
	}
	dir, addr := t.TempDir(), freeAddr(t)
	child := startChildBroker(t, dir, addr)
	const topic, group = "survivor", "survivor-g"
	p := newProducer(t, addr, topic)
	c := newSimpleConsumer(t, addr, group, topic, time.Second, nil)

	var mu sync.Mutex
	acked := map[string]bool{}
	got := newSeenSet()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				r, err := p.Send(ctx, textMessage(topic, key))
				cancel()
				if err == nil && len(r) == 1 {
					mu.Lock()
					acked[key] = true
					mu.Unlock()
				} else {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	recvCtx, recvCancel := context.WithCancel(context.Background())
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for recvCtx.Err() == nil {
			mvs, err := receive(recvCtx, c, 32, 10*time.Second)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for _, mv := range mvs {
				got.add(string(mv.GetBody()))
				_ = c.Ack(recvCtx, mv)
			}
		}
	}()
	for range kills {
		time.Sleep(1500 * time.Millisecond)
		child.kill()
		child = startChildBroker(t, dir, addr)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	require.Positive(t, want)
	deadline := time.Now().Add(60 * time.Second)
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		got.mu.Lock()
		defer got.mu.Unlock()
		for k := range acked {
			if got.m[k] == 0 {
				out = append(out, k)
			}
		}
		return out
	}
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	recvCancel()
	rwg.Wait()
	require.Empty(t, missing(), "acknowledged sends lost after %d kills (%d acknowledged)", kills, want)
	t.Logf("%d kills, %d acknowledged sends, all received", kills, want)
}
