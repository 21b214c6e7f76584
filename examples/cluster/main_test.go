package main

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

// childEnv makes the test binary run the cluster command (flags in the
// variable's value, split on spaces) instead of the tests: the multi-process
// test starts its nodes that way.
const childEnv = "BROKERCORE_CLUSTER_CHILD"

func childMain() int { return run(strings.Fields(os.Getenv(childEnv))) }
