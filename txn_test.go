package brokercore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/txn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenComposesTransactionsWhoseCommitWakesLongPolls(t *testing.T) {
	b := openBroker(t, t.TempDir(), testOptions(newClock()))
	ch := popAsync(b, pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 4, Invisible: time.Minute, Poll: time.Minute})
	h, err := b.Transactions().Prepare(msg("paid"), "pg")
	require.NoError(t, err)
	require.NoError(t, b.Transactions().Commit(h.QueueOffset))
	a := await(t, ch)
	require.NoError(t, a.err)
	assert.Equal(t, []string{"paid"}, bodies(a.res))
	assert.Equal(t, uint64(1), b.Stats().Txn.Committed)
}

func TestOpenChecksBackThroughOptionsCheckerAndKeepsOpenTransactionsAcrossAReopen(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	var mu sync.Mutex
	var asked []txn.Check
	opts := testOptions(clk)
	opts.Txn.Tick = 2 * time.Millisecond
	opts.Txn.Checker = txn.CheckerFunc(func(c txn.Check) error {
		mu.Lock()
		asked = append(asked, c)
		mu.Unlock()
		return nil
	})
	b, err := brokercore.Open(dir, opts)
	require.NoError(t, err)
	h, err := b.Transactions().Prepare(msg("open"), "pg")
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b = openBroker(t, dir, opts)
	assert.True(t, b.Transactions().Pending(h.QueueOffset))
	clk.Advance(txn.DefaultTransactionTimeout)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(asked) == 1 }, 10*time.Second, time.Millisecond)
	mu.Lock()
	assert.Equal(t, "pg", asked[0].Group)
	assert.Equal(t, topic, asked[0].Message.Topic)
	mu.Unlock()
	require.NoError(t, b.Transactions().End(h.QueueOffset, txn.Rollback, txn.FromCheck))
	assert.ErrorIs(t, b.Transactions().Commit(h.QueueOffset), txn.ErrAlreadyResolved)
}

func TestTransactionTopicsAreReservedAndTheLibraryNamesAgree(t *testing.T) {
	assert.Equal(t, "RMQ_SYS_TRANS_HALF_TOPIC", brokercore.TransHalfTopic)
	assert.Equal(t, "RMQ_SYS_TRANS_OP_HALF_TOPIC", brokercore.TransOpTopic)
	assert.Equal(t, "TRANS_CHECK_MAX_TIME_TOPIC", brokercore.TransCheckMaxTimeTopic)
	for _, tp := range []string{txn.HalfTopic, txn.OpTopic, txn.CheckMaxTimeTopic} {
		assert.ErrorIs(t, brokercore.CheckClientTopic(tp), brokercore.ErrReservedTopic)
	}
}
