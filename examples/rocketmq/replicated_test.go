package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// -raft-id runs the program as a node of a replicated cluster: one node
// bootstrapped from -peers leads, serves (the gRPC endpoint too), and stops
// cleanly.
func TestRunReplicatedNode(t *testing.T) {
	dir := t.TempDir()
	ns, br, ra, gr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuf
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"-data", dir, "-namesrv-addr", ns, "-broker-addr", br, "-grpc-addr", gr,
			"-raft-id", "n1", "-raft-addr", ra, "-peers", "n1=" + ra + "@" + br + "@" + gr, "-bootstrap"}, &out)
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "cluster: leading") },
		30*time.Second, 20*time.Millisecond, "the one voter leads")
	require.Contains(t, out.String(), "grpc="+gr)
	cancel()
	require.Equal(t, 0, <-done)
	require.Contains(t, out.String(), "replicated rocketmq broker stopped")
	require.DirExists(t, filepath.Join(dir, "replica", "store"))
}

func TestRunReplicatedBadPeersExitTwo(t *testing.T) {
	var out syncBuf
	require.Equal(t, 2, run(context.Background(), []string{"-data", t.TempDir(), "-raft-id", "n1", "-peers", "n1"}, &out))
	require.Contains(t, out.String(), "bad -peers")
}

// Raft's traffic is not authenticated: a replicated node listens beyond
// loopback only when told so explicitly.
func TestRunReplicatedRefusesRemoteListenWithoutOptIn(t *testing.T) {
	var out syncBuf
	require.Equal(t, 1, run(context.Background(), []string{"-data", t.TempDir(), "-raft-id", "n1",
		"-raft-addr", "0.0.0.0:7001", "-peers", "n1=127.0.0.1:7001"}, &out))
	require.Contains(t, out.String(), "raft address 0.0.0.0:7001")
}
