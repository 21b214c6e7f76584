package broker_test

import (
	"errors"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// resetWriter is a fakeWriter that takes the admin's offset resets over.
type resetWriter struct {
	fakeWriter
	resets   []map[int]int64
	resetErr error
}

func (w *resetWriter) ResetOffsets(group, topic string, offsets map[int]int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resetErr != nil {
		return w.resetErr
	}
	w.resets = append(w.resets, offsets)
	return nil
}

var _ broker.OffsetResetWriter = (*resetWriter)(nil)

func queryOffsetReq(group, topic string) *wire.Command {
	return req(wire.CodeQueryConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0"}, nil)
}

// An INVOKE_BROKER_TO_RESET_OFFSET whose reset the Writer refuses (a
// replica whose raft proposal failed: no longer the leader, a timeout,
// shutdown, a refused entry) is answered SYSTEM_ERROR naming the cause,
// as Apache answers a reset it did not make, and moves nothing: neither
// the broker's own offsets nor what QUERY_CONSUMER_OFFSET answers. Once
// the Writer takes it, the answer is the ResetOffsetBody of its targets.
func TestResetTheWriterRefusesIsAnErrorAndMovesNothing(t *testing.T) {
	w := &resetWriter{resetErr: errors.Join(broker.ErrNotWritable, errors.New("raft: leadership lost while committing log"))}
	rc, st := startWriterBroker(t, w)
	for range 3 {
		require.NoError(t, st.Append(&store.Message{Topic: "TBW102", Body: []byte("m")}))
	}
	reset := req(broker.CodeInvokeBrokerToResetOffset, map[string]string{"group": "g", "topic": "TBW102", "queueId": "0", "offset": "2", "timestamp": "0"}, nil)

	resp := rc.call(reset)
	require.Equal(t, wire.SystemError, resp.Code, "a reset raft refused must not answer SUCCESS (remark %q)", resp.Remark)
	require.Contains(t, resp.Remark, "leadership lost")
	require.Empty(t, resp.Body, "no ResetOffsetBody for a reset that was not made")
	require.Equal(t, wire.QueryNotFound, rc.call(queryOffsetReq("g", "TBW102")).Code, "the broker's own offset moved")

	w.mu.Lock()
	w.resetErr = nil
	w.mu.Unlock()
	resp = rc.call(reset)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Contains(t, string(resp.Body), `"queueId":0}:2`)
	require.Equal(t, []map[int]int64{{0: 2}}, w.resets)
	q := rc.call(queryOffsetReq("g", "TBW102"))
	require.Equal(t, wire.Success, q.Code, q.Remark)
	require.Equal(t, "2", q.ExtFields["offset"])

	// Every queue of the topic in one call to the Writer: all or none.
	all := req(broker.CodeInvokeBrokerToResetOffset, map[string]string{"group": "g", "topic": "TBW102", "queueId": "-1", "timestamp": "0"}, nil)
	resp = rc.call(all)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Len(t, w.resets, 2)
	n := len(w.resets[1])
	require.Greater(t, n, 1)
	require.Equal(t, int64(0), w.resets[1][0])
}

// An UPDATE_CONSUMER_OFFSET the Writer refuses is answered SYSTEM_ERROR
// and leaves the broker's own offset where it was, so QUERY_CONSUMER_OFFSET
// does not answer a commit that was never recorded.
func TestCommitTheWriterRefusesMovesNothing(t *testing.T) {
	w := &fakeWriter{err: errors.Join(broker.ErrNotWritable, errors.New("raft: timed out enqueuing operation"))}
	rc, st := startWriterBroker(t, w)
	for range 3 {
		require.NoError(t, st.Append(&store.Message{Topic: "TBW102", Body: []byte("m")}))
	}
	update := req(wire.CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "TBW102", "queueId": "0", "commitOffset": "2"}, nil)
	resp := rc.call(update)
	require.Equal(t, wire.SystemError, resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "timed out enqueuing")
	q := rc.call(queryOffsetReq("g", "TBW102"))
	require.Equal(t, wire.QueryNotFound, q.Code, "the broker answers offset %q of a commit the Writer refused", q.ExtFields["offset"])

	w.mu.Lock()
	w.err = nil
	w.mu.Unlock()
	require.Equal(t, wire.Success, rc.call(update).Code)
	q = rc.call(queryOffsetReq("g", "TBW102"))
	require.Equal(t, wire.Success, q.Code, q.Remark)
	require.Equal(t, "2", q.ExtFields["offset"])
}
