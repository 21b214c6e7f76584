package remoteacl

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Options.ClientAddr names the client a rule's sourceIps is checked
// against (a replicated leader's forwarded request: the member's
// connection, the client's address).
func TestClientAddrDecidesSourceRanges(t *testing.T) {
	c, err := acl.Parse([]byte(`{"users":[{"accessKey":"bench","secretKey":"bench-secret"}],
	  "rules":[{"user":"bench","resources":["Topic:bench-*"],"actions":["Pub"],"decision":"Allow","sourceIps":["10.0.0.0/8"]}]}`))
	require.NoError(t, err)
	az, err := acl.New(c, acl.Options{})
	require.NoError(t, err)
	type key struct{}
	h := Wrap(nil, az, Options{ClientAddr: func(ctx context.Context) net.Addr {
		a, _ := ctx.Value(key{}).(net.Addr)
		return a
	}})
	req := benchRequest(wire.CodeSendMessage, map[string]string{"topic": "bench-x"}, []byte("b"))
	in := context.WithValue(context.Background(), key{}, net.Addr(&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 1}))
	require.Nil(t, h.check(in, nil, req), "a client in the range")
	out := context.WithValue(context.Background(), key{}, net.Addr(&net.TCPAddr{IP: net.IPv4(192, 168, 1, 1), Port: 1}))
	resp := h.check(out, nil, req)
	require.NotNil(t, resp, "a client outside it")
	require.Equal(t, wire.NoPermission, resp.Code)
}
