package acl

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newClock() *testkit.Clock { return testkit.NewClock(t0) }

// mustParse parses a configuration a test wrote, failing the test on error.
func mustParse(t testing.TB, doc string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func mustNew(t testing.TB, doc string, opts Options) *Authorizer {
	t.Helper()
	a, err := New(mustParse(t, doc), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}
