package remoteacl

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// batchRecorder is a BatchHandler that answers each request with its own
// opaque and records what reached it, and how.
type batchRecorder struct {
	batches [][]*wire.Command
	served  []*wire.Command
}

func (r *batchRecorder) Serve(_ context.Context, _ *transport.Conn, req *wire.Command) *wire.Command {
	r.served = append(r.served, req)
	return &wire.Command{Code: wire.Success, Opaque: req.Opaque}
}

func (r *batchRecorder) Batch(*wire.Command) bool { return true }

func (r *batchRecorder) Inline(*wire.Command) bool { return true }

func (r *batchRecorder) ServeBatch(_ context.Context, _ *transport.Conn, reqs []*wire.Command) []*wire.Command {
	r.batches = append(r.batches, reqs)
	out := make([]*wire.Command, len(reqs))
	for i, req := range reqs {
		out[i] = &wire.Command{Code: wire.Success, Opaque: req.Opaque}
	}
	return out
}

func batchHandler(t *testing.T) (*Handler, *batchRecorder) {
	t.Helper()
	c, err := acl.Parse([]byte(benchDoc))
	require.NoError(t, err)
	az, err := acl.New(c, acl.Options{})
	require.NoError(t, err)
	rec := &batchRecorder{}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	return Wrap(rec, az, Options{ClientAddr: func(context.Context) net.Addr { return addr }}), rec
}

func sendReq(opaque int32, topic string) *wire.Command {
	req := benchRequest(wire.CodeSendMessage, map[string]string{"topic": topic, "queueId": "0"}, []byte("body"))
	req.Opaque = opaque
	return req
}

// A batch that passes whole reaches the wrapped handler as one ServeBatch
// of the same requests, its answers returned as they are.
func TestServeBatchAllAllowed(t *testing.T) {
	h, rec := batchHandler(t)
	reqs := []*wire.Command{sendReq(1, "bench-a"), sendReq(2, "bench-b"), sendReq(3, "bench-c")}
	resps := h.ServeBatch(context.Background(), nil, reqs)
	require.Len(t, rec.batches, 1)
	require.Equal(t, reqs, rec.batches[0])
	require.Len(t, resps, 3)
	for i, r := range resps {
		require.Equal(t, wire.Success, r.Code)
		require.Equal(t, reqs[i].Opaque, r.Opaque)
	}
}

// Refused requests of a batch are answered NO_PERMISSION in their place,
// and only the others reach the wrapped handler (one of them: Serve).
func TestServeBatchRefusesInPlace(t *testing.T) {
	h, rec := batchHandler(t)
	forged := sendReq(2, "bench-b")
	forged.ExtFields["topic"] = "bench-forged" // signed for bench-b
	reqs := []*wire.Command{sendReq(1, "bench-a"), forged, sendReq(3, "bench-audit"), sendReq(4, "bench-d")}
	resps := h.ServeBatch(context.Background(), nil, reqs)
	require.Len(t, resps, 4)
	require.Equal(t, []int16{wire.Success, wire.NoPermission, wire.NoPermission, wire.Success},
		[]int16{resps[0].Code, resps[1].Code, resps[2].Code, resps[3].Code})
	require.Equal(t, int32(1), resps[0].Opaque)
	require.Equal(t, int32(4), resps[3].Opaque)
	require.Equal(t, [][]*wire.Command{{reqs[0], reqs[3]}}, rec.batches)

	rec.batches = nil
	resps = h.ServeBatch(context.Background(), nil, []*wire.Command{forged, sendReq(5, "bench-e")})
	require.Equal(t, wire.NoPermission, resps[0].Code)
	require.Equal(t, int32(5), resps[1].Opaque)
	require.Empty(t, rec.batches, "a lone survivor is served by Serve")
	require.Len(t, rec.served, 1)

	rec.served = nil
	resps = h.ServeBatch(context.Background(), nil, []*wire.Command{forged, forged})
	require.Equal(t, wire.NoPermission, resps[0].Code)
	require.Equal(t, wire.NoPermission, resps[1].Code)
	require.Empty(t, rec.batches)
	require.Empty(t, rec.served)
}
