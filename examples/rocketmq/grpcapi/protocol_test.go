package grpcapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/schedule"
)

func withClientID(ctx context.Context, id string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", id)
}

// TestSettingsAnswerWhatTheClientsNeed: the push consumer takes its FIFO
// flag, batch size, long-polling time and backoff from the answer (zero or
// missing breaks it), the producer its max body size (0 breaks every
// send); metrics stay off.
func TestSettingsAnswerWhatTheClientsNeed(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{SettingsHold: -1, LongPolling: 20 * time.Second})
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(withClientID(context.Background(), "settings-test"), 10*time.Second)
	defer cancel()
	ask := func(in *v2.Settings) *v2.Settings {
		s, err := c.Telemetry(ctx)
		require.NoError(t, err)
		require.NoError(t, s.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: in}}))
		out, err := s.Recv()
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, out.GetStatus().GetCode())
		require.NotNil(t, out.GetSettings())
		return out.GetSettings()
	}
	push := v2.ClientType_PUSH_CONSUMER
	for group, fifo := range map[string]bool{"orders-fifo": true, "orders": false} {
		st := ask(&v2.Settings{ClientType: &push, PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{
			Group: &v2.Resource{Name: group}, LongPollingTimeout: durationpb.New(30 * time.Second),
		}}})
		sub := st.GetSubscription()
		require.NotNil(t, sub, group)
		assert.Equal(t, fifo, sub.GetFifo(), group)
		assert.Positive(t, sub.GetReceiveBatchSize(), group)
		assert.Equal(t, 20*time.Second, sub.GetLongPollingTimeout().AsDuration(), group)
		assert.EqualValues(t, 16, st.GetBackoffPolicy().GetMaxAttempts())
		exp := st.GetBackoffPolicy().GetExponentialBackoff()
		require.NotNil(t, exp)
		assert.Equal(t, time.Second, exp.GetInitial().AsDuration())
		assert.Equal(t, 10*time.Second, exp.GetMax().AsDuration())
		assert.EqualValues(t, 2, exp.GetMultiplier())
		assert.False(t, st.GetMetric().GetOn())
	}
	prod := v2.ClientType_PRODUCER
	st := ask(&v2.Settings{ClientType: &prod, PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{}}})
	require.NotNil(t, st.GetPublishing())
	assert.EqualValues(t, grpcapi.DefaultMaxBodySize, st.GetPublishing().GetMaxBodySize())
	assert.True(t, st.GetPublishing().GetValidateMessageType())
	assert.False(t, st.GetMetric().GetOn())
	// Apache's proxy sends producers a backoff policy too (ProxyConfig's
	// grpcClientProducer* values); a client of another language throws in
	// its settings handler without one.
	bp := st.GetBackoffPolicy()
	require.NotNil(t, bp, "a producer's settings answer carries a backoff policy")
	assert.EqualValues(t, 3, bp.GetMaxAttempts())
	pexp := bp.GetExponentialBackoff()
	require.NotNil(t, pexp)
	assert.Equal(t, 10*time.Millisecond, pexp.GetInitial().AsDuration())
	assert.Equal(t, time.Second, pexp.GetMax().AsDuration())
	assert.EqualValues(t, 2, pexp.GetMultiplier())
}

