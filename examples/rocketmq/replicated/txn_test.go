package replicated

import (
	"bufio"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/txn"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// shiftClock is time.Now moved on by the test: the replica's clock, which
// the transactions' due times count on.
type shiftClock struct{ d atomic.Int64 }

func (c *shiftClock) Now() time.Time          { return time.Now().Add(time.Duration(c.d.Load())) }
func (c *shiftClock) Advance(d time.Duration) { c.d.Add(int64(d)) }

// withTxnClock runs the nodes on clk, checking transactions every 5 ms.
func withTxnClock(clk *shiftClock) func(*Config) {
	return func(cfg *Config) {
		cfg.Now = clk.Now
		cfg.Txn = &txn.Options{Tick: 5 * time.Millisecond}
	}
}

// rawConn is one remoting connection of a test client: requests and their
// answers, and the broker's requests to it (CHECK_TRANSACTION_STATE)
// collected on the way.
type rawConn struct {
	t      *testing.T
	c      net.Conn
	r      *bufio.Reader
	opaque int32
	asked  []*wire.Command
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (rc *rawConn) write(cmd *wire.Command) {
	rc.t.Helper()
	rc.opaque++
	cmd.Opaque = rc.opaque
	f, err := wire.Encode(cmd)
	require.NoError(rc.t, err)
	_, err = rc.c.Write(f)
	require.NoError(rc.t, err)
}

// read reads one frame before deadline; nil at the deadline.
func (rc *rawConn) read(deadline time.Time) *wire.Command {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(deadline)
	frame, err := wire.ReadFrame(rc.r, wire.DefaultMaxFrame)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil
	}
	require.NoError(rc.t, err)
	cmd, err := wire.Decode(frame)
	require.NoError(rc.t, err)
	return cmd
}

// do sends cmd and returns its answer.
func (rc *rawConn) do(cmd *wire.Command) *wire.Command {
	rc.t.Helper()
	rc.write(cmd)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := rc.read(deadline)
		require.NotNil(rc.t, resp, "no answer to code %d", cmd.Code)
		if !resp.IsResponse() {
			rc.asked = append(rc.asked, resp)
			continue
		}
		if resp.Opaque == cmd.Opaque {
			return resp
		}
	}
}

// askedWithin waits at most d for the broker to ask code (reading
// whatever comes), nil when it did not.
func (rc *rawConn) askedWithin(code int16, d time.Duration) *wire.Command {
	rc.t.Helper()
	deadline := time.Now().Add(d)
	for {
		for i, a := range rc.asked {
			if a.Code == code {
				rc.asked = append(rc.asked[:i], rc.asked[i+1:]...)
				return a
			}
		}
		cmd := rc.read(deadline)
		if cmd == nil {
			return nil
		}
		if !cmd.IsResponse() {
			rc.asked = append(rc.asked, cmd)
		}
	}
}

// heartbeatProducer tells the broker the connection is a producer of group.
func (rc *rawConn) heartbeatProducer(group string) {
	rc.t.Helper()
	resp := rc.do(&wire.Command{Code: wire.CodeHeartbeat, Language: "GO", Version: 317,
		Body: []byte(`{"clientID":"127.0.0.1@` + rc.t.Name() + `","producerDataSet":[{"groupName":"` + group + `"}]}`)})
	require.Equal(rc.t, wire.Success, resp.Code, resp.Remark)
}

// halfCmd is a transactional send of producer group pg.
func halfCmd(body, id string) *wire.Command {
	cmd := sendCmd("orders", body)
	cmd.ExtFields["sysFlag"] = "4"
	cmd.ExtFields["properties"] = "TRAN_MSG\x01true\x02PGROUP\x01pg\x02UNIQ_KEY\x01" + id + "\x02"
	return cmd
}

// endCmd ends transaction id (commitOrRollback 8 commits, 12 rolls back).
func endCmd(id int64, kind int, fromCheck bool) *wire.Command {
	return &wire.Command{Code: codeEndTransaction, Language: "GO", Version: 317, ExtFields: map[string]string{
		"producerGroup": "pg", "tranStateTableOffset": strconv.FormatInt(id, 10), "commitOrRollback": strconv.Itoa(kind),
		"fromTransactionCheck": strconv.FormatBool(fromCheck)}}
}

// bodies is what queue 0 of topic holds on node s, by body.
func bodies(t *testing.T, s *Server, topic string) map[string]int {
	t.Helper()
	msgs, err := s.Node().Store().Read(topic, 0, 0, 1000)
	require.NoError(t, err)
	out := map[string]int{}
	for _, m := range msgs {
		out[string(m.Body)]++
	}
	return out
}

