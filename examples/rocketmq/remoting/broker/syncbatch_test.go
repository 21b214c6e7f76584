package broker_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Without AsyncFlush (the store's SyncGroup), the sends of one burst on a
// connection go to the store in one append, not one each, and each is
// answered with its own offset once durable: 32 pipelined sends were 32
// appends, each on a goroutine of its own, before sends were deferred.
func TestSyncFlushSendsOfABurstShareAnAppend(t *testing.T) {
	core, err := brokercore.Open(t.TempDir(), brokercore.Options{})
	require.NoError(t, err)
	rc := serveBroker(t, core, broker.BrokerOptions{Addr: "127.0.0.1:10911"}, core.Close)
	require.Equal(t, wire.Success, rc.call(sendReq("orders", 1, "first")).Code) // the topic exists

	const n = 32
	var burst []byte
	for i := range n {
		cmd := sendReq("orders", 1, "m"+strconv.Itoa(i))
		cmd.Opaque = int32(100 + i)
		f, err := wire.Encode(cmd)
		require.NoError(t, err)
		burst = append(burst, f...)
	}
	st0 := core.Store().Stats()
	rc.writeRaw(burst)
	offsets := map[string]bool{}
	for range n {
		resp, err := rc.read(10 * time.Second)
		require.NoError(t, err)
		require.True(t, resp.IsResponse())
		require.Equal(t, wire.Success, resp.Code, resp.Remark)
		offsets[resp.ExtFields["queueOffset"]] = true
	}
	for i := 1; i <= n; i++ {
		require.True(t, offsets[strconv.Itoa(i)], "offset %d answered", i)
	}
	st := core.Store().Stats()
	require.Equal(t, uint64(n), st.Messages-st0.Messages)
	require.LessOrEqual(t, st.Appends-st0.Appends, uint64(4), "the burst's sends share appends (one per read of the burst)")
	require.Greater(t, st.Syncs, st0.Syncs, "under brokercore's default SyncGroup")
}