// TestBadSendsAreRefusedWithTheirCodeAndNothingStored.
func TestBadSendsAreRefusedWithTheirCodeAndNothingStored(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{MaxBodySize: 1024})
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := func(edit func(*v2.Message)) *v2.Message {
		m := &v2.Message{
			Topic: &v2.Resource{Name: "bad"},
			Body:  []byte("x"),
			SystemProperties: &v2.SystemProperties{
				MessageId: "01ABC", MessageType: v2.MessageType_NORMAL, BodyEncoding: v2.Encoding_IDENTITY,
				BornTimestamp: timestamppb.Now(),
			},
		}
		edit(m)
		return m
	}
	tag := func(s string) *string { return &s }
	cases := map[string]struct {
		m    *v2.Message
		code v2.Code
	}{
		"empty topic":     {msg(func(m *v2.Message) { m.Topic.Name = "" }), v2.Code_ILLEGAL_TOPIC},
		"topic with /":    {msg(func(m *v2.Message) { m.Topic.Name = "a/b" }), v2.Code_ILLEGAL_TOPIC},
		"timer topic":     {msg(func(m *v2.Message) { m.Topic.Name = schedule.TimerTopic }), v2.Code_ILLEGAL_TOPIC},
		"dlq topic":       {msg(func(m *v2.Message) { m.Topic.Name = "%DLQ%g" }), v2.Code_ILLEGAL_TOPIC},
		"retry topic":     {msg(func(m *v2.Message) { m.Topic.Name = "%RETRY%g" }), v2.Code_ILLEGAL_TOPIC},
		"template topic":  {msg(func(m *v2.Message) { m.Topic.Name = "TBW102" }), v2.Code_ILLEGAL_TOPIC},
		"half topic":      {msg(func(m *v2.Message) { m.Topic.Name = "RMQ_SYS_TRANS_HALF_TOPIC" }), v2.Code_ILLEGAL_TOPIC},
		"long topic":      {msg(func(m *v2.Message) { m.Topic.Name = strings.Repeat("t", 128) }), v2.Code_ILLEGAL_TOPIC},
		"no message id":   {msg(func(m *v2.Message) { m.SystemProperties.MessageId = "" }), v2.Code_ILLEGAL_MESSAGE_ID},
		"empty body":      {msg(func(m *v2.Message) { m.Body = nil }), v2.Code_MESSAGE_BODY_EMPTY},
		"body too large":  {msg(func(m *v2.Message) { m.Body = make([]byte, 1025) }), v2.Code_MESSAGE_BODY_TOO_LARGE},
		"tag with |":      {msg(func(m *v2.Message) { m.SystemProperties.Tag = tag("a|b") }), v2.Code_ILLEGAL_MESSAGE_TAG},
		"blank key":       {msg(func(m *v2.Message) { m.SystemProperties.Keys = []string{" "} }), v2.Code_ILLEGAL_MESSAGE_KEY},
		"reserved prop":   {msg(func(m *v2.Message) { m.UserProperties = map[string]string{"UNIQ_KEY": "x"} }), v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		"cluster prop":    {msg(func(m *v2.Message) { m.UserProperties = map[string]string{"CLUSTER": "x"} }), v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		"fifo no group":   {msg(func(m *v2.Message) { m.SystemProperties.MessageType = v2.MessageType_FIFO }), v2.Code_ILLEGAL_MESSAGE_GROUP},
		"delay no time":   {msg(func(m *v2.Message) { m.SystemProperties.MessageType = v2.MessageType_DELAY }), v2.Code_ILLEGAL_DELIVERY_TIME},
		"normal w/ group": {msg(func(m *v2.Message) { m.SystemProperties.MessageGroup = tag("g") }), v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		"transaction":     {msg(func(m *v2.Message) { m.SystemProperties.MessageType = v2.MessageType_TRANSACTION }), v2.Code_BAD_REQUEST}, // not in a batch
		"delay too far": {msg(func(m *v2.Message) {
			m.SystemProperties.MessageType = v2.MessageType_DELAY
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(3 * 365 * 24 * time.Hour))
		}), v2.Code_ILLEGAL_DELIVERY_TIME},
	}
	for name, tc := range cases {
		batch := []*v2.Message{msg(func(*v2.Message) {}), tc.m}
		if tc.m.GetTopic().GetName() != batch[0].GetTopic().GetName() {
			batch = batch[1:] // a batch of two topics is MESSAGE_CORRUPTED whatever its messages
		}
		resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: batch})
		require.NoError(t, err, name)
		assert.Equal(t, tc.code, resp.GetStatus().GetCode(), "%s: %s", name, resp.GetStatus().GetMessage())
		assert.NotEmpty(t, resp.GetStatus().GetMessage(), name)
		assert.Empty(t, resp.GetEntries(), name)
	}
	for _, topic := range b.Store().Topics() {
		for _, q := range b.Store().Queues(topic) {
			assert.Zero(t, b.Store().MaxOffset(topic, q), "something was stored in %s/%d", topic, q)
		}
	}
	end, err := c.EndTransaction(ctx, &v2.EndTransactionRequest{Topic: &v2.Resource{Name: "bad"}, MessageId: "01ABC", TransactionId: "x"})
	require.NoError(t, err)
	assert.Equal(t, v2.Code_INVALID_TRANSACTION_ID, end.GetStatus().GetCode())
}

// TestSentMessagesCarryTheCluster: as Apache's SendMessageProcessor does
// for the proxy's sends, every stored message names the broker's cluster
// (CLUSTER), which a v2 replier's CreateReplyMessage needs; it is a system
// property, so a receiver does not see it among the user's.
func TestSentMessagesCarryTheCluster(t *testing.T) {
	t.Parallel()
	for _, cluster := range []string{"", "c1"} {
		b := startBroker(t, grpcapi.Options{Cluster: cluster})
		c := rawClient(t, b.endpoint)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{{
			Topic: &v2.Resource{Name: "t"}, Body: []byte("x"), UserProperties: map[string]string{"u": "1"},
			SystemProperties: &v2.SystemProperties{MessageId: "01ABC", MessageType: v2.MessageType_NORMAL,
				BodyEncoding: v2.Encoding_IDENTITY, BornTimestamp: timestamppb.Now()},
		}}})
		cancel()
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
		want := cluster
		if want == "" {
			want = grpcapi.DefaultCluster
		}
		var found int
		for _, q := range b.Store().Queues("t") {
			msgs, err := b.Store().Read("t", q, 0, 10)
			require.NoError(t, err)
			for _, m := range msgs {
				found++
				assert.Equal(t, want, m.Properties[grpcapi.PropCluster])
				assert.Equal(t, map[string]string{"u": "1"}, grpcapi.UserProperties(m))
			}
		}
		assert.Equal(t, 1, found)
	}
}

