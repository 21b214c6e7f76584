package brokercore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

func TestCheckClientTopicRefusesReservedAndMalformedNames(t *testing.T) {
	for _, tc := range []struct {
		topic string
		want  error // nil = accepted
	}{
		{"orders", nil},
		{"a-b_c%d|e", nil},
		{strings.Repeat("A", brokercore.MaxTopicLen), nil},
		{"", brokercore.ErrTopicName},
		{strings.Repeat("A", brokercore.MaxTopicLen+1), brokercore.ErrTopicName},
		{strings.Repeat("A", 300), brokercore.ErrTopicName},
		{"has space", brokercore.ErrTopicName},
		{"dot.ted", brokercore.ErrTopicName},
		{schedule.Topic, brokercore.ErrReservedTopic},
		{schedule.TimerTopic, brokercore.ErrReservedTopic},
		{schedule.ProgressTopic, brokercore.ErrReservedTopic},
		{"TBW102", brokercore.ErrReservedTopic},
		{brokercore.TransHalfTopic, brokercore.ErrReservedTopic},
		{brokercore.TransOpTopic, brokercore.ErrReservedTopic},
		{brokercore.TransCheckMaxTimeTopic, brokercore.ErrReservedTopic},
		{"RMQ_SYS_ANYTHING", brokercore.ErrReservedTopic},
		{"rmq_sys_anything", brokercore.ErrReservedTopic},
		{"%RETRY%g", brokercore.ErrReservedTopic},
		{"%DLQ%g", brokercore.ErrReservedTopic},
		{"rocketmq-broker-a", brokercore.ErrReservedTopic},
	} {
		err := brokercore.CheckClientTopic(tc.topic)
		if tc.want == nil {
			require.NoError(t, err, "%.40q", tc.topic)
			continue
		}
		require.ErrorIs(t, err, tc.want, "%.40q", tc.topic)
		require.ErrorIs(t, err, brokercore.ErrInvalid, "%.40q", tc.topic)
	}
}

func TestCheckGroupNameKeepsTheRetryTopicValid(t *testing.T) {
	g := strings.Repeat("g", brokercore.MaxGroupLen)
	require.NoError(t, brokercore.CheckGroupName(g))
	require.NoError(t, brokercore.CheckTopicName(brokercore.RetryTopic(g)))
	require.ErrorIs(t, brokercore.CheckGroupName(g+"g"), brokercore.ErrGroupName)
	require.ErrorIs(t, brokercore.CheckGroupName(""), brokercore.ErrGroupName)
	require.ErrorIs(t, brokercore.CheckGroupName("a b"), brokercore.ErrGroupName)
}

func TestCheckProduceMatchesWhatTheStoreRefuses(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	defer st.Close()
	big := strings.Repeat("k", store.MaxMetadataSize)
	for _, m := range []*store.Message{
		{Topic: "t", Body: make([]byte, store.DefaultMaxMessageSize+1)},
		{Topic: "t", Keys: []string{big}},
		{Topic: "t", QueueID: -1},
		{Topic: "t", Properties: map[string]string{"k": big}},
	} {
		perr := brokercore.CheckProduce(m, 0)
		require.ErrorIs(t, perr, brokercore.ErrInvalid)
		require.ErrorIs(t, perr, store.ErrInvalid)
		aerr := st.Append(m)
		require.True(t, errors.Is(aerr, store.ErrInvalid), "the store refuses what CheckProduce refuses: %v", aerr)
	}
	ok := &store.Message{Topic: "t", Body: []byte("x")}
	require.NoError(t, brokercore.CheckProduce(ok, 0))
	require.NoError(t, st.Append(ok))
	require.ErrorIs(t, brokercore.CheckProduce(nil, 0), brokercore.ErrInvalid)
}

func ExampleCheckProduce() {
	m := &store.Message{Topic: "SCHEDULE_TOPIC_XXXX", Body: []byte("x")}
	fmt.Println(brokercore.CheckProduce(m, 0))
	// Output: brokercore: invalid argument: reserved topic: "SCHEDULE_TOPIC_XXXX"
}
