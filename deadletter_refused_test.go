package brokercore_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/pop"
)

// A dead letter the store refuses for good — here its topic, "%DLQ%" + a
// group of 260 characters, is over the store's topic limit — was offered
// again every DeadLetterRetry forever, and the queue's committed offset
// never passed the message. Now the message is settled (it stays in its
// topic's log, at its offset), logged at ERROR with its keys and counted in
// pop's Stats.DeadLetterDropped; the queue moves on.
func TestADeadLetterRefusedForGoodIsNotRetriedForeverAndSaidAtError(t *testing.T) {
	clk := newClock()
	opts := testOptions(clk)
	opts.Pop.MaxAttempts = 1
	var logs bytes.Buffer
	opts.Logger = slogJSON(&logs)
	b := openBroker(t, t.TempDir(), opts)
	long := strings.Repeat("g", 260)
	require.NoError(t, b.Store().Append(msg("a")))

	req := pop.Request{Group: long, ClientID: "c1", Topic: topic, Max: 1, Invisible: time.Second}
	res, err := b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	clk.Advance(2 * time.Second) // past MaxAttempts: a dead letter is due
	for range 3 {
		res, err = b.Pop().Pop(context.Background(), req)
		require.NoError(t, err)
		clk.Advance(2 * pop.DefaultDeadLetterRetry)
	}
	st := b.Pop().Stats()
	assert.Equal(t, uint64(1), st.DeadLetterDropped, "dropped once, not offered again")
	assert.LessOrEqual(t, st.DeadLetterFailures, uint64(1))
	assert.Contains(t, logs.String(), `"level":"ERROR"`)
	assert.Contains(t, logs.String(), `"offset":0`)
	off, ok := b.Offsets().Committed(long, topic, 0)
	require.True(t, ok)
	assert.GreaterOrEqual(t, off, int64(1), "the queue moved past the message")
	m, err := b.Store().Read(topic, 0, 0, 1)
	require.NoError(t, err)
	assert.Equal(t, "a", string(m[0].Body), "the message itself is still in its topic's log")
}
