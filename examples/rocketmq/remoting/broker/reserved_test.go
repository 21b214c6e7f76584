package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/stretchr/testify/require"
)

// Issue 25, finding 1: a send straight to the scheduler's topic with a
// REAL_TOPIC the store cannot hold was stored, and the scheduler retried
// its re-append forever, so no later DELAY=1 message was ever delivered.
// It is refused now (NO_PERMISSION, as Apache's msgCheck answers sends to
// its not-allowed topics), nothing is stored, and delay level 1 delivers.
func TestSendToSchedulerTopicIsRefusedAndDelayLevelOneStillDelivers(t *testing.T) {
	b := rmqtest.StartConfig(t, server.Config{DelayLevels: "1s 1s"})
	rc := dial(t, b.Broker)
	st := b.Server.Core().Store()
	poison := sendReq("SCHEDULE_TOPIC_XXXX", 0, "poison")
	poison.ExtFields["properties"] = "REAL_TOPIC\x01" + strings.Repeat("A", 300) + "\x02REAL_QID\x010\x02"
	resp := rc.call(poison)
	require.Equal(t, wire.NoPermission, resp.Code, resp.Remark)
	require.Zero(t, st.Stats().Messages, "nothing stored")
	_, created := b.Server.Topics().Queues("SCHEDULE_TOPIC_XXXX")
	require.False(t, created, "a refused send creates no topic")

	delayed := sendReq("later", 0, "on time")
	delayed.ExtFields["properties"] = "UNIQ_KEY\x01d1\x02DELAY\x011\x02"
	require.Equal(t, wire.Success, rc.call(delayed).Code)
	require.Eventually(t, func() bool { return st.MaxOffset("later", 0) == 1 }, 20*time.Second, 10*time.Millisecond)
}

// Every topic the core reserves is refused to a client's send, with the
// library's rules; a retry topic of a valid group stays sendable (the v2
// client sends there when CONSUMER_SEND_MSG_BACK fails).
func TestSendToReservedTopicsIsRefused(t *testing.T) {
	forEachFlush(t, testSendToReservedTopics)
}

func testSendToReservedTopics(t *testing.T, b *rmqtest.Broker) {
	rc := dial(t, b.Broker)
	st := b.Server.Core().Store()
	for _, topic := range []string{"SCHEDULE_TOPIC_XXXX", "%DLQ%g", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_anything",
		"rmq_sys_wheel", "TBW102", "rocketmq-broker-a", "TRANS_CHECK_MAX_TIME_TOPIC"} {
		resp := rc.call(sendReq(topic, 0, "x"))
		require.Equal(t, wire.NoPermission, resp.Code, topic)
		require.Contains(t, resp.Remark, "reserved", topic)
		v2 := req(wire.CodeSendMessageV2, map[string]string{"a": "pg", "b": topic, "e": "0"}, []byte("x"))
		require.Equal(t, wire.NoPermission, rc.call(v2).Code, topic)
		batch := req(wire.CodeSendBatchMessage, map[string]string{"b": topic, "e": "0"}, []byte("x"))
		require.Equal(t, wire.NoPermission, rc.call(batch).Code, topic)
	}
	for _, topic := range []string{"%RETRY%"} {
		resp := rc.call(sendReq(topic, 0, "x"))
		require.NotEqual(t, wire.Success, resp.Code, topic)
	}
	require.Zero(t, st.Stats().Messages, "nothing stored")
	resp := rc.call(sendReq("%RETRY%g", 0, "again"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Equal(t, int64(1), st.MaxOffset("%RETRY%g", 0))
}
