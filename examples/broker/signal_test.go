package main

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// childEnv makes TestMain run main() with the variable's value as flags.
const childEnv = "BROKERCORE_BROKER_CHILD_ARGS"

var listenLine = regexp.MustCompile(`addr=http://([0-9.:]+)`)

// startChild runs the real program (this test binary, as main) and returns
// its address once it logged it.
func startChild(t *testing.T, dir string) (*exec.Cmd, string, *syncLog, <-chan struct{}) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=-addr 127.0.0.1:0 -data "+dir)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	log := &syncLog{}
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.add(sc.Text())
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-scanned })
	select {
	case a := <-addr:
		return cmd, a, log, scanned
	case <-time.After(20 * time.Second):
		t.Fatalf("the broker did not log its address")
	}
	return nil, "", nil, nil
}

// syncLog collects the child's log lines while the test may read them.
type syncLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *syncLog) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestSIGTERMStopsTheProgramWithExitZeroAndLosesNothing runs the program as
// a process, has a long poll in flight, sends SIGTERM, and expects a prompt
// exit 0; a second run on the same directory still has the message.
func TestSIGTERMStopsTheProgramWithExitZeroAndLosesNothing(t *testing.T) {
	dir := t.TempDir()
	cmd, addr, log, stderrDone := startChild(t, dir)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &apiClient{base: "http://" + addr, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	ctx := t.Context()
	require.NoError(t, c.call(ctx, "POST", "/v1/messages", messageIn{Topic: "kept", Body: ptr("survives")}, nil))

	polled := make(chan error, 1)
	go func() {
		polled <- c.call(context.Background(), "POST", "/v1/pop", popIn{Group: "g", Topic: "nothing", ClientID: "c", Poll: "30s"}, nil)
	}()
	require.Eventually(t, func() bool {
		var st statsOut
		return c.call(ctx, "GET", "/v1/stats", nil, &st) == nil && st.HTTP.LongPolls == 1
	}, 10*time.Second, 10*time.Millisecond)

	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	<-stderrDone // all of the log read before Wait closes the pipe
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("exit code %d\n%s", exit.ExitCode(), log)
	}
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 20*time.Second, "the long poll held the shutdown (Poll 30 s)")
	assert.Contains(t, log.String(), "broker stopped cleanly")
	assert.Equal(t, http.StatusServiceUnavailable, statusOf(t, <-polled))

	_, addr, _, _ = startChild(t, dir)
	c.base = "http://" + addr
	var res popOut
	require.NoError(t, c.call(ctx, "POST", "/v1/pop", popIn{Group: "g", Topic: "kept", ClientID: "c"}, &res))
	require.Len(t, res.Messages, 1)
	assert.Equal(t, "survives", *res.Messages[0].Body)
}
