package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemoRunsTheTourAndExitsZero runs `broker --demo` in-process.
func TestDemoRunsTheTourAndExitsZero(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"--demo"}, &out, &errOut, nil)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", &out, &errOut)
	s := out.String()
	for _, want := range []string{
		"1. produced demo-orders queue 0 offset 0",
		"2. produced a delayed message",
		`3. FIFO pop (attemptId attempt-1) got #0 "order 1 created" (attempt 1), #1 "order 1 paid" (attempt 1)`,
		`4. retry with the same attemptId got the same batch again: #0 "order 1 created" (attempt 1), #1`,
		"HTTP 409 stale_handle",
		"got 0 messages (queue blocked)",
		`attempt-2 now got #2 "order 1 shipped"`,
		`#3 "order 1: ask for a review"`,
		"by time to offset 0",
		`the next pop replays #0 "order 1 created"`,
		"demo done",
	} {
		assert.Contains(t, s, want)
	}
	// The stats line reads /v1/stats, whose keys are snake_case: every
	// figure is a number the tour made non-zero.
	assert.Regexp(t, `9\. stats: store appended [1-9][0-9]* messages; pop delivered [1-9][0-9]* and took [1-9][0-9]* acks; `+
		`delay level 1 delivered up to offset [1-9][0-9]*; [1-9][0-9]* HTTP requests`, s)
	assert.NotContains(t, s, "<nil>")
	t.Log(s)
}

// TestRunServesAndExitsZeroOnSignal is main's life cycle: serve on the
// flags' address and data dir, then a "signal" (ctx) shuts it down with 0.
func TestRunServesAndExitsZeroOnSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dir := t.TempDir()
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-data", dir, "-sync", "none"}, &bytes.Buffer{}, &errOut, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case code := <-done:
		t.Fatalf("run exited %d before serving: %s", code, &errOut)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &apiClient{base: "http://" + addr, hc: &http.Client{Transport: tr}}
	require.NoError(t, c.call(ctx, "POST", "/v1/messages", messageIn{Topic: "t", Body: ptr("x")}, nil))

	// A long poll in flight must not hold the shutdown for its Poll.
	polled := make(chan error, 1)
	go func() {
		polled <- c.call(context.Background(), "POST", "/v1/pop", popIn{Group: "g", Topic: "other", ClientID: "c", Poll: "30s"}, nil)
	}()
	require.Eventually(t, func() bool {
		var st statsOut
		return c.call(ctx, "GET", "/v1/stats", nil, &st) == nil && st.HTTP.LongPolls == 1
	}, 5*time.Second, 5*time.Millisecond)

	start := time.Now()
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errOut.String())
	case <-time.After(25 * time.Second):
		t.Fatal("run did not return after the signal")
	}
	// Well under the 30 s Poll (a loaded machine takes seconds to stop).
	assert.Less(t, time.Since(start), 20*time.Second, "the long poll held the shutdown")
	assert.Equal(t, http.StatusServiceUnavailable, statusOf(t, <-polled), "the woken long poll says why")
	assert.Contains(t, errOut.String(), "brokercore broker listening")
	assert.Contains(t, errOut.String(), "broker stopped cleanly")

	// A bad flag value is a usage error, before anything is opened.
	errOut.Reset()
	assert.Equal(t, 2, run(t.Context(), []string{"-sync", "sometimes", "-data", t.TempDir()}, &bytes.Buffer{}, &errOut, nil))
	assert.Contains(t, errOut.String(), "want group, interval or none")
}
