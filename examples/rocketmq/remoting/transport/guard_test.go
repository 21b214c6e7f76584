package transport

import (
	"bufio"
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Request codes the test guard refuses, and leaves undecided.
const (
	refusedCode   int16 = 901
	undecidedCode int16 = 902
)

// testGuard refuses refusedCode, leaves undecidedCode to its own Serve and
// admits the rest to inner. It records where each request went.
type testGuard struct {
	inner    *batchHandler
	mu       sync.Mutex
	admitted []int32 // opaques Admit decided
	own      []int32 // opaques its own Serve served
}

func (g *testGuard) Admit(_ context.Context, _ *Conn, req *wire.Command) (*wire.Command, bool) {
	g.mu.Lock()
	g.admitted = append(g.admitted, req.Opaque)
	g.mu.Unlock()
	switch req.Code {
	case refusedCode:
		return wire.NewResponse(req, wire.NoPermission, "refused"), true
	case undecidedCode:
		return nil, false
	}
	return nil, true
}

func (g *testGuard) Guarded() Handler { return g.inner }

// Serve is what a caller that is not the transport gets: the check, then
// inner. The transport calls it only for the requests Admit left undecided.
func (g *testGuard) Serve(ctx context.Context, c *Conn, req *wire.Command) *wire.Command {
	g.mu.Lock()
	g.own = append(g.own, req.Opaque)
	g.mu.Unlock()
	return g.inner.Serve(ctx, c, req)
}

func readCodes(t *testing.T, r *bufio.Reader, n int) map[int32]int16 {
	t.Helper()
	got := map[int32]int16{}
	for len(got) < n {
		f, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
		require.NoError(t, err)
		cmd, err := wire.Decode(f)
		require.NoError(t, err)
		got[cmd.Opaque] = cmd.Code
	}
	return got
}

// Admit sees every request on the read loop before anything serves it: a
// refused one is answered with the refusal and reaches no handler (a
// refused oneway one is dropped); an admitted one is served by Guarded()
// with its capabilities (batched, inline), not by the Guard's Serve; an
// undecided one by the Guard's Serve.
func TestGuardAdmitsRefusesAndDefers(t *testing.T) {
	g := &testGuard{inner: &batchHandler{inlineHandler: inlineHandler{blockCode: -1}}}
	cli, _ := servePipe(t, g)
	burst := append(frames(t, wire.CodeSendMessage, 1, 2), frames(t, refusedCode, 3, 1)...)
	burst = append(burst, frames(t, wire.CodeSendMessage, 4, 2)...)
	burst = append(burst, frames(t, undecidedCode, 6, 1)...)
	burst = append(burst, frames(t, wire.CodeHeartbeat, 7, 1)...)
	oneway := &wire.Command{Code: refusedCode, Opaque: 8, Flag: wire.FlagOneway, ExtFields: map[string]string{}}
	burst = append(burst, mustEncode(t, oneway)...)
	burst = append(burst, frames(t, wire.CodeHeartbeat, 9, 1)...)
	go func() { _, _ = cli.Write(burst) }()
	got := readCodes(t, bufio.NewReader(cli), 8)
	require.Equal(t, map[int32]int16{1: wire.Success, 2: wire.Success, 3: wire.NoPermission, 4: wire.Success,
		5: wire.Success, 6: wire.Success, 7: wire.Success, 9: wire.Success}, got, "no answer to the oneway 8")

	g.mu.Lock()
	defer g.mu.Unlock()
	require.Equal(t, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, g.admitted)
	require.Equal(t, []int32{6}, g.own, "only the undecided request through the guard's Serve")
	h := g.inner
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, [][]int32{{1, 2}, {4, 5}}, h.batches, "admitted sends batched by the guarded handler")
	require.Zero(t, h.count(refusedCode), "a refused request reaches no handler")
	require.Equal(t, 2, h.count(wire.CodeHeartbeat))
}
