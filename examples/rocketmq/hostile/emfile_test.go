//go:build linux

package hostile_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// childNoFile is the child broker's descriptor limit, and idlePerPort the
// connections the test opens to each of its ports: more than it can hold.
const (
	childNoFile = 1024
	idlePerPort = 1200
)

// childBroker runs a broker under RLIMIT_NOFILE childNoFile, prints its
// endpoints as one JSON line, and stops when its stdin closes.
func childBroker() int {
	lim := syscall.Rlimit{Cur: childNoFile, Max: childNoFile}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := rmqtest.New(server.Config{Dir: os.Getenv("HOSTILE_DIR"), Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		return 2
	}
	line, _ := json.Marshal(endpoints{Broker: b.Broker, NameSrv: b.NameSrv, GRPC: b.GRPC, Metrics: b.Metrics})
	fmt.Println(string(line))
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := b.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		return 1
	}
	return 0
}

// TestListenersSurviveDescriptorExhaustion: a broker under a 1,024
// descriptor limit gets 1,200 idle connections on each of its ports (more
// than it can accept: accept4 fails with EMFILE), then they close; every
// port serves again (a send and a receive on each protocol).
func TestListenersSurviveDescriptorExhaustion(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "HOSTILE_CHILD=broker", "HOSTILE_DIR="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	var readers sync.WaitGroup
	// The child's WARN lines: which listeners hit the limit.
	var mu sync.Mutex
	emfile := map[string]int{}
	var tail []string
	readers.Add(1)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			l := sc.Text()
			mu.Lock()
			if strings.Contains(l, "accept failed") && strings.Contains(l, "too many open files") {
				for _, name := range []string{"server=broker", "server=namesrv", "server=grpc"} {
					if strings.Contains(l, name) {
						emfile[name]++
					}
				}
			} else if len(tail) < 20 {
				tail = append(tail, l)
			}
			mu.Unlock()
		}
	}()
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "child printed no endpoints")
	var e endpoints
	require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	go func() { readers.Wait(); exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	requireHealthy(t, e, "start")

	var conns []net.Conn
	dialFailed := 0
	for _, addr := range []string{e.Broker, e.NameSrv, e.GRPC, e.Metrics} {
		for range idlePerPort {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				dialFailed++
				continue
			}
			conns = append(conns, c)
		}
	}
	// Wait until every listener has hit the limit (the child logs it).
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(emfile)
		mu.Unlock()
		if n == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	mu.Lock()
	warned := maps.Clone(emfile)
	stderrTail := slices.Clone(tail)
	mu.Unlock()
	t.Logf("%d idle connections opened (%d dials failed); EMFILE warnings per listener: %v", len(conns), dialFailed, warned)
	// The listeners back off (at most 1 s) and serve again.
	var herr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if herr = health(e); herr == nil {
			break
		}
	}
	require.NoError(t, herr, "every port serves again after the descriptors are freed")
	require.Len(t, warned, 3, "every remoting and gRPC listener hit EMFILE and said so at WARN (stderr: %v)", stderrTail)
}
