package transport

import (
	"bufio"
	"encoding/binary"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// listen serves h on 127.0.0.1 with opts; closed with the test.
func listen(t testing.TB, h Handler, opts ServerOptions) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := NewServer(h, opts)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		require.ErrorIs(t, <-served, ErrServerClosed)
	})
	return s, ln.Addr().String()
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// announce writes a frame header announcing a frame of n bytes and then
// only the first few bytes of it.
func announce(t testing.TB, c net.Conn, n int) {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, 0, 0, 0, 2, '{', '}') // 6 bytes of the frame
	_, err := c.Write(b)
	require.NoError(t, err)
}

// waitFor polls cond (what the server did in reaction to input that
// was written) for up to 10 s.
func waitFor(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
	}
}

// TestAnnouncedFramesCostWhatIsSent: 200 connections each announcing a
// 16 MiB frame and sending 6 bytes of it cost the server what they sent
// (a first chunk each), not what they announced (3.2 GB before).
func TestAnnouncedFramesCostWhatIsSent(t *testing.T) {
	const conns = 200
	s, addr := listen(t, &recordingHandler{}, ServerOptions{Name: "test"})
	before := heapInUse()
	cs := make([]net.Conn, conns)
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		announce(t, c, wire.DefaultMaxFrame)
		cs[i] = c
	}
	waitFor(t, func() bool { return s.Stats().ReadBytes == conns*frameChunk }, "every frame reserved its first chunk")
	after := heapInUse()
	grew := int64(after) - int64(before)
	t.Logf("%d connections announcing %d MiB frames and sending 6 bytes: heap +%.1f MiB (%d B each), read budget in use %d B",
		conns, wire.DefaultMaxFrame>>20, float64(grew)/(1<<20), grew/conns, s.Stats().ReadBytes)
	require.Less(t, grew, int64(64<<20))
}

// TestIdleConnectionHeap: an idle connection costs a few KB of heap (a
// small read buffer, no write buffer; 145 KB before).
func TestIdleConnectionHeap(t *testing.T) {
	const conns = 200
	s, addr := listen(t, &recordingHandler{}, ServerOptions{Name: "test"})
	// One request each first, so every connection has read and written.
	before := heapInUse()
	cs := make([]net.Conn, conns)
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write(mustEncode(t, &wire.Command{Code: 7, Opaque: 1, ExtFields: map[string]string{}}))
		require.NoError(t, err)
		_, err = wire.ReadFrame(bufio.NewReaderSize(c, 16), wire.DefaultMaxFrame)
		require.NoError(t, err)
		cs[i] = c
	}
	waitFor(t, func() bool { return s.Stats().Connections == conns }, "connections accepted")
	after := heapInUse()
	per := (int64(after) - int64(before)) / conns
	t.Logf("idle connection: %d B of heap each (server and the test's client end; %d connections)", per, conns)
	require.Less(t, per, int64(16<<10))
}

// TestConnectionBudgetStopsReading: past its connection's read budget a
// connection stops reading — nothing is lost, nothing crashes — and goes
// on once the requests holding the budget are served.
func TestConnectionBudgetStopsReading(t *testing.T) {
	h := &inlineHandler{blockCode: 9, release: make(chan struct{})}
	s, addr := listen(t, h, ServerOptions{Name: "test", MaxFrame: 1 << 20, MaxConnReadBytes: 1 << 20})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	body := make([]byte, 600<<10)
	// Two blocked requests of 600 KiB: the second does not fit.
	var b []byte
	b = append(b, mustEncode(t, &wire.Command{Code: 9, Opaque: 1, ExtFields: map[string]string{}, Body: body})...)
	b = append(b, mustEncode(t, &wire.Command{Code: 9, Opaque: 2, ExtFields: map[string]string{}, Body: body})...)
	wrote := make(chan error, 1)
	go func() { _, err := c.Write(b); wrote <- err }()
	waitFor(t, func() bool { return s.Stats().BudgetWaits >= 1 }, "the connection waits for budget")
	require.Equal(t, uint64(1), s.Stats().Requests, "the second frame is not read yet")
	close(h.release)
	r := bufio.NewReader(c)
	got := map[int32]bool{}
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	for len(got) < 2 {
		f, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
		require.NoError(t, err)
		cmd, err := wire.Decode(f)
		require.NoError(t, err)
		got[cmd.Opaque] = true
	}
	require.NoError(t, <-wrote)
	waitFor(t, func() bool { return s.Stats().ReadBytes == 0 }, "the budget is given back")
}

// TestIdleTimeoutClosesQuietConnections: a connection with no traffic for
// IdleTimeout is closed by the sweep (the clock is injected), one with
// a request in service is not.
func TestIdleTimeoutClosesQuietConnections(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := &inlineHandler{blockCode: 9, release: make(chan struct{})}
	s, addr := listen(t, h, ServerOptions{Name: "test", IdleTimeout: time.Minute, Now: clock})
	quiet, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer quiet.Close()
	busy, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer busy.Close()
	_, err = busy.Write(mustEncode(t, &wire.Command{Code: 9, Opaque: 1, ExtFields: map[string]string{}}))
	require.NoError(t, err)
	waitFor(t, func() bool { return s.Stats().Requests == 1 && s.Stats().Connections == 2 }, "request read")
	require.Zero(t, s.sweepIdle(), "nothing is idle yet")
	mu.Lock()
	now = now.Add(time.Minute + time.Second)
	mu.Unlock()
	require.Equal(t, 1, s.sweepIdle(), "the quiet connection only")
	require.NoError(t, quiet.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = quiet.Read(make([]byte, 1))
	require.Error(t, err, "closed by the server")
	close(h.release)
	require.NoError(t, busy.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = wire.ReadFrame(bufio.NewReader(busy), wire.DefaultMaxFrame)
	require.NoError(t, err, "the busy connection is answered")
	require.Equal(t, uint64(1), s.Stats().IdleClosed)
}

// TestMaxInflightStopsReading: past MaxInflight requests in service the
// connection reads nothing more until one ends.
func TestMaxInflightStopsReading(t *testing.T) {
	h := &inlineHandler{blockCode: 9, release: make(chan struct{})}
	s, addr := listen(t, h, ServerOptions{Name: "test", MaxInflight: 2})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(append(frames(t, 9, 1, 3), mustEncode(t, &wire.Command{Code: 7, Opaque: 10, ExtFields: map[string]string{}})...))
	require.NoError(t, err)
	waitFor(t, func() bool { return s.Stats().Requests == 3 }, "three requests read")
	time.Sleep(20 * time.Millisecond) // the fourth would be read by now if the limit did not hold
	require.Equal(t, uint64(3), s.Stats().Requests, "the read loop waits for a slot for the third")
	close(h.release)
	waitFor(t, func() bool { return s.Stats().Requests == 4 }, "the rest is read once slots free")
}
