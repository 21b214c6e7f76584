package namesrv_test

import (
	"bufio"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/namesrv"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/stretchr/testify/require"
)

// serve runs a name server over topics on 127.0.0.1 and returns a call
// function for one connection to it.
func serve(t *testing.T, topics namesrv.Topics, opts namesrv.NameServerOptions) func(*wire.Command) *wire.Command {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := transport.NewServer(namesrv.NewNameServer(topics, opts), transport.ServerOptions{Name: "namesrv"})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		require.NoError(t, s.Close())
		require.ErrorIs(t, <-served, transport.ErrServerClosed)
	})
	r := bufio.NewReader(c)
	var opaque int32
	return func(cmd *wire.Command) *wire.Command {
		opaque++
		cmd.Opaque = opaque
		f, err := wire.Encode(cmd)
		require.NoError(t, err)
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = c.Write(f)
		require.NoError(t, err)
		frame, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
		require.NoError(t, err)
		resp, err := wire.Decode(frame)
		require.NoError(t, err)
		require.Equal(t, opaque, resp.Opaque)
		return resp
	}
}

func route(topic string) *wire.Command {
	return &wire.Command{Code: wire.CodeGetRouteInfoByTopic, Serialize: wire.SerializeJSON,
		ExtFields: map[string]string{"topic": topic}}
}

func TestRouteCreatesTopicsOneQueueForRetryAndDeadLetter(t *testing.T) {
	topics, err := broker.OpenTopics("", 4)
	require.NoError(t, err)
	call := serve(t, topics, namesrv.NameServerOptions{BrokerAddr: "127.0.0.1:10911"})
	resp := call(route("orders"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Contains(t, string(resp.Body), `"writeQueueNums":4`)
	require.Contains(t, string(resp.Body), `"brokerAddrs":{"0":"127.0.0.1:10911"}`)
	require.Contains(t, string(resp.Body), `"brokerName":"`+namesrv.DefaultBrokerName+`"`)
	for _, topic := range []string{"%RETRY%g", "%DLQ%g"} {
		resp = call(route(topic))
		require.Equal(t, wire.Success, resp.Code, topic)
		require.Contains(t, string(resp.Body), `"writeQueueNums":1`, topic)
	}
	resp = call(route("a b"))
	require.Equal(t, wire.SystemError, resp.Code)
	require.Contains(t, resp.Remark, "topic name")
	resp = call(route(strings.Repeat("t", 128)))
	require.Equal(t, wire.SystemError, resp.Code)
	_, ok := topics.Queues("a b")
	require.False(t, ok, "a refused lookup creates nothing")
}

func TestRouteWithoutAutoCreateAndUnknownCode(t *testing.T) {
	topics, err := broker.OpenTopics("", 2)
	require.NoError(t, err)
	call := serve(t, topics, namesrv.NameServerOptions{BrokerAddr: "127.0.0.1:1", NoAutoCreate: true})
	require.Equal(t, wire.TopicNotExist, call(route("nope")).Code)
	resp := call(route("TBW102"))
	require.Equal(t, wire.Success, resp.Code)
	require.Contains(t, string(resp.Body), `"writeQueueNums":2`)
	resp = call(&wire.Command{Code: 999, Serialize: wire.SerializeJSON})
	require.Equal(t, wire.RequestCodeNotSupported, resp.Code)
	require.Contains(t, resp.Remark, "999")
}

// A replicated cluster's name server routes to the leader it knows, its own
// broker while it knows none.
func TestRouteNamesTheLeader(t *testing.T) {
	topics, err := broker.OpenTopics("", 4)
	require.NoError(t, err)
	var leader atomic.Value
	leader.Store("")
	call := serve(t, topics, namesrv.NameServerOptions{BrokerAddr: "127.0.0.1:10911",
		LeaderAddr: func() string { return leader.Load().(string) }})
	resp := call(route("orders"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Contains(t, string(resp.Body), `"brokerAddrs":{"0":"127.0.0.1:10911"}`)
	leader.Store("127.0.0.1:10922")
	resp = call(route("orders"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Contains(t, string(resp.Body), `"brokerAddrs":{"0":"127.0.0.1:10922"}`)
}

// Write-only brokers (a replicated cluster's followers) are listed beside
// the broker: writable, not readable, sorted by name.
func TestRouteListsWriteOnlyBrokers(t *testing.T) {
	topics, err := broker.OpenTopics("", 2)
	require.NoError(t, err)
	call := serve(t, topics, namesrv.NameServerOptions{BrokerAddr: "127.0.0.1:1",
		WriteOnly: func() map[string]string {
			return map[string]string{"broker-a-n3": "127.0.0.1:3", "broker-a-n2": "127.0.0.1:2", "broker-a-n4": ""}
		}})
	resp := call(route("orders"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Contains(t, string(resp.Body), `"queueDatas":[{"brokerName":"broker-a","readQueueNums":2,"writeQueueNums":2,"perm":6,"topicSysFlag":0},`+
		`{"brokerName":"broker-a-n2","readQueueNums":2,"writeQueueNums":2,"perm":2,"topicSysFlag":0},`+
		`{"brokerName":"broker-a-n3","readQueueNums":2,"writeQueueNums":2,"perm":2,"topicSysFlag":0}]`)
	require.Contains(t, string(resp.Body), `{"cluster":"DefaultCluster","brokerName":"broker-a-n3","brokerAddrs":{"0":"127.0.0.1:3"}}`)
	require.NotContains(t, string(resp.Body), "broker-a-n4", "a broker with no address is left out")
}

// A topic an admin configured is routed like any other: to the leader the
// name server knows, with the write-only brokers beside it (write
// permission only where the topic's permission has it), carrying the
// configured queue numbers. Its route named the name server's own broker,
// so a replicated cluster's consumer sent its offsets to a follower.
func TestConfiguredTopicRouteNamesTheLeaderAndWriteOnlyBrokers(t *testing.T) {
	topics, err := broker.OpenTopics("", 4)
	require.NoError(t, err)
	perm := atomic.Int32{}
	perm.Store(namesrv.PermRead | namesrv.PermWrite)
	call := serve(t, topics, namesrv.NameServerOptions{BrokerAddr: "127.0.0.1:1",
		LeaderAddr: func() string { return "127.0.0.1:9" },
		WriteOnly:  func() map[string]string { return map[string]string{"broker-a-n2": "127.0.0.1:2"} },
		TopicConfig: func(topic string) (int, int, int, bool) {
			return 3, 2, int(perm.Load()), topic == "conf"
		}})
	resp := call(route("conf"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.JSONEq(t, `{"orderTopicConf":"","queueDatas":[
		{"brokerName":"broker-a","readQueueNums":3,"writeQueueNums":2,"perm":6,"topicSysFlag":0},
		{"brokerName":"broker-a-n2","readQueueNums":3,"writeQueueNums":2,"perm":2,"topicSysFlag":0}],
		"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:9"}},
		{"cluster":"DefaultCluster","brokerName":"broker-a-n2","brokerAddrs":{"0":"127.0.0.1:2"}}]}`, string(resp.Body))
	perm.Store(namesrv.PermRead)
	resp = call(route("conf"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.JSONEq(t, `{"orderTopicConf":"","queueDatas":[
		{"brokerName":"broker-a","readQueueNums":3,"writeQueueNums":2,"perm":4,"topicSysFlag":0}],
		"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:9"}}]}`,
		string(resp.Body), "a read-only topic lists no write-only broker")
}
