package replicated

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/stretchr/testify/require"
)

func adminCmd(code int16, ext map[string]string, body []byte) *wire.Command {
	return &wire.Command{Code: code, Language: "GO", Version: 317, ExtFields: ext, Body: body}
}

// routeQueues is the read queue number a node's name server routes topic
// with.
func routeQueues(t *testing.T, ns, topic string) int {
	t.Helper()
	resp, err := call(ns, &wire.Command{Code: wire.CodeGetRouteInfoByTopic, Language: "GO", Version: 317,
		ExtFields: map[string]string{"topic": topic}})
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	var rd struct {
		QueueDatas []struct {
			BrokerName     string `json:"brokerName"`
			ReadQueueNums  int    `json:"readQueueNums"`
			WriteQueueNums int    `json:"writeQueueNums"`
		} `json:"queueDatas"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &rd))
	for _, q := range rd.QueueDatas {
		if q.BrokerName == broker.DefaultBrokerName {
			return q.ReadQueueNums
		}
	}
	t.Fatalf("route %s: no %s", resp.Body, broker.DefaultBrokerName)
	return 0
}

// The admin's topic and group changes go through raft: sent to a follower
// (forwarded) or the leader, each is applied on every node in log order —
// the topic table, the topic configuration, the subscription groups, and
// the routes that follow from them — a refused change is refused on every
// node, which go on applying, and a new leader has them all.
func TestAdminTableChangesAreReplicated(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	resp, err := call(f.BrokerAddr(), adminCmd(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "admin-t",
		"readQueueNums": "8", "writeQueueNums": "8", "perm": "6", "attributes": "+message.type=FIFO"}, nil))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	resp, err = call(c.nodes[l].BrokerAddr(), adminCmd(broker.CodeUpdateAndCreateSubscriptionGroup, nil,
		[]byte(`{"groupName":"og","consumeMessageOrderly":true}`)))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	resp, err = call(f.BrokerAddr(), adminCmd(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "a b"}, nil))
	require.NoError(t, err)
	require.Equal(t, int16(29), resp.Code, "a refused change answers the leader's refusal: %s", resp.Remark)
	resp, err = call(f.BrokerAddr(), adminCmd(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "admin-u",
		"readQueueNums": "2", "writeQueueNums": "2"}, nil))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)

	same := func() {
		t.Helper()
		for i, s := range c.nodes {
			if c.closed[i] {
				continue
			}
			require.Eventually(t, func() bool {
				n, ok := s.Topics().Queues("admin-u")
				return ok && n == 2
			}, 10*time.Second, 10*time.Millisecond, "node %d applied every change", i)
			n, ok := s.Topics().Queues("admin-t")
			require.True(t, ok, "node %d", i)
			require.Equal(t, 8, n, "node %d", i)
			require.Equal(t, "FIFO", s.TopicConfigs().MessageType("admin-t"), "node %d", i)
			require.True(t, s.Groups().Orderly("og"), "node %d", i)
			_, ok = s.Topics().Queues("a b")
			require.False(t, ok, "node %d", i)
			require.Equal(t, 8, routeQueues(t, s.NameSrvAddr(), "admin-t"), "node %d", i)
		}
	}
	same()

	c.stop(l)
	l2 := c.leader(30 * time.Second)
	resp, err = call(c.nodes[l2].BrokerAddr(), adminCmd(broker.CodeDeleteTopicInBroker, map[string]string{"topic": "admin-u"}, nil))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	for i, s := range c.nodes {
		if c.closed[i] {
			continue
		}
		require.Eventually(t, func() bool {
			_, ok := s.Topics().Queues("admin-u")
			return !ok
		}, 10*time.Second, 10*time.Millisecond, "node %d deleted it", i)
		n, _ := s.Topics().Queues("admin-t")
		require.Equal(t, 8, n, "node %d", i)
	}
}

// A node killed (-9) and restarted keeps the changes it applied, applies
// the ones logged while it was down, and none twice (Dir/admin.applied).
func TestAdminTableChangesSurviveKill9(t *testing.T) {
	ps := startProcs(t, 3)
	l := agreedLeader(t, ps, 30*time.Second)
	var f *nodeProc
	for _, p := range ps {
		if p != l {
			f = p
		}
	}
	change := func(topic, queues string) {
		t.Helper()
		resp, err := call(l.cfg.BrokerAddr, adminCmd(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": topic,
			"readQueueNums": queues, "writeQueueNums": queues, "attributes": "+message.type=NORMAL"}, nil))
		require.NoError(t, err)
		require.Equal(t, wire.Success, resp.Code, resp.Remark)
	}
	change("admin-k", "8")
	require.Eventually(t, func() bool { return routeQueuesOr0(f.cfg.NameSrvAddr, "admin-k") == 8 }, 10*time.Second, 10*time.Millisecond)
	f.kill()
	change("admin-k2", "3")
	f.start(t)
	require.Eventually(t, func() bool { return routeQueuesOr0(f.cfg.NameSrvAddr, "admin-k2") == 3 }, 30*time.Second, 10*time.Millisecond,
		"the change logged while it was down")
	require.Equal(t, 8, routeQueues(t, f.cfg.NameSrvAddr, "admin-k"))
	// The position is saved after the change is applied (a crash in
	// between applies it once more).
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(f.cfg.Dir, appliedFile))
		return err == nil && string(b) == "2\n"
	}, 10*time.Second, 10*time.Millisecond, "the applied position is saved")
	log, err := os.ReadFile(f.log)
	require.NoError(t, err)
	require.NotContains(t, string(log), "admin change refused", "nothing refused while catching up")
}

func routeQueuesOr0(ns, topic string) int {
	resp, err := call(ns, &wire.Command{Code: wire.CodeGetRouteInfoByTopic, Language: "GO", Version: 317,
		ExtFields: map[string]string{"topic": topic}})
	if err != nil || resp.Code != wire.Success {
		return 0
	}
	var rd struct {
		QueueDatas []struct {
			BrokerName    string `json:"brokerName"`
			ReadQueueNums int    `json:"readQueueNums"`
		} `json:"queueDatas"`
	}
	if json.Unmarshal(resp.Body, &rd) != nil {
		return 0
	}
	for _, q := range rd.QueueDatas {
		if q.BrokerName == broker.DefaultBrokerName {
			return q.ReadQueueNums
		}
	}
	return 0
}
