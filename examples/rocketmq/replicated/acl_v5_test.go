package replicated

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	grpcinsecure "google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

func v5ACLConfig(endpoints []string, group, ak, sk string) *rmq.Config {
	return &rmq.Config{Endpoint: strings.Join(endpoints, ";"), ConsumerGroup: group,
		Credentials: &credentials.SessionCredentials{AccessKey: ak, AccessSecret: sk}}
}

// The official v5 client with credentials, through a follower's endpoint
// of a three-node cluster with ACL: the allowed user's send (forwarded,
// checked by the follower and again by the leader) is received and acked
// through the follower; a topic the user may not write is refused
// FORBIDDEN (40300), a wrong secret UNAUTHORIZED (40100), and nothing of
// theirs is stored.
func TestACLV5ClientThroughAFollower(t *testing.T) {
	c := startCluster(t, 3, withACL(t))
	l := c.leader(30 * time.Second)
	ep := []string{c.nodes[(l+1)%3].GRPCAddr()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var st starter
	p, err := rmq.NewProducer(v5ACLConfig(ep, "", "app", "app-secret"), rmq.WithTopics("orders"))
	require.NoError(t, err)
	st.add(p.Start, nil)
	t.Cleanup(func() { _ = p.GracefulStop() })
	sc, err := rmq.NewSimpleConsumer(v5ACLConfig(ep, "workers", "app", "app-secret"), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{"orders": rmq.SUB_ALL}))
	require.NoError(t, err)
	st.add(sc.Start, nil)
	t.Cleanup(func() { _ = sc.GracefulStop() })
	st.run(t)

	_, err = p.Send(ctx, &rmq.Message{Topic: "orders", Body: []byte("hello")})
	require.NoError(t, err)
	var rs *rmq.ErrRpcStatus
	_, err = p.Send(ctx, &rmq.Message{Topic: "payments", Body: []byte("no")})
	require.ErrorAs(t, err, &rs)
	require.EqualValues(t, 40300, rs.Code, "FORBIDDEN: %v", err)

	var got []*rmq.MessageView
	for ctx.Err() == nil && len(got) == 0 {
		got, err = sc.Receive(ctx, 1, 20*time.Second)
		if errors.As(err, &rs) && rs.Code == 40401 {
			err = nil
		}
		require.NoError(t, err)
	}
	require.Len(t, got, 1)
	require.Equal(t, "hello", string(got[0].GetBody()))
	require.NoError(t, sc.Ack(ctx, got[0]))

	bad, err := rmq.NewProducer(v5ACLConfig(ep, "", "app", "guess"), rmq.WithTopics("orders"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = bad.GracefulStop() })
	require.ErrorContains(t, bad.Start(), "UNAUTHORIZED", "its route query is refused")
	var n int64
	for q := range DefaultQueueNums {
		n += c.nodes[l].Node().Store().MaxOffset("orders", q)
	}
	require.EqualValues(t, 1, n, "only the allowed send is stored")
	require.Zero(t, c.nodes[l].Node().Store().MaxOffset("payments", 0))
}

// A gRPC call carrying the forwarded metadata that no member made is
// refused UNAUTHORIZED on every node before anything else, and stores
// nothing.
func TestACLV5ForwardedMarkCannotBeForged(t *testing.T) {
	c := startCluster(t, 3, withACL(t))
	l := c.leader(30 * time.Second)
	for _, mark := range []string{"1", "v1 127.0.0.1:1 00", "v1 127.0.0.1:1 " + strings.Repeat("ab", 32)} {
		for i, s := range c.nodes {
			conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(grpcinsecure.NewCredentials()))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ctx = metadata.AppendToOutgoingContext(ctx, forwardedMD, mark)
			resp, err := v2.NewMessagingServiceClient(conn).SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{{
				Topic: &v2.Resource{Name: "orders"}, Body: []byte("forged"),
				SystemProperties: &v2.SystemProperties{MessageId: "01", MessageType: v2.MessageType_NORMAL}}}})
			cancel()
			conn.Close()
			require.NoError(t, err)
			require.Equal(t, v2.Code_UNAUTHORIZED, resp.GetStatus().GetCode(), "node %d (leader %d), mark %q: %s", i, l, mark, resp.GetStatus().GetMessage())
			require.Contains(t, resp.GetStatus().GetMessage(), "forwarded mark")
		}
	}
	require.Equal(t, []int64{0, 0, 0}, c.stored("orders"))
}

// sts is a server stream naming its method (what grpc.Method reads).
type sts struct{ method string }

func (s sts) Method() string             { return s.method }
func (sts) SetHeader(metadata.MD) error  { return nil }
func (sts) SendHeader(metadata.MD) error { return nil }
func (sts) SetTrailer(metadata.MD) error { return nil }

// A follower's gRPC mark names its client's address, and the leader reads
// it back only for the same method and signature under the same key.
func TestGRPCForwardMarkNamesTheClient(t *testing.T) {
	f := &gforward{key: []byte("key")}
	const method = svc + "SendMessage"
	in := metadata.Pairs("authorization", "MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature=00", "x-mq-date-time", "20260101T000000Z")
	ctx := metadata.NewIncomingContext(context.Background(), in)
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4567}})
	ctx = grpc.NewContextWithServerTransportStream(ctx, sts{method})
	out, _ := metadata.FromOutgoingContext(f.outgoing(ctx))
	at := func(method string, md metadata.MD) context.Context {
		return grpc.NewContextWithServerTransportStream(metadata.NewIncomingContext(context.Background(), md), sts{method})
	}
	ip, ok, err := f.clientAddr(at(method, out))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "10.1.2.3", ip.String())
	_, _, err = f.clientAddr(at(svc+"AckMessage", out))
	require.ErrorIs(t, err, errForgedForward, "another method")
	other := out.Copy()
	other.Set("x-mq-date-time", "20260101T000001Z")
	_, _, err = f.clientAddr(at(method, other))
	require.ErrorIs(t, err, errForgedForward, "another signature")
	_, _, err = (&gforward{key: []byte("other")}).clientAddr(at(method, out))
	require.ErrorIs(t, err, errForgedForward, "another key")
	_, ok, err = f.clientAddr(at(method, metadata.MD{}))
	require.NoError(t, err)
	require.False(t, ok, "not forwarded: the peer's address")
}
