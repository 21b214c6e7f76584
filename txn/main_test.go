package txn

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain keeps the default run short: rapid runs 50 checks unless
// -rapid.checks is given or BROKERCORE_LONG=1 asks for its full default.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set && os.Getenv("BROKERCORE_LONG") != "1" && os.Getenv("RAPID_CHECKS") == "" {
		_ = flag.Set("rapid.checks", "50")
	}
	goleak.VerifyTestMain(m)
}
