package grpcapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
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
	h, err := openH2(addr, false)
	require.NoError(t, err)
	return h
}

// openH2 connects in plaintext or over TLS (as the stock v5 client does)
// and sends the preface and settings.
func openH2(addr string, useTLS bool) (*h2conn, error) {
	var c net.Conn
	var err error
	d := &net.Dialer{Timeout: 10 * time.Second}
	if useTLS {
		c, err = tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	h := &h2conn{c: c, fr: http2.NewFramer(c, c)}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if err := h.fr.WriteSettings(); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return h, nil
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
	require.NoError(t, h.sync())
}

func (h *h2conn) sync() error {
	if err := h.fr.WritePing(false, [8]byte{'b', 'u', 'd', 'g', 'e', 't'}); err != nil {
		return err
	}
	if err := h.c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		return err
	}
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return err
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			return nil
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

// TestIdleConnectionsAreCheap: what an idle HTTP/2 connection (preface
// and settings, no stream) costs the server's heap: the marginal cost of
// 200 more connections over 50 already open, the clients in a child
// process so that only the server's heap is counted. With a 4 KiB read
// buffer it is under 16 KB, in plaintext and over TLS (the stock client's
// default); grpc-go's default 32 KiB buffer is most of the default's cost.
func TestIdleConnectionsAreCheap(t *testing.T) {
	for _, c := range []struct {
		tls    bool
		buffer int
		limit  int64
	}{{false, 4 << 10, 16 << 10}, {true, 4 << 10, 16 << 10}, {false, 0, 48 << 10}, {true, 0, 48 << 10}} {
		t.Run(fmt.Sprintf("tls=%v/buffer=%d", c.tls, c.buffer), func(t *testing.T) {
			b := startBroker(t, grpcapi.Options{ReadBufferSize: c.buffer})
			healthy(t, b.endpoint)
			startH2Clients(t, b.endpoint, 50, c.tls)
			before := heapBytes()
			const n = 200
			startH2Clients(t, b.endpoint, n, c.tls)
			per := (int64(heapBytes()) - int64(before)) / n
			t.Logf("an idle connection: %d bytes of the server's heap", per)
			require.Less(t, per, c.limit)
			healthy(t, b.endpoint)
		})
	}
}

// h2ClientsEnv makes the test binary a process that opens idle HTTP/2
// connections ("addr n tls"), says "ready" once the server answered a
// PING on each, and holds them until its stdin closes.
const h2ClientsEnv = "GRPCAPI_TEST_H2_CLIENTS"

func startH2Clients(t *testing.T, addr string, n int, useTLS bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %v", h2ClientsEnv, addr, n, useTLS))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
}

func runH2Clients(spec string) int {
	var addr string
	var n int
	var useTLS bool
	if _, err := fmt.Sscanf(spec, "%s %d %t", &addr, &n, &useTLS); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	conns := make([]*h2conn, 0, n)
	for range n {
		h, err := openH2(addr, useTLS)
		if err == nil {
			err = h.sync()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		conns = append(conns, h)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, h := range conns {
		_ = h.c.Close()
	}
	return 0
}
