package broker_test

import (
	"strings"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/stretchr/testify/require"
)

func heartbeatOf(client, group string) *wire.Command {
	return req(wire.CodeHeartbeat, nil, []byte(`{"clientID":"`+client+`","consumerDataSet":[{"groupName":"`+group+
		`","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"t","subString":"*","subVersion":1}]}]}`))
}

func lockBody(client string, queues ...string) []byte {
	var mqs []string
	for _, q := range queues {
		mqs = append(mqs, `{"topic":"t","brokerName":"broker-a","queueId":`+q+`}`)
	}
	return []byte(`{"consumerGroup":"og","clientId":"` + client + `","mqSet":[` + strings.Join(mqs, ",") + `]}`)
}

// TestLockOwnershipIsBoundToTheConnection: a client id registered by a
// heartbeat on one connection cannot lock or unlock queues from another
// (NO_PERMISSION); the owner keeps its lease and its next lock holds it.
// Apache's AdminBrokerProcessor trusts the body's clientId; this broker
// does not.
func TestLockOwnershipIsBoundToTheConnection(t *testing.T) {
	b := rmqtest.Start(t)
	owner, attacker := dial(t, b.Broker), dial(t, b.Broker)
	require.Equal(t, wire.Success, owner.call(heartbeatOf("victim", "og")).Code)
	resp := owner.call(req(wire.CodeLockBatchMQ, nil, lockBody("victim", "0", "1")))
	require.Equal(t, wire.Success, resp.Code)
	require.Contains(t, string(resp.Body), `"queueId":1`)

	resp = attacker.call(req(wire.CodeUnlockBatchMQ, nil, lockBody("victim", "0", "1")))
	require.Equal(t, wire.NoPermission, resp.Code, "unlock with another connection's client id")
	resp = attacker.call(req(wire.CodeLockBatchMQ, nil, lockBody("victim", "2")))
	require.Equal(t, wire.NoPermission, resp.Code, "lock with another connection's client id")
	attacker.c.Close() // a close after an unlock must not release the victim's leases either

	require.Equal(t, wire.Success, dial(t, b.Broker).call(heartbeatOf("thief", "og")).Code)
	thief := dial(t, b.Broker)
	require.Equal(t, wire.Success, thief.call(heartbeatOf("thief", "og")).Code)
	resp = thief.call(req(wire.CodeLockBatchMQ, nil, lockBody("thief", "0", "1")))
	require.Equal(t, wire.Success, resp.Code)
	require.NotContains(t, string(resp.Body), "queueId", "the victim still holds both queues")
	resp = owner.call(req(wire.CodeLockBatchMQ, nil, lockBody("victim", "0", "1")))
	require.Equal(t, wire.Success, resp.Code)
	require.Contains(t, string(resp.Body), `"queueId":0`)
	require.Contains(t, string(resp.Body), `"queueId":1`)
	// The owner's own unlock works.
	require.Equal(t, wire.Success, owner.call(req(wire.CodeUnlockBatchMQ, nil, lockBody("victim", "0"))).Code)
}
