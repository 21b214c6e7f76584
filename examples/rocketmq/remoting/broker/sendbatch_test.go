package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// Under -flush async the sends of one burst go to the store in one append;
// each still gets the answer it would get alone: the good ones SUCCESS with
// their own queue offsets (in the order sent), a send the store refuses
// (a body over its MaxMessageSize) and one refused before the store (bad
// topic) their errors, and the refused ones store nothing and fail none of
// the others.
func TestBurstOfSendsIsAppendedTogetherAndAnsweredOneByOne(t *testing.T) {
	b := rmqtest.StartConfig(t, server.Config{Flush: "async",
		Core: brokercore.Options{Store: store.Options{MaxMessageSize: 1024}}})
	rc := dial(t, b.Broker)
	st := b.Server.Core().Store()
	require.Equal(t, wire.Success, rc.call(sendReq("burst", 0, "first")).Code) // creates the topic
	appends0 := st.Stats().Appends

	const good = 20
	var burst []byte
	var ops []int32
	add := func(cmd *wire.Command) {
		rc.opaque++
		cmd.Opaque = rc.opaque
		ops = append(ops, cmd.Opaque)
		f, err := wire.Encode(cmd)
		require.NoError(t, err)
		burst = append(burst, f...)
	}
	for i := 0; i < good; i++ {
		add(sendReq("burst", 0, "m"))
	}
	rc.writeRaw(burst)
	answers := map[int32]*wire.Command{}
	for len(answers) < len(ops) {
		resp, err := rc.read(5 * time.Second)
		require.NoError(t, err)
		answers[resp.Opaque] = resp
	}
	for i, op := range ops {
		require.Equal(t, wire.Success, answers[op].Code, "send %d", i)
		require.Equal(t, i64s(int64(i+1)), answers[op].ExtFields["queueOffset"], "send %d in order", i)
	}
	require.Less(t, st.Stats().Appends-appends0, uint64(good), "%d sends of one burst in fewer appends", good)

	// A burst with a send the store refuses and one refused before it.
	burst, ops = nil, nil
	add(sendReq("burst", 0, "a"))
	add(sendReq("burst", 0, strings.Repeat("b", 2000)))
	add(sendReq("a b", 0, "c"))
	add(sendReq("burst", 0, "d"))
	rc.writeRaw(burst)
	answers = map[int32]*wire.Command{}
	for len(answers) < len(ops) {
		resp, err := rc.read(5 * time.Second)
		require.NoError(t, err)
		answers[resp.Opaque] = resp
	}
	require.Equal(t, wire.Success, answers[ops[0]].Code)
	require.Equal(t, i64s(good+1), answers[ops[0]].ExtFields["queueOffset"])
	require.Equal(t, wire.MessageIllegal, answers[ops[1]].Code)
	require.Contains(t, answers[ops[1]].Remark, "append")
	require.Equal(t, wire.SystemError, answers[ops[2]].Code)
	require.Contains(t, answers[ops[2]].Remark, "topic name")
	require.Equal(t, wire.Success, answers[ops[3]].Code)
	require.Equal(t, i64s(good+2), answers[ops[3]].ExtFields["queueOffset"])
	require.Equal(t, uint64(good+3), st.Stats().Messages, "the refused sends stored nothing")
	msgs, err := st.Read("burst", 0, good+1, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.Equal(t, "a", string(msgs[0].Body))
	require.Equal(t, "d", string(msgs[1].Body))
}
