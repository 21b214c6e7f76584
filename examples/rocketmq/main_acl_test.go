package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const mainACL = `{"users":[{"accessKey":"app","secretKey":"s3cret"}],
  "rules":[{"user":"app","resources":["Topic:*"],"actions":["Pub"],"decision":"Allow"}]}`

func TestNonLoopbackWithoutACLIsRefusedAndNamesTheFlag(t *testing.T) {
	var out syncBuf
	code := run(context.Background(), []string{"-data", t.TempDir(), "-broker-addr", "0.0.0.0:0",
		"-namesrv-addr", "127.0.0.1:0", "-metrics-addr", "-", "-grpc-addr", "-"}, &out)
	require.Equal(t, 1, code)
	require.Contains(t, out.String(), "-insecure-allow-remote")
}

func TestBadACLFileExitsTwo(t *testing.T) {
	var out syncBuf
	bad := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"users":[{"accessKey":"a"}]}`), 0o600))
	require.Equal(t, 2, run(context.Background(), []string{"-data", t.TempDir(), "-acl", bad}, &out))
	require.Equal(t, 2, run(context.Background(), []string{"-data", t.TempDir(), "-acl", bad + ".missing"}, &out))
	require.Contains(t, out.String(), "empty secretKey")
}

func TestSIGHUPReloadsTheACLFile(t *testing.T) { sighupReloads(t, "") }

// A replicated node reloads its own ACL file on SIGHUP (the other nodes'
// stay as they are: every node is reloaded on its own).
func TestSIGHUPReloadsAReplicatedNodesACLFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "cluster.secret")
	require.NoError(t, os.WriteFile(secret, []byte("sighup-test-cluster-secret"), 0o600))
	ra := freeAddr(t)
	sighupReloads(t, " -raft-id n1 -raft-addr "+ra+" -peers n1="+ra+" -bootstrap -cluster-secret-file "+secret)
}

// sighupReloads runs the program in a child process with -acl and extra
// flags, and reloads its file with SIGHUP: a good file is taken, a bad one
// is logged and changes nothing.
func sighupReloads(t *testing.T, extra string) {
	exe, err := os.Executable()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(path, []byte(mainACL), 0o600))
	br := freeAddr(t)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "RMQ_MAIN_CHILD=1", "RMQ_MAIN_ARGS=-data "+t.TempDir()+" -namesrv-addr "+freeAddr(t)+
		" -broker-addr "+br+" -metrics-addr - -grpc-addr - -acl "+path+extra)
	var out syncBuf
	cmd.Stderr = &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", br)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 20*time.Second, 20*time.Millisecond)

	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(mainACL, "Allow", "Deny", 1)), 0o600))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "acl reloaded") }, 20*time.Second, 20*time.Millisecond)

	require.NoError(t, os.WriteFile(path, []byte("{broken"), 0o600))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "acl reload failed") }, 20*time.Second, 20*time.Millisecond)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), out.String())
	require.Equal(t, 0, cmd.ProcessState.ExitCode(), "a bad reload does not stop the program")
}
