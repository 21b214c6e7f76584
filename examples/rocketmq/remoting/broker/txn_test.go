package broker_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/txn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// halfReq is a SEND of a transaction's half message, as the v2 client
// sends it: TRAN_MSG and PGROUP properties, TRANSACTION_PREPARED_TYPE in
// sysFlag.
func halfReq(topic, body, group, uniq string) *wire.Command {
	c := sendReq(topic, 0, body)
	c.ExtFields["producerGroup"] = group
	c.ExtFields["sysFlag"] = "4"
	c.ExtFields["properties"] = "TRAN_MSG\x01true\x02PGROUP\x01" + group + "\x02UNIQ_KEY\x01" + uniq + "\x02"
	return c
}

func endReq(group string, id int64, kind, msgID string) *wire.Command {
	return req(37, map[string]string{"producerGroup": group, "tranStateTableOffset": i64s(id),
		"commitLogOffset": "0", "commitOrRollback": kind, "fromTransactionCheck": "false", "msgId": msgID}, nil)
}

func TestHalfSendIsStoredAsAHalfAndEndTransactionCommitsItOnce(t *testing.T) {
	forEachFlush(t, func(t *testing.T, b *rmqtest.Broker) {
		rc := dial(t, b.Broker)
		st := b.Server.Core().Store()
		resp := rc.call(halfReq("orders", "paid", "pg", "u1"))
		require.Equal(t, wire.Success, resp.Code, resp.Remark)
		id := int64(0)
		assert.Equal(t, i64s(id), resp.ExtFields["queueOffset"], "the transaction's id, the client's tranStateTableOffset")
		assert.Zero(t, st.MaxOffset("orders", 0), "a half is not on its topic")
		assert.Equal(t, int64(1), st.MaxOffset(brokercore.TransHalfTopic, 0))

		for _, bad := range []struct {
			cmd    *wire.Command
			remark string
		}{
			{endReq("other", id, "8", "u1"), "producer group"},
			{endReq("pg", id, "8", "u2"), "not message"},
			{endReq("pg", id, "5", "u1"), "commitOrRollback"},
			{endReq("pg", 99, "8", "u1"), "no such transaction"},
			{req(37, map[string]string{"producerGroup": "pg"}, nil), "tranStateTableOffset"},
		} {
			r := rc.call(bad.cmd)
			assert.Equal(t, wire.SystemError, r.Code)
			assert.Contains(t, r.Remark, bad.remark)
		}
		assert.Zero(t, st.MaxOffset("orders", 0))
		require.Equal(t, wire.Success, rc.call(endReq("pg", id, "0", "u1")).Code, "unknown: left open")
		require.Equal(t, wire.Success, rc.call(endReq("pg", id, "8", "u1")).Code)
		require.Equal(t, wire.Success, rc.call(endReq("pg", id, "8", "u1")).Code, "a repeated commit")
		r := rc.call(endReq("pg", id, "12", "u1"))
		assert.Equal(t, wire.SystemError, r.Code)
		assert.Contains(t, r.Remark, "already resolved")
		msgs, err := st.Read("orders", 0, 0, 10)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		assert.Equal(t, "paid", string(msgs[0].Body))
		assert.NotContains(t, msgs[0].Properties, "TRAN_MSG")
		assert.NotContains(t, msgs[0].Properties, wire.PropSysFlag)
	})
}

func TestHalfSendWithADelayOrInABatchIsRefused(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	delayed := halfReq("orders", "x", "pg", "u1")
	delayed.ExtFields["properties"] += "DELAY\x013\x02"
	r := rc.call(delayed)
	assert.Equal(t, wire.MessageIllegal, r.Code)
	assert.Contains(t, r.Remark, "delayed")
	batch := req(wire.CodeSendBatchMessage, map[string]string{"b": "orders", "e": "0", "f": "4", "a": "pg"}, []byte{0, 0, 0, 9})
	r = rc.call(batch)
	assert.NotEqual(t, wire.Success, r.Code)
	assert.Zero(t, b.Server.Core().Store().Stats().Messages)
}

func TestCheckTransactionStateGoesOverTheSendersConnection(t *testing.T) {
	clk := &shift{}
	b := rmqtest.StartConfig(t, server.Config{Core: brokercore.Options{Txn: txn.Options{Now: clk.Now, Tick: 5 * time.Millisecond}}})
	rc := dial(t, b.Broker)
	require.Equal(t, wire.Success, rc.call(halfReq("orders", "paid", "pg", "u1")).Code)
	clk.add(txn.DefaultTransactionTimeout)
	var check *wire.Command
	for check == nil {
		c, err := rc.read(10 * time.Second)
		require.NoError(t, err)
		if c.Code == 39 {
			check = c
		}
	}
	assert.True(t, check.IsOneway())
	assert.Equal(t, "0", check.ExtFields["tranStateTableOffset"])
	assert.Equal(t, "u1", check.ExtFields["msgId"])
	assert.NotEmpty(t, check.ExtFields["offsetMsgId"])
	assert.Contains(t, string(check.Body), "paid")
	assert.Contains(t, string(check.Body), "PGROUP\x01pg")
	// the producer answers oneway, from the check
	ans := endReq("pg", 0, "8", "u1")
	ans.ExtFields["fromTransactionCheck"] = "true"
	ans.Flag = wire.FlagOneway
	rc.send(ans)
	require.Eventually(t, func() bool { return b.Server.Core().Store().MaxOffset("orders", 0) == 1 }, 10*time.Second, 5*time.Millisecond)
}

// shift is real time moved forward by the test.
type shift struct{ d atomic.Int64 }

func (s *shift) Now() time.Time      { return time.Now().Add(time.Duration(s.d.Load())) }
func (s *shift) add(d time.Duration) { s.d.Add(int64(d)) }
