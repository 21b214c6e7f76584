package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// -raft-id runs the program as a node of a replicated cluster: one node
// bootstrapped from -peers leads, serves (the gRPC endpoint and the
// metrics and admin one too), and stops cleanly.
func TestRunReplicatedNode(t *testing.T) {
	dir := t.TempDir()
	ns, br, ra, gr, mh := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuf
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"-data", dir, "-namesrv-addr", ns, "-broker-addr", br, "-grpc-addr", gr, "-metrics-addr", mh,
			"-raft-id", "n1", "-raft-addr", ra, "-peers", "n1=" + ra + "@" + br + "@" + gr, "-bootstrap"}, &out)
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "cluster: leading") },
		30*time.Second, 20*time.Millisecond, "the one voter leads")
	require.Contains(t, out.String(), "grpc="+gr)
	resp, err := http.Get("http://" + mh + "/metrics")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(b), "rocketmq_replica_leader 1")
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

// Without -cluster-secret-file raft's traffic is not authenticated: a
// replicated node listens beyond loopback only when told so explicitly.
func TestRunReplicatedRefusesRemoteListenWithoutOptIn(t *testing.T) {
	var out syncBuf
	require.Equal(t, 1, run(context.Background(), []string{"-data", t.TempDir(), "-raft-id", "n1",
		"-raft-addr", "0.0.0.0:7001", "-peers", "n1=127.0.0.1:7001"}, &out))
	require.Contains(t, out.String(), "raft address 0.0.0.0:7001")
}

// -acl with -raft-id needs -cluster-secret-file; a secret file too short
// is refused; with both, a node starts and its raft port is authenticated
// (non-loopback raft addresses are then allowed without
// -insecure-allow-remote: checked by the address rule, not started here).
func TestRunReplicatedACLNeedsAClusterSecret(t *testing.T) {
	dir := t.TempDir()
	aclPath := filepath.Join(dir, "acl.json")
	require.NoError(t, os.WriteFile(aclPath, []byte(mainACL), 0o600))
	var out syncBuf
	require.Equal(t, 2, run(context.Background(), []string{"-data", t.TempDir(), "-raft-id", "n1", "-peers", "n1=127.0.0.1:7001",
		"-acl", aclPath, "-metrics-addr", "-"}, &out))
	require.Contains(t, out.String(), "needs -cluster-secret-file")
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("short"), 0o600))
	require.Equal(t, 2, run(context.Background(), []string{"-data", t.TempDir(), "-raft-id", "n1", "-peers", "n1=127.0.0.1:7001",
		"-acl", aclPath, "-cluster-secret-file", short, "-metrics-addr", "-"}, &out))
	require.Contains(t, out.String(), "bad -cluster-secret-file")

	secret := filepath.Join(dir, "cluster.secret")
	require.NoError(t, os.WriteFile(secret, []byte("a-cluster-secret-of-the-test\n"), 0o600))
	ns, br, ra := freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out2 syncBuf
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"-data", dir, "-namesrv-addr", ns, "-broker-addr", br, "-grpc-addr", "-", "-metrics-addr", "-",
			"-raft-id", "n1", "-raft-addr", ra, "-peers", "n1=" + ra + "@" + br, "-bootstrap",
			"-acl", aclPath, "-cluster-secret-file", secret}, &out2)
	}()
	require.Eventually(t, func() bool { return strings.Contains(out2.String(), "cluster: leading") },
		30*time.Second, 20*time.Millisecond, "the one voter leads")
	// The raft port wants the handshake: a plain connection is refused.
	c, err := net.Dial("tcp", ra)
	require.NoError(t, err)
	_, _ = c.Write([]byte("not a raft handshake, and long enough to be read"))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err)
	c.Close()
	require.Eventually(t, func() bool { return strings.Contains(out2.String(), "raft connection refused") },
		30*time.Second, 20*time.Millisecond)
	cancel()
	require.Equal(t, 0, <-done, out2.String())
}
