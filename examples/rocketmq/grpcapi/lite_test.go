package grpcapi_test

import (
	"context"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

// TestPriorityAndLiteMessagesAreRefusedCleanly: RocketMQ 5.4's priority
// and 5.5's lite-topic messages are not supported. Routes never list them
// among a queue's accepted types (the stock producer then refuses such a
// send itself), a send of one — by its type or by the field alone — is
// MESSAGE_PROPERTY_CONFLICT_WITH_TYPE with nothing stored (what Apache's
// proxy answers a message type its topic does not accept), and a lite
// subscription is NOT_IMPLEMENTED.
func TestPriorityAndLiteMessagesAreRefusedCleanly(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	route, err := c.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "prio"}})
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, route.GetStatus().GetCode())
	for _, q := range route.GetMessageQueues() {
		assert.NotContains(t, q.GetAcceptMessageTypes(), v2.MessageType_PRIORITY)
		assert.NotContains(t, q.GetAcceptMessageTypes(), v2.MessageType_LITE)
	}

	prio, lite := int32(3), "lite-a"
	msg := func(edit func(*v2.SystemProperties)) *v2.Message {
		sp := &v2.SystemProperties{MessageId: "01PRIO", MessageType: v2.MessageType_NORMAL, BodyEncoding: v2.Encoding_IDENTITY, BornTimestamp: timestamppb.Now()}
		edit(sp)
		return &v2.Message{Topic: &v2.Resource{Name: "prio"}, Body: []byte("x"), SystemProperties: sp}
	}
	for name, m := range map[string]*v2.Message{
		"priority type":  msg(func(sp *v2.SystemProperties) { sp.MessageType = v2.MessageType_PRIORITY; sp.Priority = &prio }),
		"lite type":      msg(func(sp *v2.SystemProperties) { sp.MessageType = v2.MessageType_LITE; sp.LiteTopic = &lite }),
		"normal w/ prio": msg(func(sp *v2.SystemProperties) { sp.Priority = &prio }),
		"normal w/ lite": msg(func(sp *v2.SystemProperties) { sp.LiteTopic = &lite }),
		"unset w/ prio": msg(func(sp *v2.SystemProperties) {
			sp.MessageType = v2.MessageType_MESSAGE_TYPE_UNSPECIFIED
			sp.Priority = &prio
		}),
	} {
		resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{m}})
		require.NoError(t, err, name)
		assert.Equal(t, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, resp.GetStatus().GetCode(), "%s: %s", name, resp.GetStatus().GetMessage())
		assert.NotEmpty(t, resp.GetStatus().GetMessage())
	}
	assert.Zero(t, maxOffsets(b, "prio"), "nothing stored")

	sync, err := c.SyncLiteSubscription(ctx, &v2.SyncLiteSubscriptionRequest{
		Action: v2.LiteSubscriptionAction_PARTIAL_ADD, Topic: &v2.Resource{Name: "prio"}, Group: &v2.Resource{Name: "g"}, LiteTopicSet: []string{lite},
	})
	require.NoError(t, err)
	assert.Equal(t, v2.Code_NOT_IMPLEMENTED, sync.GetStatus().GetCode())

	// The stock producer refuses a priority send itself, from the route.
	p := newProducer(t, b.endpoint, "prio")
	pm := textMessage("prio", "x")
	require.NoError(t, pm.SetPriority(1))
	_, err = p.Send(ctx, pm)
	require.Error(t, err)
	assert.Zero(t, maxOffsets(b, "prio"), "nothing stored")
}

// TestSentTagsAndKeysAreRocketMQProperties: like Apache's proxy, a gRPC
// send keeps the tag and keys as the TAGS and KEYS properties too, so a
// remoting (v2) consumer — which filters by the TAGS property on its side
// and shows KEYS — sees them; a gRPC receive still shows them as system
// properties only.
func TestSentTagsAndKeysAreRocketMQProperties(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	p := newProducer(t, b.endpoint, "props")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := textMessage("props", "x")
	m.SetTag("TagA")
	m.SetKeys("k1", "k2")
	_, err := p.Send(ctx, m)
	require.NoError(t, err)
	var stored []string
	for _, q := range b.Store().Queues("props") {
		msgs, err := b.Store().Read("props", q, 0, 10)
		require.NoError(t, err)
		for _, sm := range msgs {
			stored = append(stored, sm.Properties["TAGS"], sm.Properties["KEYS"])
		}
	}
	assert.Equal(t, []string{"TagA", "k1 k2"}, stored)
}

// TestEmptyAndMixedTopicSendsAreMessageCorrupted: Apache's proxy answers a
// send without messages, and one whose messages name different topics,
// MESSAGE_CORRUPTED; nothing is stored.
func TestEmptyAndMixedTopicSendsAreMessageCorrupted(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{})
	require.NoError(t, err)
	assert.Equal(t, v2.Code_MESSAGE_CORRUPTED, resp.GetStatus().GetCode())
	msg := func(topic, id string) *v2.Message {
		return &v2.Message{Topic: &v2.Resource{Name: topic}, Body: []byte("x"), SystemProperties: &v2.SystemProperties{
			MessageId: id, MessageType: v2.MessageType_NORMAL, BodyEncoding: v2.Encoding_IDENTITY, BornTimestamp: timestamppb.Now()}}
	}
	resp, err = c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{msg("mixed-a", "01A"), msg("mixed-b", "01B")}})
	require.NoError(t, err)
	assert.Equal(t, v2.Code_MESSAGE_CORRUPTED, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	assert.Zero(t, maxOffsets(b, "mixed-a")+maxOffsets(b, "mixed-b"))
}
