package replicated

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"
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
