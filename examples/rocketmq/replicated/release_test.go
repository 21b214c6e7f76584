package replicated

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// queryOffset is a node's answer to QUERY_CONSUMER_OFFSET: the offset, or
// -1 for QUERY_NOT_FOUND.
func queryOffset(t *testing.T, s *Server, group, topic string, q int) int64 {
	t.Helper()
	resp, err := call(s.BrokerAddr(), &wire.Command{Code: wire.CodeQueryConsumerOffset, Language: "GO", Version: 317,
		ExtFields: map[string]string{"consumerGroup": group, "topic": topic, "queueId": fmt.Sprint(q)}})
	require.NoError(t, err)
	if resp.Code == wire.QueryNotFound {
		return -1
	}
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	var off int64
	_, err = fmt.Sscan(resp.ExtFields["offset"], &off)
	require.NoError(t, err)
	return off
}

func sendTo(t *testing.T, s *Server, topic string, queues, n int, prefix string) {
	t.Helper()
	w := writer{s.Node()}
	for i := range n {
		require.NoError(t, w.Append([]*store.Message{{Topic: topic, QueueID: i % queues, Body: fmt.Appendf(nil, "%s%d", prefix, i)}}))
	}
}

// what every node holds of a topic's queues: [min,max) and the bodies. A
// release applied between reading a queue's min and its records (the
// read then starts below the new min) is read again.
func topicView(t *testing.T, s *Server, topic string, queues int) []string {
	t.Helper()
	st := s.Node().Store()
	var out []string
	for q := range queues {
		var lo, hi int64
		var msgs []*store.Message
		var err error
		for range 100 {
			lo, hi = st.MinOffset(topic, q), st.MaxOffset(topic, q)
			if msgs, err = st.Read(topic, q, lo, 100); !errors.Is(err, store.ErrOffsetTooSmall) {
				break
			}
		}
		require.NoError(t, err)
		var bodies []string
		for _, m := range msgs {
			bodies = append(bodies, fmt.Sprintf("%d:%s", m.QueueOffset, m.Body))
		}
		out = append(out, fmt.Sprintf("q%d [%d,%d) %v", q, lo, hi, bodies))
	}
	return out
}

// eachNode waits until cond holds on every live node.
func (c *cluster) eachNode(what string, cond func(s *Server) bool) {
	c.t.Helper()
	for i, s := range c.nodes {
		if !c.closed[i] {
			require.Eventually(c.t, func() bool { return cond(s) }, 10*time.Second, 10*time.Millisecond, "node %d: %s", i, what)
		}
	}
}

// DELETE_TOPIC_IN_BROKER in replicated mode releases the topic's data and
// every group's offsets of it on every node, at the same point of the log:
// reads are empty everywhere, QUERY_CONSUMER_OFFSET finds nothing, and a
// later send goes on from the old queue offsets, alike on every node.
func TestDeleteTopicReleasesItsDataAndOffsetsOnEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	resp, err := call(f.BrokerAddr(), adminCmd(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "del-t",
		"readQueueNums": "2", "writeQueueNums": "2"}, nil))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	sendTo(t, c.nodes[l], "del-t", 2, 6, "old")
	sendTo(t, c.nodes[l], "del-kept", 1, 2, "k")
	w := writer{c.nodes[l].Node()}
	for q := range 2 {
		require.NoError(t, w.CommitOffset("g", "del-t", q, 3))
	}
	require.NoError(t, w.CommitOffset("g", "del-kept", 0, 1))
	c.eachNode("committed", func(s *Server) bool { return queryOffset(t, s, "g", "del-t", 1) == 3 })

	resp, err = call(f.BrokerAddr(), adminCmd(broker.CodeDeleteTopicInBroker, map[string]string{"topic": "del-t"}, nil))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	empty := []string{"q0 [3,3) []", "q1 [3,3) []"}
	c.eachNode("released", func(s *Server) bool { return fmt.Sprint(topicView(t, s, "del-t", 2)) == fmt.Sprint(empty) })
	for i, s := range c.nodes {
		for q := range 2 {
			require.Equal(t, int64(-1), queryOffset(t, s, "g", "del-t", q), "node %d queue %d", i, q)
		}
		require.Equal(t, int64(1), queryOffset(t, s, "g", "del-kept", 0), "node %d: other topics' offsets stay", i)
		require.Equal(t, []string{"q0 [0,2) [0:k0 1:k1]"}, topicView(t, s, "del-kept", 1), "node %d", i)
	}

	sendTo(t, c.nodes[l], "del-t", 2, 2, "new")
	want := []string{"q0 [3,4) [3:new0]", "q1 [3,4) [3:new1]"}
	c.eachNode("sent after", func(s *Server) bool { return fmt.Sprint(topicView(t, s, "del-t", 2)) == fmt.Sprint(want) })
}