// onEveryNode waits until every live node holds want on topic's queue 0.
func (c *cluster) onEveryNode(topic string, want map[string]int) {
	c.t.Helper()
	t := c.t.(*testing.T)
	for i, s := range c.nodes {
		if c.closed[i] {
			continue
		}
		require.Eventually(t, func() bool {
			msgs, err := s.Node().Store().Read(topic, 0, 0, 1000)
			return err == nil && len(msgs) >= countOf(want)
		}, 15*time.Second, 5*time.Millisecond, "node %d", i)
		require.Equal(t, want, bodies(t, s, topic), "node %d", i)
	}
}

func countOf(m map[string]int) int {
	n := 0
	for _, k := range m {
		n += k
	}
	return n
}

// A transactional send and its END_TRANSACTION reaching a follower are
// forwarded to the leader, whose manager prepares and commits: the real
// message lands once on every node, a rolled-back one nowhere, and no
// half is on the real topic before its commit.
func TestTransactionsThroughAFollower(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	rc := dialRaw(t, f.BrokerAddr())
	id := func(resp *wire.Command) int64 {
		require.Equal(t, wire.Success, resp.Code, resp.Remark)
		n, err := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
		require.NoError(t, err)
		return n
	}
	commit := id(rc.do(halfCmd("commit", "id-commit")))
	rollback := id(rc.do(halfCmd("rollback", "id-rollback")))
	c.onEveryNode(txn.HalfTopic, map[string]int{"commit": 1, "rollback": 1})
	for i := range c.nodes {
		require.Empty(t, bodies(t, c.nodes[i], "orders"), "node %d: no half on the real topic", i)
	}
	resp := rc.do(endCmd(commit, 8, false))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	resp = rc.do(endCmd(rollback, 12, false))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	resp = rc.do(endCmd(commit, 8, false))
	require.Equal(t, wire.Success, resp.Code, "a repeated commit: %s", resp.Remark)
	c.onEveryNode("orders", map[string]int{"commit": 1})
	tm, err := c.nodes[l].Node().Transactions()
	require.NoError(t, err)
	s := tm.Stats()
	require.Equal(t, [3]uint64{2, 1, 1}, [3]uint64{s.Prepared, s.Committed, s.RolledBack})
}

// The leader checks an open transaction back with a producer of its group
// connected to the leader; a producer connected to a follower only is
// never asked. The check's answer (on the leader's connection) commits it.
func TestCheckBackReachesAProducerOfTheLeader(t *testing.T) {
	clk := &shiftClock{}
	c := startCluster(t, 3, withTxnClock(clk))
	l := c.leader(30 * time.Second)
	atFollower := dialRaw(t, c.nodes[(l+1)%3].BrokerAddr())
	atFollower.heartbeatProducer("pg")
	atLeader := dialRaw(t, c.nodes[l].BrokerAddr())
	atLeader.heartbeatProducer("pg")

	resp := atFollower.do(halfCmd("checked", "id-checked"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	id, err := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
	require.NoError(t, err)
	clk.Advance(txn.DefaultTransactionTimeout)
	check := atLeader.askedWithin(39, 15*time.Second)
	require.NotNil(t, check, "no CHECK_TRANSACTION_STATE on the leader's producer connection")
	require.Equal(t, strconv.FormatInt(id, 10), check.ExtFields["tranStateTableOffset"])
	require.Contains(t, string(check.Body), "checked", "the message in the body, as a pull encodes it")
	atLeader.write(endCmd(id, 8, true)) // as the v2 client answers: oneway in effect, its answer unread
	c.onEveryNode("orders", map[string]int{"checked": 1})
	require.Nil(t, atFollower.askedWithin(39, 100*time.Millisecond), "a follower asked its producer")
}

// The follower that forwarded a transactional send remembers its producer:
// once it leads, it checks the transaction back with that producer, and
// the answer commits it once on every node.
func TestNewLeaderChecksBackTheProducerThatSentThroughIt(t *testing.T) {
	clk := &shiftClock{}
	c := startCluster(t, 3, withTxnClock(clk))
	first := c.leader(30 * time.Second)
	f := (first + 1) % 3
	rc := dialRaw(t, c.nodes[f].BrokerAddr())
	resp := rc.do(halfCmd("across", "id-across"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	id, err := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
	require.NoError(t, err)
	c.onEveryNode(txn.HalfTopic, map[string]int{"across": 1})

	// Leadership moves to the follower the producer sent through.
	require.Eventually(t, func() bool {
		if c.nodes[f].Node().IsLeader() {
			return true
		}
		_ = c.nodes[first].Node().Raft().LeadershipTransferToServer(raft.ServerID(c.nodes[f].Node().ID()), c.trans[f].LocalAddr()).Error()
		return false
	}, 30*time.Second, 50*time.Millisecond)
	clk.Advance(txn.DefaultTransactionTimeout)
	check := rc.askedWithin(39, 15*time.Second)
	require.NotNil(t, check, "no check on the producer's connection to the new leader")
	require.Equal(t, strconv.FormatInt(id, 10), check.ExtFields["tranStateTableOffset"])
	rc.write(endCmd(id, 8, true))
	c.onEveryNode("orders", map[string]int{"across": 1})
}
