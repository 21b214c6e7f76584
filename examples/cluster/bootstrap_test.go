package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBootstrapPicksFreePortsWhenTheDefaultsAreTaken: -bootstrap used to
// listen on 127.0.0.1:7001-7003 and :8001-8003 only, and failed when any
// was taken. With one of them held, it picks six free ports instead.
func TestBootstrapPicksFreePortsWhenTheDefaultsAreTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:8002")
	if err != nil { // taken by someone else already: the case under test
		held = nil
	} else {
		defer held.Close()
	}
	raftAddrs, httpAddrs, err := localAddrs()
	require.NoError(t, err)
	all := append(raftAddrs, httpAddrs...)
	require.Len(t, all, 6)
	seen := map[string]bool{}
	for _, a := range all {
		assert.NotEqual(t, "127.0.0.1:8002", a)
		assert.False(t, seen[a], "address %s picked twice", a)
		seen[a] = true
		ln, err := net.Listen("tcp", a)
		if assert.NoError(t, err, "picked address %s is not free", a) {
			_ = ln.Close()
		}
	}
}

// TestBootstrapServesOnTheAddressesItPrints runs -bootstrap's three nodes
// and checks /status on the address the printed curl line names.
func TestBootstrapServesOnTheAddressesItPrints(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &lineWriter{up: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- runLocal(ctx, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)), out) }()
	select {
	case <-out.up:
	case err := <-done:
		cancel()
		t.Fatalf("runLocal exited before it was up: %v", err)
	}
	m := regexp.MustCompile(`curl -s (127\.0\.0\.1:\d+)/status`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	tr := &http.Transport{}
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + m[1] + "/status")
	if assert.NoError(t, err) {
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		_ = resp.Body.Close()
	}
	tr.CloseIdleConnections()
	cancel()
	require.NoError(t, <-done)
}

// lineWriter collects what runLocal prints and closes up once it printed
// the "3 nodes up" banner.
type lineWriter struct {
	mu   sync.Mutex
	b    strings.Builder
	up   chan struct{}
	once sync.Once
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), "Ctrl-C stops them.") {
		w.once.Do(func() { close(w.up) })
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
