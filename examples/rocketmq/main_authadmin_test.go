package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/authadmin"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// TestAuthAdminWritesTheACLFileOfTheFlag: a createUser on the broker port
// of a program started with -acl FILE is written to FILE.
func TestAuthAdminWritesTheACLFileOfTheFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"users":[{"accessKey":"admin","secretKey":"adm1n","superUser":true}]}`), 0o600))
	br := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out syncBuf
	go func() {
		done <- run(ctx, []string{"-data", t.TempDir(), "-namesrv-addr", freeAddr(t), "-broker-addr", br,
			"-metrics-addr", "-", "-grpc-addr", "-", "-acl", path}, &out)
	}()
	defer func() { cancel(); require.Equal(t, 0, <-done, out.String()) }()

	var nc net.Conn
	require.Eventually(t, func() bool {
		var err error
		nc, err = net.Dial("tcp", br)
		return err == nil
	}, 20*time.Second, 20*time.Millisecond)
	defer nc.Close()
	body := []byte(`{"username":"bob","password":"b0b"}`)
	ext := map[string]string{"username": "bob", acl.FieldAccessKey: "admin"}
	ext[acl.FieldSignature] = acl.SignRemoting("adm1n", ext, body)
	frame, err := wire.Encode(&wire.Command{Code: authadmin.CodeCreateUser, Language: "JAVA", Opaque: 1, ExtFields: ext, Body: body})
	require.NoError(t, err)
	_, err = nc.Write(frame)
	require.NoError(t, err)
	raw, err := wire.ReadFrame(bufio.NewReader(nc), wire.DefaultMaxFrame)
	require.NoError(t, err)
	resp, err := wire.Decode(raw)
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)

	cfg, err := acl.Load(path)
	require.NoError(t, err)
	u, ok := cfg.User("bob")
	require.True(t, ok, "the file of -acl has the new user")
	require.Equal(t, "b0b", u.SecretKey)
}
