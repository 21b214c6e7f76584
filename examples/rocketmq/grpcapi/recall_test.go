package grpcapi_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/schedule"
)

// TestStockProducerRecallsADelayMessageByItsHandle: Apache 5.3 answers a
// delay (timer) message's send with a recall handle — base64url of
// "v1 <topic> <broker> <deliverMs+1> <message id>" — and Producer.Recall
// with it cancels the timer. A second recall is still OK (Apache writes
// its delete marker again); a handle of another topic, a forged one and
// a non-delay message's (none) are refused.
func TestStockProducerRecallsADelayMessageByItsHandle(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{BrokerName: "broker-a"})
	p := newProducer(t, b.endpoint, "recall", "recall-other")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	at := time.Now().Add(time.Hour)
	m := textMessage("recall", "later")
	m.SetDelayTimestamp(at)
	r, err := p.Send(ctx, m)
	require.NoError(t, err)
	require.Len(t, r, 1)
	require.NotEmpty(t, r[0].RecallHandle, "a delay message's send answers a recall handle")
	raw, err := base64.URLEncoding.DecodeString(r[0].RecallHandle)
	require.NoError(t, err)
	f := strings.Split(string(raw), " ")
	require.Len(t, f, 5, "%q", raw)
	assert.Equal(t, []string{"v1", "recall", "broker-a"}, f[:3])
	assert.Equal(t, r[0].MessageID, f[4])
	ms, err := strconv.ParseInt(f[3], 10, 64)
	require.NoError(t, err)
	assert.InDelta(t, at.UnixMilli()+1, ms, 1, "Apache's timestamp: the timer's ms + 1")

	normal, err := p.Send(ctx, textMessage("recall", "now"))
	require.NoError(t, err)
	assert.Empty(t, normal[0].RecallHandle, "only scheduled messages are recallable")

	_, err = p.Recall(ctx, "recall-other", r[0].RecallHandle)
	requireCode(t, err, v2.Code_INTERNAL_SERVER_ERROR) // Apache: ILLEGAL_OPERATION "topic not match", mapped
	_, err = p.Recall(ctx, "recall", "not-a-handle!")
	requireCode(t, err, v2.Code_INTERNAL_SERVER_ERROR) // Apache: "recall handle is invalid"
	require.ErrorIs(t, b.Scheduler().CancelAt("nothing-here", at), schedule.ErrTimerNotFound)

	id, err := p.Recall(ctx, "recall", r[0].RecallHandle)
	require.NoError(t, err)
	assert.Equal(t, r[0].MessageID, id)
	require.ErrorIs(t, b.Scheduler().CancelAt(r[0].MessageID, at), schedule.ErrCancelled, "the timer is cancelled")
	id, err = p.Recall(ctx, "recall", r[0].RecallHandle)
	require.NoError(t, err, "recalling twice is not an error (Apache)")
	assert.Equal(t, r[0].MessageID, id)

	forged := base64.URLEncoding.EncodeToString([]byte("v1 recall broker-a " + strconv.FormatInt(at.UnixMilli()+1, 10) + " 0000FORGED"))
	_, err = p.Recall(ctx, "recall", forged)
	requireCode(t, err, v2.Code_NOT_FOUND)
	past := base64.URLEncoding.EncodeToString([]byte("v1 recall broker-a " + strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10) + " " + r[0].MessageID))
	_, err = p.Recall(ctx, "recall", past)
	requireCode(t, err, v2.Code_INTERNAL_SERVER_ERROR) // Apache: "timestamp invalid"
	other := base64.URLEncoding.EncodeToString([]byte("v1 recall broker-b " + f[3] + " " + r[0].MessageID))
	_, err = p.Recall(ctx, "recall", other)
	requireCode(t, err, v2.Code_INTERNAL_SERVER_ERROR) // Apache: another broker's handle
}

func requireCode(t *testing.T, err error, code v2.Code) {
	t.Helper()
	var rs *rmq.ErrRpcStatus
	require.True(t, errors.As(err, &rs), "want an rpc status %v, got %v", code, err)
	require.Equal(t, int32(code), rs.Code, "%v", rs.Message)
	require.NotEmpty(t, rs.Message)
}
