package broker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/namesrv"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

// TestAdminBadInputGetsApachesCodeAndARemark: every admin request refuses
// bad input with the code Apache's broker answers and a remark, and
// changes nothing.
func TestAdminBadInputGetsApachesCodeAndARemark(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	for name, tc := range map[string]struct {
		req  *wire.Command
		code int16
	}{
		"topic bad name":         {req(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "a b"}, nil), 29},
		"topic reserved":         {req(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "RMQ_SYS_TRANS_HALF_TOPIC"}, nil), 29},
		"topic zero queues":      {req(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "t", "readQueueNums": "0"}, nil), 29},
		"topic mixed type":       {req(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "t", "attributes": "+message.type=MIXED"}, nil), 29},
		"topic unknown attr":     {req(broker.CodeUpdateAndCreateTopic, map[string]string{"topic": "t", "attributes": "+color=red"}, nil), wire.SystemError},
		"delete system topic":    {req(broker.CodeDeleteTopicInBroker, map[string]string{"topic": "SCHEDULE_TOPIC_XXXX"}, nil), 29},
		"group not JSON":         {req(broker.CodeUpdateAndCreateSubscriptionGroup, nil, []byte("{")), 29},
		"group bad name":         {req(broker.CodeUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"a b"}`)), 29},
		"delete group bad name":  {req(broker.CodeDeleteSubscriptionGroup, map[string]string{"groupName": ""}, nil), 29},
		"stats unknown topic":    {req(broker.CodeGetTopicStatsInfo, map[string]string{"topic": "nope"}, nil), wire.TopicNotExist},
		"consume stats no group": {req(broker.CodeGetConsumeStats, map[string]string{"consumerGroup": "nobody"}, nil), 206},
		"connections no group":   {req(broker.CodeGetConsumerConnectionList, map[string]string{"consumerGroup": "nobody"}, nil), 206},
		"reset unknown topic":    {req(broker.CodeInvokeBrokerToResetOffset, map[string]string{"group": "g", "topic": "nope", "timestamp": "0"}, nil), wire.TopicNotExist},
		"reset bad timestamp":    {req(broker.CodeInvokeBrokerToResetOffset, map[string]string{"group": "g", "topic": "TBW102", "timestamp": "x"}, nil), 29},
		"view bad offset":        {req(broker.CodeViewMessageByID, map[string]string{"offset": "-1"}, nil), 29},
		"view no message":        {req(broker.CodeViewMessageByID, map[string]string{"offset": "99999"}, nil), wire.SystemError},
		"query unknown topic":    {req(broker.CodeQueryMessage, map[string]string{"topic": "nope", "key": "k"}, nil), wire.TopicNotExist},
		"query no match":         {req(broker.CodeQueryMessage, map[string]string{"topic": "TBW102", "key": "k"}, nil), wire.QueryNotFound},
	} {
		resp := rc.call(tc.req)
		assert.Equal(t, tc.code, resp.Code, "%s: %s", name, resp.Remark)
		assert.NotEmpty(t, resp.Remark, name)
	}
	_, ok := b.Server.Topics().Queues("t")
	require.False(t, ok, "a refused create created nothing")
	require.Empty(t, b.Server.Groups().All())

	ns := dial(t, b.NameSrv)
	resp := ns.call(req(namesrv.CodeDeleteTopicInNamesrv, map[string]string{"topic": "a b"}, nil))
	assert.Equal(t, int16(29), resp.Code)
	assert.NotEmpty(t, resp.Remark)
}
