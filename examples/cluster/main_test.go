package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

// A raft address beyond loopback needs -cluster-secret-file or
// -insecure-raft; a secret file too short to be one is refused.
func TestRaftAddrBeyondLoopbackNeedsASecret(t *testing.T) {
	dir := t.TempDir()
	require.Equal(t, 1, run([]string{"-id", "n1", "-raft-addr", "0.0.0.0:0", "-http-addr", "127.0.0.1:0", "-data", filepath.Join(dir, "a")}))
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("short\n"), 0o600))
	require.Equal(t, 2, run([]string{"-id", "n1", "-raft-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-data", filepath.Join(dir, "b"),
		"-cluster-secret-file", short}))
}
