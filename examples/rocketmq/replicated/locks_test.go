package replicated

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/lock"
	"github.com/stretchr/testify/require"
)

func lockCmd(code int16, group, client, topic string, queues ...int) *wire.Command {
	type mq struct {
		Topic      string `json:"topic"`
		BrokerName string `json:"brokerName"`
		QueueID    int    `json:"queueId"`
	}
	body := struct {
		ConsumerGroup string `json:"consumerGroup"`
		ClientID      string `json:"clientId"`
		MQs           []mq   `json:"mqSet"`
	}{ConsumerGroup: group, ClientID: client}
	for _, q := range queues {
		body.MQs = append(body.MQs, mq{topic, "broker-a", q})
	}
	b, _ := json.Marshal(body)
	return &wire.Command{Code: code, Language: "GO", Version: 317, Body: b}
}

// lockedSet is a LOCK_BATCH_MQ answer's lockOKMQSet queue ids.
func lockedSet(t *testing.T, resp *wire.Command) []int {
	t.Helper()
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	var out struct {
		MQs []struct {
			QueueID int `json:"queueId"`
		} `json:"lockOKMQSet"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &out))
	ids := []int{}
	for _, m := range out.MQs {
		ids = append(ids, m.QueueID)
	}
	return ids
}

// Orderly queue locks are the leader's alone (each node keeps its own
// table, as each Apache broker does): a follower grants none — it answers
// LOCK_BATCH_MQ with an empty lockOKMQSet, on which the v2 client marks
// its queues unlocked and consumes none of them until it locks at the
// leader its next route names — so a client whose routes still name the
// old leader cannot hold a queue another client locked at the new one.
func TestOnlyTheLeaderGrantsQueueLocks(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	resp, err := call(f.BrokerAddr(), lockCmd(wire.CodeLockBatchMQ, "og", "client-a", "ot", 0, 1))
	require.NoError(t, err)
	require.Empty(t, lockedSet(t, resp), "a follower grants no lock")
	_, held := f.core.locks.Holder("og", lock.Queue{Topic: "ot", Broker: "broker-a", QueueID: 0})
	require.False(t, held, "nothing in the follower's table")

	resp, err = call(c.nodes[l].BrokerAddr(), lockCmd(wire.CodeLockBatchMQ, "og", "client-b", "ot", 0, 1))
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, lockedSet(t, resp), "the leader grants them")
	resp, err = call(c.nodes[l].BrokerAddr(), lockCmd(wire.CodeLockBatchMQ, "og", "client-a", "ot", 0, 1))
	require.NoError(t, err)
	require.Empty(t, lockedSet(t, resp), "held by client-b")

	resp, err = call(f.BrokerAddr(), lockCmd(wire.CodeUnlockBatchMQ, "og", "client-b", "ot", 0, 1))
	require.NoError(t, err)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	_, held = c.nodes[l].core.locks.Holder("og", lock.Queue{Topic: "ot", Broker: "broker-a", QueueID: 0})
	require.True(t, held, "an unlock at a follower frees nothing at the leader")
}
