package replicated

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// cluster is n replicated nodes in this process, on 127.0.0.1.
type cluster struct {
	t      testing.TB
	nodes  []*Server
	trans  []*raft.NetworkTransport
	closed []bool
}

func startCluster(t testing.TB, n int, tweaks ...func(*Config)) *cluster {
	t.Helper()
	// The broker and gRPC addresses are picked free and listened on later:
	// another process (or this one's) may take one in between, and then the
	// whole cluster starts again on new ones.
	for attempt := 1; ; attempt++ {
		c, err := tryCluster(t, n, tweaks)
		if err == nil {
			t.Cleanup(func() {
				for i := range c.nodes {
					c.stop(i)
				}
			})
			return c
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			require.NoError(t, err)
		}
		t.Logf("cluster start, attempt %d: %v; again on other ports", attempt, err)
	}
}

func tryCluster(t testing.TB, n int, tweaks []func(*Config)) (*cluster, error) {
	c := &cluster{t: t, closed: make([]bool, n)}
	var peers []Peer
	for i := 0; i < n; i++ {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 4, 10*time.Second, io.Discard)
		require.NoError(t, err)
		c.trans = append(c.trans, tr)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: string(tr.LocalAddr()), BrokerAddr: freeAddr(t), GRPCAddr: freeAddr(t)})
	}
	var log *slog.Logger
	if os.Getenv("RMQTEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	for i, p := range peers {
		cfg := Config{Dir: t.TempDir(), ID: p.ID, Transport: c.trans[i], Peers: peers, Bootstrap: true, BrokerAddr: p.BrokerAddr, GRPCAddr: p.GRPCAddr,
			Logger: log}
		steadyRaft(&cfg)
		for _, tw := range tweaks {
			tw(&cfg)
		}
		s, err := Start(cfg)
		if err != nil {
			for j := range c.nodes {
				c.stop(j)
			}
			for _, tr := range c.trans[len(c.nodes):] {
				tr.CloseStreams()
				_ = tr.Close()
			}
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	return c, nil
}

// stop closes node i and its raft transport.
func (c *cluster) stop(i int) {
	if c.closed[i] {
		return
	}
	c.closed[i] = true
	require.NoError(c.t, c.nodes[i].Close())
	c.trans[i].CloseStreams()
	_ = c.trans[i].Close()
}

// leader waits until one live node leads and every live node names its
// broker address, and returns its index.
func (c *cluster) leader(timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for i, s := range c.nodes {
			if c.closed[i] || !s.Node().IsLeader() {
				continue
			}
			agree := true
			for j, o := range c.nodes {
				if !c.closed[j] && o.Node().LeaderAddr() != s.BrokerAddr() {
					agree = false
				}
			}
			if agree {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no leader named by every live node after %v", timeout)
	return -1
}

func (c *cluster) nameServers() []string {
	var ns []string
	for _, s := range c.nodes {
		ns = append(ns, s.NameSrvAddr())
	}
	return ns
}

// steadyRaft is the tests' raft timing: a leader stalled for most of a
// second by a loaded machine (load average 10, -race) keeps leading, so a
// test that looks at the leader it found sees the same one throughout.
// Elections take 1–2 s.
func steadyRaft(cfg *Config) {
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 900*time.Millisecond
}

// A follower refuses a send with SERVICE_NOT_AVAILABLE (the clients retry
// it) and stores nothing; its name server routes to the leader.
func TestFollowerRefusesWritesAndRoutesToLeader(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := (l + 1) % 3
	w := writer{c.nodes[f].Node()}
	err := w.Append([]*store.Message{{Topic: "orders", Body: []byte("x")}})
	require.ErrorIs(t, err, broker.ErrNotWritable)
	require.Equal(t, int64(0), c.nodes[f].Node().Store().MaxOffset("orders", 0))
	require.Equal(t, c.nodes[l].BrokerAddr(), c.nodes[f].Node().LeaderAddr())
}

// The leader's writes reach every replica; a committed offset is read
// back on any node.
func TestLeaderWritesReachEveryReplica(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	w := writer{c.nodes[l].Node()}
	msgs := []*store.Message{{Topic: "orders", Body: []byte("a")}, {Topic: "orders", Body: []byte("b")}}
	require.NoError(t, w.Append(msgs))
	require.Equal(t, int64(1), msgs[1].QueueOffset, "the offsets the leader assigned")
	require.NoError(t, w.CommitOffset("g", "orders", 0, 2))
	require.NoError(t, w.CommitOffset("g", "orders", 0, 2), "an offset already committed is not proposed again")
	for i, s := range c.nodes {
		require.Eventually(t, func() bool {
			off, ok := writer{s.Node()}.Committed("g", "orders", 0)
			return ok && off == 2 && s.Node().Store().MaxOffset("orders", 0) == 2
		}, 10*time.Second, 10*time.Millisecond, "node %d", i)
	}
	err := writer{c.nodes[(l+1)%3].Node()}.CommitOffset("g", "orders", 0, 1)
	require.ErrorIs(t, err, broker.ErrNotWritable, "a follower commits nothing")
}

func TestParsePeers(t *testing.T) {
	ps, err := ParsePeers("n1=127.0.0.1:7001@127.0.0.1:10911, n2=127.0.0.1:7002, n3=127.0.0.1:7003@127.0.0.1:10913@127.0.0.1:8083")
	require.NoError(t, err)
	require.Equal(t, []Peer{{ID: "n1", RaftAddr: "127.0.0.1:7001", BrokerAddr: "127.0.0.1:10911"},
		{ID: "n2", RaftAddr: "127.0.0.1:7002"}, {ID: "n3", RaftAddr: "127.0.0.1:7003", BrokerAddr: "127.0.0.1:10913", GRPCAddr: "127.0.0.1:8083"}}, ps)
	for _, bad := range []string{"n1", "=x", "n1=", "n1=@b", "n1=a@b@c@d"} {
		_, err := ParsePeers(bad)
		require.Error(t, err, bad)
	}
}

func sendCmd(topic, body string) *wire.Command {
	return &wire.Command{Code: wire.CodeSendMessage, Language: "GO", Version: 317, Body: []byte(body),
		ExtFields: map[string]string{"producerGroup": "pg", "topic": topic, "queueId": "0", "sysFlag": "0",
			"bornTimestamp": "1", "flag": "0", "properties": "UNIQ_KEY\x01abc\x02", "reconsumeTimes": "0",
			"defaultTopic": "TBW102", "defaultTopicQueueNums": "4"}}
}

// A send reaching a follower is forwarded to the leader and acknowledged
// there; one forwarded already is not passed on again. Routes list the
// followers as write-only brokers.
func TestFollowerForwardsSendsToTheLeader(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	resp, err := call(f.BrokerAddr(), sendCmd("orders", "via follower"))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Equal(t, uint64(1), c.nodes[l].Broker().Stats().Sent, "the leader stored it")
	require.Equal(t, int64(1), c.nodes[l].Node().Store().MaxOffset("orders", 0))

	again := sendCmd("orders", "forwarded twice")
	again.ExtFields[forwardedField] = "1"
	resp, err = call(f.BrokerAddr(), again)
	require.NoError(t, err)
	require.Equal(t, wire.ServiceNotAvailable, resp.Code, resp.Remark)

	leaderRoute := routeOf(t, c.nodes[l], "orders")
	require.Contains(t, leaderRoute, `"brokerName":"broker-a","brokerAddrs":{"0":"`+c.nodes[l].BrokerAddr()+`"}`)
	for i, s := range c.nodes {
		if i != l {
			require.Contains(t, leaderRoute, writeOnly(s), "the leader lists every follower in contact")
		}
	}
	require.NotContains(t, leaderRoute, `broker-a-`+c.nodes[l].Node().ID(), "the leader is not listed twice")
	route := routeOf(t, f, "orders")
	require.Contains(t, route, `"brokerName":"broker-a","brokerAddrs":{"0":"`+c.nodes[l].BrokerAddr()+`"}`)
	for i, s := range c.nodes {
		if i != l {
			require.Contains(t, route, writeOnly(s), "a follower lists every follower the leader is in contact with")
		}
	}
	require.NotContains(t, route, `broker-a-`+c.nodes[l].Node().ID())
}

// routeOf is the remoting route of topic from s's name server.
func routeOf(t *testing.T, s *Server, topic string) string {
	t.Helper()
	resp, err := call(s.NameSrvAddr(), &wire.Command{Code: wire.CodeGetRouteInfoByTopic, Language: "GO", Version: 317,
		ExtFields: map[string]string{"topic": topic}})
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	return string(resp.Body)
}

// writeOnly is s's write-only broker entry in a route.
func writeOnly(s *Server) string {
	return `"brokerName":"broker-a-` + s.Node().ID() + `","brokerAddrs":{"0":"` + s.BrokerAddr() + `"}`
}

// A stopped node leaves every route once the leader has lost it (the
// followers list what the leader is in contact with): a v2 consumer asks a broker picked at
// random from the route for its group's consumer list, and one that picked
// a dead node did not rebalance (TestV2DeletesInReplicatedMode then waited
// for its messages in vain). Topics an admin configured are routed the
// same way.
func TestRoutesLeaveOutAStoppedNode(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	resp, err := call(c.nodes[l].BrokerAddr(), adminCmd(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "conf",
		"readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}, nil))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	c.eachNode("topic configured", func(s *Server) bool { _, ok := s.TopicConfigs().Get("conf"); return ok })
	dead := c.nodes[l].BrokerAddr()
	c.stop(l)
	l2 := c.leader(30 * time.Second)
	for i, s := range c.nodes {
		if i == l {
			continue
		}
		for _, topic := range []string{"orders", "conf"} {
			require.Eventually(t, func() bool {
				r := routeOf(t, s, topic)
				return !strings.Contains(r, dead) && strings.Contains(r, `"brokerName":"broker-a","brokerAddrs":{"0":"`+c.nodes[l2].BrokerAddr()+`"}`)
			}, 30*time.Second, 10*time.Millisecond, "node %d's route of %s: %s", i, topic, routeOf(t, s, topic))
		}
	}
	for i, s := range c.nodes {
		if i != l && i != l2 {
			require.Contains(t, routeOf(t, c.nodes[l2], "orders"), writeOnly(s), "the live follower stays listed")
		}
	}
}

// An admin reset on the leader moves the replicated committed offset, on
// every node; one sent to a follower is forwarded to the leader (served
// there, it would move that node's own offset manager only and answer
// success).
func TestAdminResetIsReplicated(t *testing.T) {
	c, l := resetFixture(t)
	for _, at := range []struct {
		node   int
		offset int64
	}{{l, 2}, {(l + 1) % 3, 3}} {
		resp, err := call(c.nodes[at.node].BrokerAddr(), &wire.Command{Code: broker.CodeInvokeBrokerToResetOffset, Language: "GO", Version: 317,
			ExtFields: map[string]string{"group": "g", "topic": "orders", "queueId": "0", "offset": fmt.Sprint(at.offset), "timestamp": "0"}})
		require.NoError(t, err)
		require.Equal(t, wire.Success, resp.Code, resp.Remark)
		for i, s := range c.nodes {
			require.Eventually(t, func() bool {
				off, ok := s.Node().Committed("g", "orders", 0)
				return ok && off == at.offset
			}, 10*time.Second, 10*time.Millisecond, "reset on node %d (leader %d): node %d", at.node, l, i)
		}
	}
}

// Delay levels the scheduler cannot use are refused at Start (a replica
// with them would be elected and never serve as the leader).
func TestStartRefusesBadDelayLevels(t *testing.T) {
	_, err := Start(Config{Dir: t.TempDir(), ID: "n1", RaftAddr: "127.0.0.1:0", DelayLevels: "200ms"})
	require.ErrorIs(t, err, schedule.ErrInvalid)
}

// A topic the leader created on a send exists on every node, with the
// defaults: only the leader creates a topic
// on a send, and the tables are per node, so a follower that never looked
// the topic up answered TOPIC_NOT_EXIST to every pull of it once it led
// (TestV2DeletesInReplicatedMode's consumer of a deleted group waited for
// its messages in vain). The system topics of the log are not listed.
func TestTopicsCreatedBySendsExistOnEveryNode(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) { cfg.NoAutoCreate = true })
	l := c.leader(30 * time.Second)
	resp, err := call(c.nodes[l].BrokerAddr(), sendCmd("auto-t", "first"))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	c.eachNode("topic known", func(s *Server) bool { n, ok := s.Topics().Queues("auto-t"); return ok && n == DefaultQueueNums })
	for i, s := range c.nodes {
		_, ok := s.Topics().Queues(AdminTopic)
		require.False(t, ok, "node %d lists the admin log", i)
	}
}

// A follower lists the followers the leader is in contact with: a stopped
// follower leaves the other follower's routes too, and comes back into
// them (the leader lists it no more either).
func TestFollowerRoutesLeaveOutAStoppedFollower(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f1, f2 := (l+1)%3, (l+2)%3
	require.Eventually(t, func() bool { return strings.Contains(routeOf(t, c.nodes[f1], "orders"), writeOnly(c.nodes[f2])) },
		10*time.Second, 10*time.Millisecond, "the other follower listed")
	dead := c.nodes[f2].BrokerAddr()
	c.stop(f2)
	for _, i := range []int{l, f1} {
		require.Eventually(t, func() bool { return !strings.Contains(routeOf(t, c.nodes[i], "orders"), dead) },
			30*time.Second, 10*time.Millisecond, "node %d still lists the stopped follower", i)
	}
	require.Contains(t, routeOf(t, c.nodes[f1], "orders"), writeOnly(c.nodes[f1]), "a follower lists itself")
}
