package schedule

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain keeps the default run short (CI has 2 cores for every package):
// the state-machine test runs 25 rapid checks unless -rapid.checks is given or
// BROKERCORE_LONG=1 asks for rapid's full default.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set && os.Getenv("BROKERCORE_LONG") != "1" && os.Getenv("RAPID_CHECKS") == "" {
		_ = flag.Set("rapid.checks", "25")
	}
	goleak.VerifyTestMain(m)
}
