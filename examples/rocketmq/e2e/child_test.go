package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/stretchr/testify/require"
)

// childOrderly runs an orderly push consumer until SIGTERM (then a graceful
// Shutdown) or SIGKILL.
func childOrderly() int {
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{os.Getenv("E2E_NS")}),
		consumer.WithGroupName(os.Getenv("E2E_GROUP")), consumer.WithInstance(os.Getenv("E2E_INSTANCE")),
		consumer.WithConsumerOrder(true), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	err = c.Subscribe(os.Getenv("E2E_TOPIC"), consumer.MessageSelector{}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	})
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	if err := c.Shutdown(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// childBroker runs the broker until SIGTERM or SIGKILL.
func childBroker() int {
	s, err := server.Start(server.Config{Dir: os.Getenv("E2E_DIR"), NameSrvAddr: os.Getenv("E2E_NS"),
		BrokerAddr: os.Getenv("E2E_BR"), MetricsAddr: "-"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	if err := s.Close(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

type child struct {
	cmd  *exec.Cmd
	done chan error
}

// startChild runs the test binary as a child of the given kind and waits
// for its "ready" line.
func startChild(t *testing.T, kind string, env ...string) *child {
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
func (c *child) stop(t *testing.T) {
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

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func hasSuffix(id, instance string) bool { return strings.HasSuffix(id, "@"+instance) }
