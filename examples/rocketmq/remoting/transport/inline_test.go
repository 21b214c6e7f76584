package transport

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// inlineHandler serves every code inline except blockCode, which waits for
// release (a long poll).
type inlineHandler struct {
	recordingHandler
	blockCode int16
	release   chan struct{}
}

func (h *inlineHandler) Inline(req *wire.Command) bool { return req.Code != h.blockCode }

func (h *inlineHandler) Serve(ctx context.Context, c *Conn, req *wire.Command) *wire.Command {
	if req.Code == h.blockCode {
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return h.recordingHandler.Serve(ctx, c, req)
}

// writeCounter counts the writes to the server's end of a connection.
type writeCounter struct {
	net.Conn
	writes atomic.Int64
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(p)
}

// servePipe serves h on one end of a net.Pipe and returns the other end
// and the server end's write counter.
func servePipe(t *testing.T, h Handler) (net.Conn, *writeCounter) {
	t.Helper()
	cli, srv := net.Pipe()
	wc := &writeCounter{Conn: srv}
	s := NewServer(h, ServerOptions{})
	l := &oneConnListener{c: wc, done: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		cli.Close()
		require.NoError(t, s.Close())
		require.ErrorIs(t, <-served, ErrServerClosed)
	})
	return cli, wc
}

func frames(t *testing.T, code int16, first, n int32) []byte {
	var b []byte
	for i := int32(0); i < n; i++ {
		b = append(b, mustEncode(t, &wire.Command{Code: code, Opaque: first + i, ExtFields: map[string]string{}})...)
	}
	return b
}

func readAnswers(t *testing.T, r *bufio.Reader, n int) map[int32]bool {
	t.Helper()
	got := map[int32]bool{}
	for len(got) < n {
		f, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
		require.NoError(t, err)
		cmd, err := wire.Decode(f)
		require.NoError(t, err)
		require.True(t, cmd.IsResponse())
		got[cmd.Opaque] = true
	}
	return got
}

// The answers to a burst of inline requests go out in one write, not one
// write per answer.
func TestInlineAnswersOfOneBurstShareOneWrite(t *testing.T) {
	h := &inlineHandler{blockCode: -1}
	cli, wc := servePipe(t, h)
	const n = 16
	go func() { _, _ = cli.Write(frames(t, wire.CodeHeartbeat, 1, n)) }()
	got := readAnswers(t, bufio.NewReader(cli), n)
	require.Len(t, got, n)
	require.Equal(t, n, h.count(wire.CodeHeartbeat))
	require.Equal(t, int64(1), wc.writes.Load(), "one write for the burst's %d answers", n)
}

// A request that is not inline (a long poll) does not hold up the inline
// ones read after it, and its answer still goes out.
func TestInlineRequestsAreNotHeldUpByABlockedOne(t *testing.T) {
	h := &inlineHandler{blockCode: wire.CodePullMessage, release: make(chan struct{})}
	cli, _ := servePipe(t, h)
	r := bufio.NewReader(cli)
	go func() {
		_, _ = cli.Write(append(frames(t, wire.CodePullMessage, 100, 1), frames(t, wire.CodeHeartbeat, 1, 3)...))
	}()
	got := readAnswers(t, r, 3)
	require.Equal(t, map[int32]bool{1: true, 2: true, 3: true}, got)
	close(h.release)
	require.Equal(t, map[int32]bool{100: true}, readAnswers(t, r, 1))
}

// Inline answers waiting to go out are written before the connection is
// closed for a broken frame that arrived with their requests.
func TestInlineAnswersGoOutBeforeABrokenFrameCloses(t *testing.T) {
	h := &inlineHandler{blockCode: -1}
	cli, _ := servePipe(t, h)
	broken := []byte{0, 0, 0, 1, 'x'} // a frame length below 4
	go func() { _, _ = cli.Write(append(frames(t, wire.CodeHeartbeat, 1, 2), broken...)) }()
	r := bufio.NewReader(cli)
	require.Len(t, readAnswers(t, r, 2), 2)
	_, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
	require.ErrorIs(t, err, io.EOF, "then the connection is closed")
}

// As TestWriteErrorDoesNotDropRequestsAlreadySent, with the requests served
// inline: the failed write of an inline answer keeps the socket open, and
// the oneway requests read after it are served.
func TestInlineWriteErrorDoesNotDropRequestsAlreadySent(t *testing.T) {
	s := serveResetConn(t, &inlineHandler{blockCode: -1})
	require.Equal(t, uint64(1), s.Stats().WriteErrors)
}

// Inline answers and the write loop's (notifications, goroutine-served
// requests) share the connection's writer without tearing a frame.
func TestInlineAndWriteLoopAnswersInterleaveWhole(t *testing.T) {
	h := &inlineHandler{blockCode: wire.CodePullMessage, release: make(chan struct{})}
	close(h.release) // goroutine-served, not blocked
	cli, _ := servePipe(t, h)
	const n = 200
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int32(0); i < n; i++ {
			code := wire.CodeHeartbeat
			if i%2 == 0 {
				code = wire.CodePullMessage
			}
			if _, err := cli.Write(frames(t, code, i+1, 1)); err != nil {
				return
			}
		}
	}()
	got := readAnswers(t, bufio.NewReader(cli), n)
	require.Len(t, got, n)
	wg.Wait()
}

// bodyHandler answers every request with body, through the write loop.
type bodyHandler struct{ body []byte }

func (h bodyHandler) Serve(_ context.Context, _ *Conn, req *wire.Command) *wire.Command {
	resp := wire.NewResponse(req, wire.Success, "")
	resp.Body = h.body
	return resp
}

// A large answer (a pull's messages) is written apart from its header; the
// frame the client reads is the one Encode makes.
func TestLargeAnswerFrameIsWhole(t *testing.T) {
	body := make([]byte, 300<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, size := range []int{0, 100, 4 << 10, 4<<10 + 1, len(body)} {
		cli, _ := servePipe(t, bodyHandler{body: body[:size]})
		go func() { _, _ = cli.Write(frames(t, wire.CodePullMessage, 1, 2)) }()
		r := bufio.NewReader(cli)
		for i := 0; i < 2; i++ {
			f, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
			require.NoError(t, err)
			cmd, err := wire.Decode(f)
			require.NoError(t, err)
			require.Equal(t, wire.Success, cmd.Code)
			require.Equal(t, size, len(cmd.Body), "size %d", size)
			if size > 0 {
				require.Equal(t, body[:size], cmd.Body)
			}
		}
	}
}

// A peer that sends a broken frame and never reads its answers does not
// keep its connection open: the last answers get a bounded time to go out.
func TestClosingConnectionDoesNotWaitForAPeerThatDoesNotRead(t *testing.T) {
	h := &inlineHandler{blockCode: -1}
	cli, srv := net.Pipe()
	defer cli.Close()
	s := NewServer(h, ServerOptions{})
	l := &oneConnListener{c: srv, done: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	_, err := cli.Write(append(frames(t, wire.CodeHeartbeat, 1, 3), 0, 0, 0, 1, 'x'))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.count(wire.CodeHeartbeat) == 3 && s.Stats().Connections == 0 },
		5*time.Second, 5*time.Millisecond, "the connection closes though its answers are unread")
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-served, ErrServerClosed)
}
