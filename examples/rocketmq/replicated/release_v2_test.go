//go:build !race

package replicated

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/stretchr/testify/require"
)

func newV2Producer(t *testing.T, ns []string) rocketmq.Producer {
	t.Helper()
	p, err := rocketmq.NewProducer(producer.WithNameServer(ns), producer.WithGroupName("pg-del"),
		producer.WithInstanceName(t.Name()+"-p"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// The unchanged v2 client in replicated mode. admin.DeleteTopic, sent to
// a follower, releases the topic's data and offsets on every node;
// DELETE_SUBSCRIPTIONGROUP with cleanOffset drops the group's offsets on
// every node. After a leader change, a consumer of the topic created
// again, from the first offset, gets only what was sent after the delete
// (whose queue offsets go on past the old ones), and a consumer of the
// deleted group starts from its start rule (the first offset), not from
// the offsets the group had committed.
func TestV2DeletesInReplicatedMode(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	ns := c.nameServers()
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(ns)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, group = "v2-del", "v2-del-g" // the deleted topic
	const gtopic, dgroup = "v2-dg", "v2-dg-g" // the deleted group
	create := func() {
		t.Helper()
		require.NoError(t, adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(f.BrokerAddr()),
			admin.WithReadQueueNums(2), admin.WithWriteQueueNums(2)))
		c.eachNode("topic created", func(s *Server) bool { n, ok := s.Topics().Queues(topic); return ok && n == 2 })
	}
	create()
	p := newV2Producer(t, ns)
	var gkeys []string
	for i := range 10 {
		require.NoError(t, send(p, topic, fmt.Sprint("old-", i), time.Now().Add(30*time.Second)))
		gkeys = append(gkeys, fmt.Sprint("k-", i))
		require.NoError(t, send(p, gtopic, gkeys[i], time.Now().Add(30*time.Second)))
	}
	w := writer{c.nodes[l].Node()}
	var max [2]int64
	for q := range 2 {
		max[q] = c.nodes[l].Node().Store().MaxOffset(topic, q)
		require.NoError(t, w.CommitOffset(group, topic, q, 1))
	}
	for q := range DefaultQueueNums {
		require.NoError(t, w.CommitOffset(dgroup, gtopic, q, c.nodes[l].Node().Store().MaxOffset(gtopic, q)))
	}

	require.NoError(t, adm.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(f.BrokerAddr()),
		admin.WithNameSrvAddr(ns)))
	resp, err := call(f.BrokerAddr(), adminCmd(broker.CodeDeleteSubscriptionGroup, map[string]string{"groupName": dgroup, "cleanOffset": "true"}, nil))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	c.eachNode("released", func(s *Server) bool {
		st := s.Node().Store()
		return st.MinOffset(topic, 0) == max[0] && st.MinOffset(topic, 1) == max[1]
	})
	c.eachNode("group offsets dropped", func(s *Server) bool { _, ok := s.Node().Committed(dgroup, gtopic, 0); return !ok })
	for i, s := range c.nodes {
		for q := range 2 {
			require.Equal(t, int64(-1), queryOffset(t, s, group, topic, q), "node %d queue %d", i, q)
		}
	}

	create()
	for i := range 4 {
		require.NoError(t, send(p, topic, fmt.Sprint("new-", i), time.Now().Add(30*time.Second)))
	}
	c.stop(l)
	l2 := c.leader(30 * time.Second)
	_, seen := startCounting(t, ns, group, t.Name()+"-c", topic, nil)
	_, gseen := startCounting(t, ns, dgroup, t.Name()+"-g", gtopic, nil)
	seen.waitAll(t, []string{"new-0", "new-1", "new-2", "new-3"}, 60*time.Second)
	gseen.waitAll(t, gkeys, 60*time.Second)
	seen.mu.Lock()
	for k := range seen.seen {
		require.True(t, strings.HasPrefix(k, "new-"), "a message from before the delete was delivered: %s", k)
	}
	seen.mu.Unlock()
	for q := range 2 {
		st := c.nodes[l2].Node().Store()
		require.Equal(t, max[q], st.MinOffset(topic, q), "queue %d: offsets not reused", q)
	}
}
