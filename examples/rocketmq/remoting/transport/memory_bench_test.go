package transport

import (
	"bufio"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// The memory targets as benchmark rows: each run measures the heap of
// 200 connections once (b.N is not a loop count here) and reports it per
// connection.

func BenchmarkHeapAnnounced16MiBFrame(b *testing.B) {
	const conns = 200
	s, addr := listen(b, &recordingHandler{}, ServerOptions{Name: "bench"})
	before := heapInUse()
	for range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(b, err)
		defer c.Close()
		announce(b, c, wire.DefaultMaxFrame)
	}
	waitFor(b, func() bool { return s.Stats().ReadBytes == conns*frameChunk }, "every frame reserved its first chunk")
	grew := float64(int64(heapInUse()) - int64(before))
	b.ReportMetric(grew/conns, "heapB/conn")
	b.ReportMetric(grew/(1<<20), "heapMiB/200conns")
}

func BenchmarkHeapIdleConnection(b *testing.B) {
	const conns = 200
	s, addr := listen(b, &recordingHandler{}, ServerOptions{Name: "bench"})
	ok, err := wire.Encode(&wire.Command{Code: 7, Opaque: 1, ExtFields: map[string]string{}})
	require.NoError(b, err)
	before := heapInUse()
	for range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(b, err)
		defer c.Close()
		_, err = c.Write(ok)
		require.NoError(b, err)
		_, err = wire.ReadFrame(bufio.NewReaderSize(c, 16), wire.DefaultMaxFrame)
		require.NoError(b, err)
	}
	waitFor(b, func() bool { return s.Stats().Connections == conns }, "connections accepted")
	b.ReportMetric(float64(int64(heapInUse())-int64(before))/conns, "heapB/conn")
}
