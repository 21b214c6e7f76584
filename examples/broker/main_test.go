package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/brokertest"
)

// fakeClock is the test clock injected as Options.Now: brokertest's, as
// any user of the library would take it (an example never imports the
// library's internal packages).
type fakeClock = brokertest.Clock

func newFakeClock() *fakeClock {
	return brokertest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

func TestMain(m *testing.M) {
	// signal_test.go re-runs this test binary as the real program.
	if args, ok := os.LookupEnv(childEnv); ok {
		os.Args = append([]string{"broker"}, strings.Fields(args)...)
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// testBroker is a broker served on a real loopback listener.
type testBroker struct {
	b      *Broker
	srv    *http.Server
	url    string
	served chan error
}

func startBroker(t testing.TB, dir string, clock *fakeClock, tweaks ...func(*Config)) *testBroker {
	t.Helper()
	cfg := Config{DataDir: dir, Tick: 10 * time.Millisecond}
	if clock != nil {
		cfg.Now = clock.Now
	}
	for _, f := range tweaks {
		f(&cfg)
	}
	b, err := newBroker(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tb := &testBroker{b: b, srv: b.NewServer(ln.Addr().String()), url: "http://" + ln.Addr().String(), served: make(chan error, 1)}
	go func() { tb.served <- tb.srv.Serve(ln) }()
	t.Cleanup(func() { tb.stop(t) })
	return tb
}

// stop shuts the broker down the way main does; a second call is a no-op.
func (tb *testBroker) stop(t testing.TB) {
	t.Helper()
	if tb.served == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tb.b.Shutdown(ctx, tb.srv))
	require.ErrorIs(t, <-tb.served, http.ErrServerClosed)
	tb.served = nil
}

// client returns an API client with its own connections (its own consumer
// channel); they are closed when the test ends.
func (tb *testBroker) client(t testing.TB) (*apiClient, *http.Transport) {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &apiClient{base: tb.url, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, tr
}
