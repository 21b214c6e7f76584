package transport

import (
	"bufio"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// prefixedTCP is a TCP connection whose Read first returns bytes read
// before it was handed over (as a sniffing listener's connection does),
// and that still exposes the socket's descriptor.
type prefixedTCP struct {
	*net.TCPConn
	prefix []byte
}

func (p *prefixedTCP) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.TCPConn.Read(b)
}

// A connection wrapped around a socket is read through its own Read, not
// straight from the descriptor it exposes: the bytes it holds come first.
func TestWrappedSocketIsReadThroughItsRead(t *testing.T) {
	h := &batchHandler{inlineHandler: inlineHandler{blockCode: -1}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cli, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer cli.Close()
	sc, err := ln.Accept()
	require.NoError(t, err)
	ln.Close()
	first := mustEncode(t, &wire.Command{Code: wire.CodeHeartbeat, Opaque: 1, ExtFields: map[string]string{}})
	wrapped := &prefixedTCP{TCPConn: sc.(*net.TCPConn), prefix: first}
	s := NewServer(h, ServerOptions{Name: "test"})
	l := &oneConnListener{c: wrapped, done: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	defer func() {
		require.NoError(t, s.Close())
		require.ErrorIs(t, <-served, ErrServerClosed)
	}()
	_, err = cli.Write(mustEncode(t, &wire.Command{Code: wire.CodeHeartbeat, Opaque: 2, ExtFields: map[string]string{}}))
	require.NoError(t, err)
	r := bufio.NewReader(cli)
	for _, want := range []int32{1, 2} { // in the order read: the held bytes first
		f, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
		require.NoError(t, err)
		cmd, err := wire.Decode(f)
		require.NoError(t, err)
		require.Equal(t, want, cmd.Opaque)
	}
}
