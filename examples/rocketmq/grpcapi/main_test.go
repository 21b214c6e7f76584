package grpcapi_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// TestMain silences the v5 client's logging through its documented
// variables (it logs to a file under $HOME by default) and checks that no
// goroutine of the server or the broker core outlives the tests (see
// serverLeaks).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChildBroker())
	}
	if kind := os.Getenv(benchChildEnv); kind != "" {
		os.Exit(runBenchChild(kind))
	}
	if spec := os.Getenv(h2ClientsEnv); spec != "" {
		os.Exit(runH2Clients(spec))
	}
	dir, err := os.MkdirTemp("", "grpcapi-client-logs")
	if err != nil {
		panic(err)
	}
	_ = os.Setenv("rocketmq.client.logRoot", dir)
	_ = os.Setenv("rocketmq.client.logLevel", "error")
	_ = os.Setenv("mq.consoleAppender.enabled", "false")
	rmq.ResetLogger()
	code := m.Run()
	if code == 0 {
		if leaks := serverLeaks(); leaks != "" {
			fmt.Fprintf(os.Stderr, "goroutines of the server or the core outlived the tests:\n%s\n", leaks)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// serverMarkers name the code whose goroutines must all be gone after the
// tests: the server, its gRPC server side and the broker core.
var serverMarkers = []string{
	"examples/rocketmq/grpcapi.",
	"brokercore/brokercore/pop.",
	"brokercore/brokercore/store.",
	"brokercore/brokercore/schedule.",
	"brokercore/brokercore/offset.",
	"google.golang.org/grpc.(*Server)",
	"google.golang.org/grpc/internal/transport.(*http2Server)",
}

// serverLeaks returns the stacks of goroutines that run server or core
// code, waiting up to a few seconds for them to end. goleak cannot be told
// to ignore one library's goroutines wholesale, and the v5 client never
// stops its own (GracefulStop leaves connections and streams open).
func serverLeaks() string {
	var leaked []string
	for range 50 {
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "serverLeaks") {
				continue
			}
			for _, m := range serverMarkers {
				if strings.Contains(g, m) {
					leaked = append(leaked, g)
					break
				}
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		time.Sleep(100 * time.Millisecond)
	}
	return strings.Join(leaked, "\n\n")
}
