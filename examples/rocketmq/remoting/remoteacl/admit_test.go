package remoteacl

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

var _ transport.Guard = (*Handler)(nil)

// countingHandler answers SUCCESS and counts what reached it.
type countingHandler struct {
	mu   sync.Mutex
	seen []int32
}

func (h *countingHandler) Serve(_ context.Context, _ *transport.Conn, req *wire.Command) *wire.Command {
	h.mu.Lock()
	h.seen = append(h.seen, req.Opaque)
	h.mu.Unlock()
	return wire.NewResponse(req, wire.Success, "")
}

func (h *countingHandler) opaques() []int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int32(nil), h.seen...)
}

// Admit decides what Serve decides; a send-back with TopicAt set is left
// to Serve (it reads the store), and Serve still checks it.
func TestAdmitDecidesAsServeDoes(t *testing.T) {
	c, err := acl.Parse([]byte(benchDoc))
	require.NoError(t, err)
	az, err := acl.New(c, acl.Options{})
	require.NoError(t, err)
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	inner := &countingHandler{}
	topicAt := func(int64) (string, error) { return "", errors.New("no such message") }
	h := Wrap(inner, az, Options{TopicAt: topicAt, ClientAddr: func(context.Context) net.Addr { return addr }})
	require.Same(t, inner, h.Guarded())

	ok := sendReq(1, "bench-a")
	refusal, decided := h.Admit(context.Background(), nil, ok)
	require.True(t, decided)
	require.Nil(t, refusal)

	forged := sendReq(2, "bench-b")
	forged.ExtFields["topic"] = "bench-forged"
	refusal, decided = h.Admit(context.Background(), nil, forged)
	require.True(t, decided)
	require.Equal(t, wire.NoPermission, refusal.Code)

	denied := sendReq(3, "bench-audit")
	refusal, _ = h.Admit(context.Background(), nil, denied)
	require.Equal(t, wire.NoPermission, refusal.Code)

	back := benchRequest(wire.CodeConsumerSendMsgBack, map[string]string{"group": "g-bench", "offset": "7"}, nil)
	refusal, decided = h.Admit(context.Background(), nil, back)
	require.False(t, decided, "left to Serve")
	require.Nil(t, refusal)
	resp := h.Serve(context.Background(), nil, back)
	require.Equal(t, wire.NoPermission, resp.Code, "Serve checks it: its message cannot be read")
	require.Empty(t, inner.opaques(), "Admit serves nothing; Serve served no refused request")
}

// Over a transport.Server, a refused request never reaches the wrapped
// handler and an admitted one does, once.
func TestGuardOverATransportServer(t *testing.T) {
	c, err := acl.Parse([]byte(benchDoc))
	require.NoError(t, err)
	az, err := acl.New(c, acl.Options{})
	require.NoError(t, err)
	inner := &countingHandler{}
	srv := transport.NewServer(Wrap(inner, az, Options{}), transport.ServerOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-served, transport.ErrServerClosed)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	forged := sendReq(2, "bench-b")
	forged.ExtFields["topic"] = "bench-forged"
	var out []byte
	for _, req := range []*wire.Command{sendReq(1, "bench-a"), forged, sendReq(3, "bench-audit"), sendReq(4, "bench-d")} {
		f, err := wire.Encode(req)
		require.NoError(t, err)
		out = append(out, f...)
	}
	_, err = nc.Write(out)
	require.NoError(t, err)
	r := bufio.NewReader(nc)
	got := map[int32]int16{}
	for len(got) < 4 {
		f, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
		require.NoError(t, err)
		resp, err := wire.Decode(f)
		require.NoError(t, err)
		got[resp.Opaque] = resp.Code
	}
	require.Equal(t, map[int32]int16{1: wire.Success, 2: wire.NoPermission, 3: wire.NoPermission, 4: wire.Success}, got)
	require.ElementsMatch(t, []int32{1, 4}, inner.opaques())
}
