package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// A client that sends oneway commits and then closes with answers still
// unread resets the connection: the server's next write fails while those
// commits are still unread in its socket. They must be served all the
// same. Found with the official client's PullConsumer: PersistOffset then
// Shutdown lost every commit about once in 40 runs, because a failed write
// closed the socket under the read loop.
func TestWriteErrorDoesNotDropRequestsAlreadySent(t *testing.T) {
	s := serveResetConn(t, &recordingHandler{})
	require.Equal(t, uint64(1), s.Stats().WriteErrors)
}

// commitCounter is a Handler that counts the requests it served by code.
type commitCounter interface {
	Handler
	count(code int16) int
}

// serveResetConn serves h over a resetConn: a heartbeat whose answer fails
// to go out, then three oneway commits read only after that failure. It
// returns once all three were served and the server is closed.
func serveResetConn(t *testing.T, h commitCounter) *Server {
	t.Helper()
	var rest []byte
	for i := int32(0); i < 3; i++ {
		rest = append(rest, mustEncode(t, &wire.Command{Code: wire.CodeUpdateConsumerOffset, Opaque: 2 + i, Flag: wire.FlagOneway,
			ExtFields: map[string]string{}})...)
	}
	nc := &resetConn{first: frames(t, wire.CodeHeartbeat, 1, 1), rest: rest, wrote: make(chan struct{})}
	s := NewServer(h, ServerOptions{})
	l := &oneConnListener{c: nc, done: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	require.Eventually(t, func() bool { return h.count(wire.CodeUpdateConsumerOffset) == 3 }, 5*time.Second, time.Millisecond,
		"every oneway request read before the reset is served")
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-served, ErrServerClosed)
	return s
}

func mustEncode(t *testing.T, c *wire.Command) []byte {
	t.Helper()
	c.Version = wire.ProtocolVersion
	b, err := wire.Encode(c)
	require.NoError(t, err)
	return b
}

type recordingHandler struct {
	mu    sync.Mutex
	codes map[int16]int
}

func (h *recordingHandler) Serve(_ context.Context, _ *Conn, req *wire.Command) *wire.Command {
	h.mu.Lock()
	if h.codes == nil {
		h.codes = map[int16]int{}
	}
	h.codes[req.Code]++
	h.mu.Unlock()
	return wire.NewResponse(req, wire.Success, "")
}

func (h *recordingHandler) count(code int16) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.codes[code]
}

// resetConn is a peer that reset the connection: every write fails, and
// the bytes it sent before the reset are read only after the first write
// failed, then reads end with ECONNRESET.
type resetConn struct {
	first, rest []byte
	wrote       chan struct{}
	once        sync.Once
	mu          sync.Mutex
	stage       int
	closed      bool
}

func (c *resetConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	stage := c.stage
	c.stage++
	c.mu.Unlock()
	switch stage {
	case 0:
		return copy(p, c.first), nil
	case 1:
		<-c.wrote // the answer to the first request failed to go out
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return 0, &net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}
		}
		return bytes.NewReader(c.rest).Read(p)
	default:
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
}

func (c *resetConn) Write([]byte) (int, error) {
	c.once.Do(func() { close(c.wrote) })
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}
}

func (c *resetConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.once.Do(func() { close(c.wrote) })
	return nil
}

func (c *resetConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10911}
}
func (c *resetConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *resetConn) SetDeadline(time.Time) error      { return nil }
func (c *resetConn) SetReadDeadline(time.Time) error  { return nil }
func (c *resetConn) SetWriteDeadline(time.Time) error { return nil }

// oneConnListener accepts c once, then blocks until closed.
type oneConnListener struct {
	c    net.Conn
	done chan struct{}
	once sync.Once
	n    int
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if l.n == 0 {
		l.n++
		return l.c, nil
	}
	<-l.done
	return nil, errors.Join(net.ErrClosed, io.EOF)
}

func (l *oneConnListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }
