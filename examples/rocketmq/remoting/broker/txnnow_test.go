package broker_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/txn"
	"github.com/stretchr/testify/require"
)

// nowCore is a core whose transaction manager comes and goes, as a
// replicated node's does with its leadership: TransactionsNow answers err
// while it is set.
type nowCore struct {
	*brokercore.Broker
	mu  sync.Mutex
	err error
}

func (c *nowCore) TransactionsNow() (*txn.Manager, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	return c.Broker.Transactions(), nil
}

func (c *nowCore) set(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

// While the core has no transaction manager now (ErrNotWritable), a half
// send and END_TRANSACTION are SERVICE_NOT_AVAILABLE, which the v2 client
// retries, and nothing is stored; once it has one they are served, and a
// half sent to a manager that closed is SERVICE_NOT_AVAILABLE again.
func TestTransactionsNowNotWritableIsServiceNotAvailable(t *testing.T) {
	bc, err := brokercore.Open(t.TempDir(), brokercore.Options{})
	require.NoError(t, err)
	core := &nowCore{Broker: bc}
	rc := serveBroker(t, core, broker.BrokerOptions{Addr: "127.0.0.1:10911"}, bc.Close)

	core.set(errors.Join(broker.ErrNotWritable, errors.New("leader is n2")))
	resp := rc.call(halfReq("orders", "paid", "pg", "u1"))
	require.Equal(t, wire.ServiceNotAvailable, resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "leader is n2")
	resp = rc.call(endReq("pg", 0, "8", "u1"))
	require.Equal(t, wire.ServiceNotAvailable, resp.Code, resp.Remark)
	require.Zero(t, bc.Store().Stats().Messages)

	core.set(nil)
	resp = rc.call(halfReq("orders", "paid", "pg", "u1"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	id, err := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
	require.NoError(t, err)
	require.Equal(t, wire.Success, rc.call(endReq("pg", id, "8", "u1")).Code)
	require.Equal(t, int64(1), bc.Store().MaxOffset("orders", 0))

	// A manager closed under the send (its leader term ended) is retried
	// elsewhere too.
	require.NoError(t, bc.Transactions().Close())
	resp = rc.call(halfReq("orders", "late", "pg", "u2"))
	require.Equal(t, wire.ServiceNotAvailable, resp.Code, resp.Remark)
}
