package transport

import (
	"bufio"
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// batchHandler batches CodeSendMessage and records each ServeBatch's
// opaques; every other code is served inline one by one (and recorded in
// the same sequence, so the order of service shows).
type batchHandler struct {
	inlineHandler
	mu      sync.Mutex
	batches [][]int32
	order   []int32
}

func (h *batchHandler) Batch(req *wire.Command) bool { return req.Code == wire.CodeSendMessage }

func (h *batchHandler) ServeBatch(_ context.Context, _ *Conn, reqs []*wire.Command) []*wire.Command {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ops []int32
	resps := make([]*wire.Command, len(reqs))
	for i, r := range reqs {
		ops = append(ops, r.Opaque)
		h.order = append(h.order, r.Opaque)
		resps[i] = wire.NewResponse(r, wire.Success, "")
		resps[i].ExtFields["batch"] = strconv.Itoa(len(reqs))
	}
	h.batches = append(h.batches, ops)
	return resps
}

func (h *batchHandler) Serve(ctx context.Context, c *Conn, req *wire.Command) *wire.Command {
	h.mu.Lock()
	h.order = append(h.order, req.Opaque)
	h.mu.Unlock()
	return h.inlineHandler.Serve(ctx, c, req)
}

// The batchable requests of one burst are served by one ServeBatch, each
// answered with its own opaque, and a request of another kind read in the
// middle of the burst waits for the ones read before it (order kept).
func TestBatchServesABurstTogetherInOrder(t *testing.T) {
	h := &batchHandler{inlineHandler: inlineHandler{blockCode: -1}}
	cli, wc := servePipe(t, h)
	burst := append(frames(t, wire.CodeSendMessage, 1, 5), frames(t, wire.CodeHeartbeat, 6, 1)...)
	burst = append(burst, frames(t, wire.CodeSendMessage, 7, 3)...)
	go func() { _, _ = cli.Write(burst) }()
	got := readAnswers(t, bufio.NewReader(cli), 9)
	require.Len(t, got, 9)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, [][]int32{{1, 2, 3, 4, 5}, {7, 8, 9}}, h.batches)
	require.Equal(t, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, h.order)
	require.Equal(t, int64(1), wc.writes.Load(), "the burst's answers share one write")
}

// A burst longer than MaxBatchRequests is served in batches of at most
// that many; a lone request is served by Serve, not ServeBatch.
func TestBatchIsBoundedAndALoneRequestIsServedAlone(t *testing.T) {
	h := &batchHandler{inlineHandler: inlineHandler{blockCode: -1}}
	cli, _ := servePipe(t, h)
	n := int32(MaxBatchRequests + 10)
	go func() { _, _ = cli.Write(frames(t, wire.CodeSendMessage, 1, n)) }()
	r := bufio.NewReader(cli)
	require.Len(t, readAnswers(t, r, int(n)), int(n))
	go func() { _, _ = cli.Write(frames(t, wire.CodeSendMessage, 1000, 1)) }()
	require.Len(t, readAnswers(t, r, 1), 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for _, b := range h.batches {
		require.LessOrEqual(t, len(b), MaxBatchRequests)
		total += len(b)
	}
	require.Equal(t, int(n), total, "every request of the long burst through ServeBatch")
	require.Equal(t, 1, h.count(wire.CodeSendMessage), "the lone one through Serve")
}

// Batched requests read before a broken frame are served and answered
// before the connection closes.
func TestBatchIsServedBeforeABrokenFrameCloses(t *testing.T) {
	h := &batchHandler{inlineHandler: inlineHandler{blockCode: -1}}
	cli, _ := servePipe(t, h)
	broken := []byte{0, 0, 0, 1, 'x'}
	go func() { _, _ = cli.Write(append(frames(t, wire.CodeSendMessage, 1, 3), broken...)) }()
	require.Len(t, readAnswers(t, bufio.NewReader(cli), 3), 3)
}
