package replicated

import (
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// resetFixture is a cluster whose leader holds 5 messages of orders queue
// 0 and the replicated committed offset 5 of group g.
func resetFixture(t *testing.T, tweaks ...func(*Config)) (*cluster, int) {
	t.Helper()
	c := startCluster(t, 3, tweaks...)
	l := c.leader(30 * time.Second)
	w := writer{c.nodes[l].Node()}
	var msgs []*store.Message
	for range 5 {
		msgs = append(msgs, &store.Message{Topic: "orders", Body: []byte("m")})
	}
	require.NoError(t, w.Append(msgs))
	require.NoError(t, w.CommitOffset("g", "orders", 0, 5))
	for i, s := range c.nodes {
		_, err := s.Topics().Ensure("orders", 4)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			off, ok := s.Node().Committed("g", "orders", 0)
			return ok && off == 5
		}, 10*time.Second, 10*time.Millisecond, "node %d", i)
	}
	return c, l
}

// leaveAlone stops every node but l and waits until l, alone, steps down
// and knows no leader; it returns l's server.
func (c *cluster) leaveAlone(l int) *Server {
	c.t.Helper()
	n := c.nodes[l]
	for i := range c.nodes {
		if i != l {
			c.stop(i)
		}
	}
	require.Eventually(c.t, func() bool {
		id, _ := n.Node().Leader()
		return !n.Node().IsLeader() && id == ""
	}, 30*time.Second, 10*time.Millisecond, "the node alone steps down")
	return n
}

// An INVOKE_BROKER_TO_RESET_OFFSET that raft refuses (here: the node lost
// its quorum, so it leads no more and knows no leader to forward to) is
// answered SYSTEM_ERROR naming the cause, never SUCCESS with a
// ResetOffsetBody, and moves nothing: not the replicated offset, not the
// node's own offset manager, not what QUERY_CONSUMER_OFFSET answers.
func TestResetRaftRefusesIsAnErrorAndMovesNothing(t *testing.T) {
	c, l := resetFixture(t)
	n := c.leaveAlone(l)

	resp, err := call(n.BrokerAddr(), &wire.Command{Code: broker.CodeInvokeBrokerToResetOffset, Language: "GO", Version: 317,
		ExtFields: map[string]string{"group": "g", "topic": "orders", "queueId": "0", "offset": "2", "timestamp": "0"}})
	require.NoError(t, err)
	require.Equal(t, wire.SystemError, resp.Code, "a reset raft refused answered %d %q", resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "not the leader")
	require.Empty(t, resp.Body)

	off, ok := n.Node().Committed("g", "orders", 0)
	require.True(t, ok)
	require.Equal(t, int64(5), off, "the replicated offset")
	_, local := n.core.offsets.Committed("g", "orders", 0)
	require.False(t, local, "the node's own offset manager moved")
	q, err := call(n.BrokerAddr(), &wire.Command{Code: wire.CodeQueryConsumerOffset, Language: "GO", Version: 317,
		ExtFields: map[string]string{"consumerGroup": "g", "topic": "orders", "queueId": "0"}})
	require.NoError(t, err)
	require.Equal(t, wire.Success, q.Code, q.Remark)
	require.Equal(t, "5", q.ExtFields["offset"])
}
