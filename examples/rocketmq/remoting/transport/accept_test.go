package transport

import (
	"bufio"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
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

// TestServeSurvivesEMFILE: accept failing with EMFILE (a descriptor limit
// reached) does not end Serve: it backs off, retries, and then serves.
func TestServeSurvivesEMFILE(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl := &emfileListener{Listener: ln}
	fl.n.Store(4)
	s := NewServer(&recordingHandler{}, ServerOptions{Name: "test"})
	served := make(chan error, 1)
	go func() { served <- s.Serve(fl) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(mustEncode(t, &wire.Command{Code: 7, Opaque: 1, ExtFields: map[string]string{}}))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	f, err := wire.ReadFrame(bufio.NewReader(c), wire.DefaultMaxFrame)
	require.NoError(t, err, "the connection is served after the EMFILE streak")
	resp, err := wire.Decode(f)
	require.NoError(t, err)
	require.Equal(t, int32(1), resp.Opaque)
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-served, ErrServerClosed)
}