// TestBadHandlesAndFiltersAreRefused: a forged handle is refused with
// INVALID_RECEIPT_HANDLE (the push consumer gives up at once), a change of
// invisible time still answers a usable handle, SQL92 is unsupported.
func TestBadHandlesAndFiltersAreRefused(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range []string{"", "garbage", "0.0.forged", "-1.2.x"} {
		ack, err := c.AckMessage(ctx, &v2.AckMessageRequest{Group: &v2.Resource{Name: "g"}, Topic: &v2.Resource{Name: "t"},
			Entries: []*v2.AckMessageEntry{{MessageId: "01", ReceiptHandle: h}}})
		require.NoError(t, err)
		assert.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, ack.GetStatus().GetCode(), h)
		require.Len(t, ack.GetEntries(), 1)
		assert.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, ack.GetEntries()[0].GetStatus().GetCode())
		ch, err := c.ChangeInvisibleDuration(ctx, &v2.ChangeInvisibleDurationRequest{Group: &v2.Resource{Name: "g"}, Topic: &v2.Resource{Name: "t"},
			ReceiptHandle: h, InvisibleDuration: durationpb.New(time.Second), MessageId: "01"})
		require.NoError(t, err)
		assert.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, ch.GetStatus().GetCode(), h)
		assert.Equal(t, h, ch.GetReceiptHandle(), "the answer must carry a handle the client can keep")
		fw, err := c.ForwardMessageToDeadLetterQueue(ctx, &v2.ForwardMessageToDeadLetterQueueRequest{Group: &v2.Resource{Name: "g"},
			Topic: &v2.Resource{Name: "t"}, ReceiptHandle: h, MessageId: "01"})
		require.NoError(t, err)
		assert.Equal(t, v2.Code_INVALID_RECEIPT_HANDLE, fw.GetStatus().GetCode(), h)
	}
	// Apache's tag grammar (pop.ParseFilter): an expression naming no tag
	// is illegal; "a ||" is {a}, "a b" the tag "a b", "A || *" is {A, *}.
	for expr, illegal := range map[string]bool{"||": true, "|| ||": true, "a ||": false, "a b": false, "A || *": false} {
		s, err := c.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "g"},
			MessageQueue:     &v2.MessageQueue{Topic: &v2.Resource{Name: "t"}},
			FilterExpression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: expr}, BatchSize: 1,
			LongPollingTimeout: durationpb.New(0)})
		require.NoError(t, err)
		f, err := s.Recv()
		require.NoError(t, err)
		if illegal {
			assert.Equal(t, v2.Code_ILLEGAL_FILTER_EXPRESSION, f.GetStatus().GetCode(), expr)
		} else {
			assert.NotEqual(t, v2.Code_ILLEGAL_FILTER_EXPRESSION, f.GetStatus().GetCode(), expr)
		}
	}
	s, err := c.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "g"},
		MessageQueue:     &v2.MessageQueue{Topic: &v2.Resource{Name: "t"}},
		FilterExpression: &v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "a > 1"}, BatchSize: 1})
	require.NoError(t, err)
	f, err := s.Recv()
	require.NoError(t, err)
	assert.Equal(t, v2.Code_UNSUPPORTED, f.GetStatus().GetCode())
}

// TestLongPollEndsBeforeTheClientsDeadline: a receive asking for a longer
// poll than its deadline allows still ends, with a status, before it.
// The margin is wider than the default so that a loaded machine has time
// to deliver the answer.
func TestLongPollEndsBeforeTheClientsDeadline(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{DeadlineMargin: 6 * time.Second})
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	s, err := c.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "g"},
		MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: "empty"}}, BatchSize: 1,
		LongPollingTimeout: durationpb.New(30 * time.Second)})
	require.NoError(t, err)
	f, err := s.Recv()
	require.NoError(t, err)
	assert.Equal(t, v2.Code_MESSAGE_NOT_FOUND, f.GetStatus().GetCode())
	took := time.Since(start)
	assert.Less(t, took, 10*time.Second)
	assert.Greater(t, took, 3*time.Second, "it did not long-poll at all")
}
