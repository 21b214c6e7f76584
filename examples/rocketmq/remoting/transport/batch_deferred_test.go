package transport

import (
	"bufio"
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// deferredHandler defers CodeSendMessage (as a broker defers the sends
// that wait for an fsync): its ServeBatch and Serve of a send block until
// release is closed. Every other code is inline.
type deferredHandler struct {
	batchHandler
	release chan struct{}
	entered chan struct{} // one per blocked serve
	mu      sync.Mutex
	alone   []int32 // sends served by Serve
}

func (h *deferredHandler) Batch(*wire.Command) bool { return false }

func (h *deferredHandler) DeferBatch(req *wire.Command) bool { return req.Code == wire.CodeSendMessage }

func (h *deferredHandler) ServeBatch(ctx context.Context, c *Conn, reqs []*wire.Command) []*wire.Command {
	h.entered <- struct{}{}
	<-h.release
	return h.batchHandler.ServeBatch(ctx, c, reqs)
}

func (h *deferredHandler) Serve(ctx context.Context, c *Conn, req *wire.Command) *wire.Command {
	if req.Code == wire.CodeSendMessage {
		h.entered <- struct{}{}
		<-h.release
		h.mu.Lock()
		h.alone = append(h.alone, req.Opaque)
		h.mu.Unlock()
	}
	return h.batchHandler.Serve(ctx, c, req)
}

func newDeferredHandler() *deferredHandler {
	return &deferredHandler{batchHandler: batchHandler{inlineHandler: inlineHandler{blockCode: -1}},
		release: make(chan struct{}), entered: make(chan struct{}, 16)}
}

// The deferred requests of one burst are served by one ServeBatch off the
// read loop: while it blocks (a send waiting for its fsync), the read loop
// reads and answers the next requests; when it returns, every one of the
// burst is answered with its own opaque.
func TestDeferredBatchIsServedTogetherOffTheReadLoop(t *testing.T) {
	h := newDeferredHandler()
	cli, _ := servePipe(t, h)
	r := bufio.NewReader(cli)
	go func() { _, _ = cli.Write(frames(t, wire.CodeSendMessage, 1, 5)) }()
	<-h.entered // the burst's ServeBatch is blocked …
	go func() { _, _ = cli.Write(frames(t, wire.CodeHeartbeat, 6, 1)) }()
	require.Equal(t, map[int32]bool{6: true}, readAnswers(t, r, 1), "… and the read loop still serves")
	close(h.release)
	require.Equal(t, map[int32]bool{1: true, 2: true, 3: true, 4: true, 5: true}, readAnswers(t, r, 5))
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, [][]int32{{1, 2, 3, 4, 5}}, h.batches, "one ServeBatch for the burst, in order")
}

// A deferred batch of one is served by Serve, off the read loop too; the
// batches are bounded by MaxBatchRequests as inline ones are.
func TestDeferredBatchOfOneAndLongBursts(t *testing.T) {
	h := newDeferredHandler()
	close(h.release)
	h.entered = make(chan struct{}, 4*MaxBatchRequests)
	cli, _ := servePipe(t, h)
	r := bufio.NewReader(cli)
	go func() { _, _ = cli.Write(frames(t, wire.CodeSendMessage, 1, 1)) }()
	require.Len(t, readAnswers(t, r, 1), 1)
	n := int32(MaxBatchRequests + 10)
	go func() { _, _ = cli.Write(frames(t, wire.CodeSendMessage, 100, n)) }()
	require.Len(t, readAnswers(t, r, int(n)), int(n))
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, []int32{1}, h.alone, "the lone send through Serve")
	total := 0
	for _, b := range h.batches {
		require.LessOrEqual(t, len(b), MaxBatchRequests)
		total += len(b)
	}
	require.Equal(t, int(n), total)
}

// A connection that closes while a deferred batch is blocked waits for it
// (no goroutine outlives the server: goleak in TestMain), and an inline
// batch and a deferred one read in one burst keep their kinds apart.
func TestDeferredBatchAndInlineBatchKeepApartAndCloseWaits(t *testing.T) {
	h := &mixedHandler{deferredHandler: newDeferredHandler()}
	cli, _ := servePipe(t, h)
	r := bufio.NewReader(cli)
	burst := append(frames(t, wire.CodePullMessage, 1, 3), frames(t, wire.CodeSendMessage, 4, 3)...)
	go func() { _, _ = cli.Write(burst) }()
	require.Equal(t, map[int32]bool{1: true, 2: true, 3: true}, readAnswers(t, r, 3), "the inline batch is answered")
	<-h.entered
	close(h.release)
	require.Len(t, readAnswers(t, r, 3), 3)
	h.mu.Lock()
	require.Equal(t, [][]int32{{1, 2, 3}, {4, 5, 6}}, h.batches)
	h.mu.Unlock()

	h2 := newDeferredHandler()
	cli2, _ := servePipe(t, h2)
	go func() { _, _ = cli2.Write(frames(t, wire.CodeSendMessage, 1, 2)) }()
	<-h2.entered
	require.NoError(t, cli2.Close())
	close(h2.release) // the server's Close (cleanup) waits for the blocked batch
}

// mixedHandler batches CodePullMessage inline and defers sends.
type mixedHandler struct{ *deferredHandler }

func (h *mixedHandler) Batch(req *wire.Command) bool { return req.Code == wire.CodePullMessage }

func (h *mixedHandler) ServeBatch(ctx context.Context, c *Conn, reqs []*wire.Command) []*wire.Command {
	if reqs[0].Code == wire.CodePullMessage {
		return h.batchHandler.ServeBatch(ctx, c, reqs)
	}
	return h.deferredHandler.ServeBatch(ctx, c, reqs)
}