// DELETE_SUBSCRIPTIONGROUP with cleanOffset (Apache's semantics) drops the
// group's committed offsets on every node; without it they stay.
func TestDeleteGroupWithCleanOffsetDropsItsOffsetsOnEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	sendTo(t, c.nodes[l], "dg-t", 1, 4, "m")
	w := writer{c.nodes[l].Node()}
	for _, g := range []string{"dg-clean", "dg-keep"} {
		resp, err := call(f.BrokerAddr(), adminCmd(broker.CodeUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)))
		require.NoError(t, err)
		require.Equal(t, wire.Success, resp.Code, resp.Remark)
		require.NoError(t, w.CommitOffset(g, "dg-t", 0, 3))
	}
	c.eachNode("committed", func(s *Server) bool { return queryOffset(t, s, "dg-keep", "dg-t", 0) == 3 })

	for _, g := range []string{"dg-keep", "dg-clean"} { // the last one's drop reaches every node last
		resp, err := call(f.BrokerAddr(), adminCmd(broker.CodeDeleteSubscriptionGroup, map[string]string{"groupName": g,
			"cleanOffset": fmt.Sprint(g == "dg-clean")}, nil))
		require.NoError(t, err)
		require.Equal(t, wire.Success, resp.Code, resp.Remark)
	}
	c.eachNode("offsets dropped", func(s *Server) bool { _, ok := s.Node().Committed("dg-clean", "dg-t", 0); return !ok })
	c.eachNode("groups deleted", func(s *Server) bool { _, ok := s.Groups().Get("dg-keep"); return !ok })
	for i, s := range c.nodes {
		require.Equal(t, int64(-1), queryOffset(t, s, "dg-clean", "dg-t", 0), "node %d", i)
		require.Equal(t, int64(3), queryOffset(t, s, "dg-keep", "dg-t", 0), "node %d: without cleanOffset the offsets stay", i)
	}
}

// A delete the broker refuses by its name rules releases nothing: the
// admin log's own topic (reserved) stays whole on every node, and the
// admin changes after it apply as before.
func TestRefusedDeleteReleasesNothing(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	resp, err := call(f.BrokerAddr(), adminCmd(broker.CodeDeleteTopicInBroker, map[string]string{"topic": AdminTopic}, nil))
	require.NoError(t, err)
	require.Equal(t, int16(29), resp.Code, "the broker's refusal: %s", resp.Remark)
	resp, err = call(f.BrokerAddr(), adminCmd(broker.CodeDeleteSubscriptionGroup, map[string]string{"groupName": "a b", "cleanOffset": "true"}, nil))
	require.NoError(t, err)
	require.Equal(t, int16(29), resp.Code, "the broker's refusal: %s", resp.Remark)
	resp, err = call(f.BrokerAddr(), adminCmd(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "after-refusal",
		"readQueueNums": "2", "writeQueueNums": "2"}, nil))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	c.eachNode("later change applied", func(s *Server) bool { n, ok := s.Topics().Queues("after-refusal"); return ok && n == 2 })
	for i, s := range c.nodes {
		st := s.Node().Store()
		require.Equal(t, int64(0), st.MinOffset(AdminTopic, 0), "node %d: the admin log is whole", i)
		require.Equal(t, int64(3), st.MaxOffset(AdminTopic, 0), "node %d", i)
	}
}
