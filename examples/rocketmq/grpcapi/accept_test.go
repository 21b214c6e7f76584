package grpcapi_test

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

// emfileListener fails its first n accepts with EMFILE, then accepts.
type emfileListener struct {
	net.Listener
	n atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeSurvivesEMFILE: grpc.Server.Serve returns on the first accept
// error that is not a timeout; the server's listener retries EMFILE, so
// the port is still served after it.
func TestServeSurvivesEMFILE(t *testing.T) {
	dir := t.TempDir()
	c := openCore(t, dir, grpcapi.DefaultMaxAttempts)
	srv, err := grpcapi.New(c, grpcapi.Options{CertDir: dir})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl := &emfileListener{Listener: ln}
	fl.n.Store(4)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(fl) }()
	cl := rawClient(t, ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "t"}})
	require.NoError(t, err, "served after the EMFILE streak")
	require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	require.NoError(t, srv.Close())
	if err := <-served; err != nil { // grpc's Serve answers nil after Stop
		require.ErrorIs(t, err, grpcapi.ErrClosed)
	}
}
