package rmqtest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs the tests of a package that uses the official client and then
// checks that no goroutine of brokercore (library or this module) is left:
// goleak over the whole process would flag the client's own goroutines,
// which it keeps after Shutdown. Use it as TestMain:
//
//	func TestMain(m *testing.M) { rmqtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := brokerGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintln(os.Stderr, "rmqtest: leaked brokercore goroutines:\n"+leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// brokerGoroutines waits up to d for every goroutine that runs brokercore
// code to end, and returns the stacks of those left.
func brokerGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "github.com/brokercore/brokercore") &&
				!strings.Contains(g, "rmqtest.brokerGoroutines") && !strings.Contains(g, "testing.(*M).Run") &&
				!strings.Contains(g, "testing.tRunner") {
				left = append(left, g)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return strings.Join(left, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
