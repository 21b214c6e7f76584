package grpcapi_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

// h2conn is a raw plaintext HTTP/2 connection to the gRPC port: what a
// hostile client can send without a gRPC library's manners.
type h2conn struct {
	c  net.Conn
	fr *http2.Framer
}

func dialH2(t *testing.T, addr string) *h2conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	h := &h2conn{c: c, fr: http2.NewFramer(c, c)}
	require.NoError(t, h.fr.WriteSettings())
	return h
}

// announce opens stream 1 of a SendMessage and sends the gRPC prefix of a
// message of n bytes followed by the first part of it.
func (h *h2conn) announce(t *testing.T, n uint32, part int) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"},
		{":path", "/apache.rocketmq.v2.MessagingService/SendMessage"}, {":authority", "brokercore"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
	}
	require.NoError(t, h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}))
	data := make([]byte, 5+part)
	binary.BigEndian.PutUint32(data[1:5], n)
	for len(data) > 0 { // in frames of the default largest size
		k := min(len(data), 16<<10)
		require.NoError(t, h.fr.WriteData(1, false, data[:k]))
		data = data[k:]
	}
}

// synced sends a PING and reads frames until its ACK: the server reads a
// connection's frames in order, so everything sent before has been taken in.
func (h *h2conn) synced(t *testing.T) {
	t.Helper()
	require.NoError(t, h.fr.WritePing(false, [8]byte{'b', 'u', 'd', 'g', 'e', 't'}))
	require.NoError(t, h.c.SetReadDeadline(time.Now().Add(time.Minute)))
	for {
		f, err := h.fr.ReadFrame()
		require.NoError(t, err)
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			return
		}
	}
}

func heapBytes() uint64 {
	runtime.GC() // twice: the first moves pools to their victim caches
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// healthy is a send that must succeed.
func healthy(t *testing.T, endpoint string) {
	t.Helper()
	c := rawClient(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{{
		Topic: &v2.Resource{Name: "health"}, Body: []byte("ok"),
		SystemProperties: &v2.SystemProperties{MessageId: "01HEALTH", MessageType: v2.MessageType_NORMAL,
			BodyEncoding: v2.Encoding_IDENTITY, BornTimestamp: timestamppb.Now()},
	}}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
}

// TestAnnouncedMessagesCostWhatArrived is the gRPC port's memory budget
// (issue 25's targets, as for the remoting port): 200 connections that
// each announce a message of the largest accepted size and send 16 KiB of
// it cost less than 64 MiB, and the port keeps serving. grpc-go takes a
// message in as its bytes arrive (within HTTP/2 flow control), not at its
// announced size.
func TestAnnouncedMessagesCostWhatArrived(t *testing.T) {
	b := startBroker(t, grpcapi.Options{})
	healthy(t, b.endpoint)
	before := heapBytes()
	var conns []*h2conn
	defer func() {
		for _, h := range conns {
			h.c.Close()
		}
	}()
	for range 200 {
		h := dialH2(t, b.endpoint)
		conns = append(conns, h)
		h.announce(t, grpcapi.DefaultMaxBodySize, 16<<10)
	}
	for _, h := range conns {
		h.synced(t)
	}
	grew := int64(heapBytes()) - int64(before)
	t.Logf("200 connections, each a %d-byte message announced and 16 KiB sent: heap +%.1f MiB", grpcapi.DefaultMaxBodySize, float64(grew)/(1<<20))
	require.Less(t, grew, int64(64<<20))
	healthy(t, b.endpoint)
}

// TestIdleConnectionsAreCheap: an idle HTTP/2 connection (preface and
// settings, no stream) costs less than 16 KB of heap: the marginal cost of
// 200 more connections over 50 already open.
func TestIdleConnectionsAreCheap(t *testing.T) {
	b := startBroker(t, grpcapi.Options{})
	healthy(t, b.endpoint)
	var conns []*h2conn
	defer func() {
		for _, h := range conns {
			h.c.Close()
		}
	}()
	open := func(n int) {
		for range n {
			h := dialH2(t, b.endpoint)
			conns = append(conns, h)
			h.synced(t)
		}
	}
	open(50)
	before := heapBytes()
	const n = 200
	open(n)
	per := (int64(heapBytes()) - int64(before)) / n
	t.Logf("an idle connection: %d bytes of heap", per)
	require.Less(t, per, int64(16<<10))
	healthy(t, b.endpoint)
}
