package transport

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// FuzzConnInput: any bytes a client sends are read as frames (answered,
// or the connection closed), never panic the server, and leave no read
// budget reserved once the connection ends.
func FuzzConnInput(f *testing.F) {
	ok, err := wire.Encode(&wire.Command{Code: 7, Opaque: 1, ExtFields: map[string]string{"a": "b"}, Body: []byte("x")})
	require.NoError(f, err)
	f.Add(ok)
	f.Add(append(append([]byte{}, ok...), ok...))
	f.Add(binary.BigEndian.AppendUint32(nil, 0x80000000))
	f.Add(binary.BigEndian.AppendUint32(nil, 200000))
	f.Add(append(binary.BigEndian.AppendUint32(nil, 100), 0, 0, 0, 90, '{'))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	s, addr := listen(f, &recordingHandler{}, ServerOptions{Name: "fuzz", MaxFrame: 1 << 20})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		go func() { _, _ = c.Write(in); _ = c.(*net.TCPConn).CloseWrite() }()
		_, _ = io.Copy(io.Discard, c) // until the server closes
		c.Close()
		waitFor(t, func() bool { return s.Stats().Connections == 0 }, "the connection ends")
		require.Zero(t, s.Stats().ReadBytes, "read budget given back")
	})
}
