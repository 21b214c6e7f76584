package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/store"
)

// TestSubcommandsAgainstTheRunningBroker runs every subcommand against the
// example broker (rmqtest starts it in-process): what they change is
// honoured, what they read is the broker's, bad input exits 1 with the
// broker's remark.
func TestSubcommandsAgainstTheRunningBroker(t *testing.T) {
	b := rmqtest.Start(t)
	ns := b.NameSrv
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := mqadmin(append([]string{args[0], "-n", ns}, args[1:]...)...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		return out
	}
	fails := func(args ...string) string {
		t.Helper()
		code, _, errOut := mqadmin(append([]string{args[0], "-n", ns}, args[1:]...)...)
		require.Equal(t, exitFail, code, "%v", args)
		return errOut
	}

	out := must("updateTopic", "-c", "DefaultCluster", "-t", "cli-orders", "-r", "2", "-w", "2", "-a", "+message.type=FIFO")
	assert.Contains(t, out, "create topic to "+b.Broker+" success.")
	n, ok := b.Server.Topics().Queues("cli-orders")
	require.True(t, ok)
	assert.Equal(t, 2, n)
	assert.Equal(t, "FIFO", b.Server.TopicConfigs().MessageType("cli-orders"))
	assert.Contains(t, must("topicRoute", "-t", "cli-orders", "-l"), sprintf(routeFormat, "DefaultCluster", "broker-a", "{0="+b.Broker+"}", "2", "2", "6"))
	assert.Contains(t, must("topicList"), "cli-orders\n")
	assert.Contains(t, fails("updateTopic", "-b", b.Broker, "-t", "cli-bad", "-r", "0"), "queue numbers must be 1..")
	assert.Contains(t, fails("updateTopic", "-b", b.Broker, "-t", "TBW102"), "code 29")
	assert.Contains(t, fails("updateTopic", "-b", b.Broker, "-t", "cli-x", "-a", "+message.type=MIXED"), "MIXED message type is not supported.")

	st := b.Server.Core().Store()
	born := time.Now()
	for i := range 4 {
		require.NoError(t, st.Append(&store.Message{Topic: "cli-orders", QueueID: i % 2, Keys: []string{"order-7"}, Body: []byte("x"), BornAt: born,
			Properties: map[string]string{"UNIQ_KEY": "CLIUNIQ" + string(rune('A'+i)), "KEYS": "order-7"}}))
	}
	out = must("topicStatus", "-t", "cli-orders")
	assert.Contains(t, out, sprintf("%-32s  %-4d  %-20d  %-20d", "broker-a", 1, 0, 2))

	out = must("updateSubGroup", "-c", "DefaultCluster", "-g", "cli-billing", "-o", "true")
	assert.Contains(t, out, "create subscription group to "+b.Broker+" success.")
	assert.True(t, b.Server.Groups().Orderly("cli-billing"), "the group is orderly")
	require.NoError(t, b.Server.Core().Offsets().Commit("cli-billing", "cli-orders", 0, 1))
	out = must("consumerProgress", "-g", "cli-billing")
	assert.Contains(t, out, sprintf("%-64s  %-32s  %-4d  %-20d  %-20d  %-20d", "cli-orders", "broker-a", 0, 2, 1, 1))
	assert.Contains(t, fails("consumerConnection", "-g", "cli-billing"), "not online")
	_, err := b.Server.Core().Consumers().Register("cli-billing", consumer.Client{ChannelID: "ch-1", ClientID: "10.0.0.9@cli", Language: "GO", Version: 317},
		[]consumer.Subscription{{Topic: "cli-orders", Expression: "TagA || TagB", Version: 1}})
	require.NoError(t, err)
	out = must("consumerConnection", "-g", "cli-billing")
	assert.Contains(t, out, sprintf("%-36s %-22s %-10s %s", "10.0.0.9@cli", "", "GO", "V317"))
	assert.Contains(t, out, sprintf("%-20s %s", "cli-orders", "TagA || TagB"))

	out = must("resetOffsetByTime", "-g", "cli-billing", "-t", "cli-orders", "-s", "0")
	assert.Contains(t, out, sprintf("%-40s  %-40d  %-40d", "broker-a", 0, 0))
	off, _ := b.Server.Core().Offsets().Committed("cli-billing", "cli-orders", 0)
	assert.Zero(t, off, "the reset is honoured")

	var first []*store.Message
	out = must("queryMsgByKey", "-t", "cli-orders", "-k", "order-7")
	assert.Equal(t, 5, strings.Count(out, "\n"), out)
	assert.Contains(t, out, "CLIUNIQA")
	first, err = st.Read("cli-orders", 0, 0, 1)
	require.NoError(t, err)
	out = must("queryMsgById", "-i", wire.OffsetMsgID(wire.HostBytes(b.Broker), first[0].LogOffset))
	assert.Contains(t, out, sprintf("%-20s %s", "Topic:", "cli-orders"))
	assert.Contains(t, must("queryMsgById", "-t", "cli-orders", "-i", "CLIUNIQB"), sprintf("%-20s %d", "Queue ID:", 1))

	assert.Contains(t, must("clusterList"), sprintf("%-22s  %-22s  %-4s  %-22s", "DefaultCluster", "broker-a", "0", b.Broker))
	assert.Contains(t, must("brokerStatus", "-b", b.Broker), "brokerActive")

	must("deleteSubGroup", "-b", b.Broker, "-g", "cli-billing")
	assert.False(t, b.Server.Groups().Orderly("cli-billing"))
	out = must("deleteTopic", "-c", "DefaultCluster", "-t", "cli-orders")
	assert.Contains(t, out, "delete topic [cli-orders] from NameServer success.")
	_, ok = b.Server.Topics().Queues("cli-orders")
	assert.False(t, ok)
}
