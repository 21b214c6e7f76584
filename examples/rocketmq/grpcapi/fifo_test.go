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

// TestGroupFIFOMakesAGroupOrderlyWithoutTheNameSuffix: a group the host's
// group table marks orderly (consumeMessageOrderly, set by
// updateSubGroup -o true) is FIFO whatever its name: its settings say so,
// and while step0 is in flight its receives do not hand out step1.
func TestGroupFIFOMakesAGroupOrderlyWithoutTheNameSuffix(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{SettingsHold: -1, GroupFIFO: func(g string) bool { return g == "orders" }})
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(withClientID(context.Background(), "fifo-test"), 20*time.Second)
	defer cancel()
	group := "mg"
	for i, body := range []string{"step0", "step1"} {
		resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{{
			Topic: &v2.Resource{Name: "fifo-orders"}, Body: []byte(body),
			SystemProperties: &v2.SystemProperties{MessageId: "01FIFO" + body, MessageType: v2.MessageType_FIFO,
				MessageGroup: &group, BodyEncoding: v2.Encoding_IDENTITY, BornTimestamp: timestamppb.Now()},
		}}})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), i)
	}
	push := v2.ClientType_PUSH_CONSUMER
	s, err := c.Telemetry(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType: &push, PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "orders"}}},
	}}}))
	out, err := s.Recv()
	require.NoError(t, err)
	assert.True(t, out.GetSettings().GetSubscription().GetFifo(), "the settings of an orderly group say FIFO")

	for _, tc := range []struct {
		group string
		fifo  bool
	}{{"orders", true}, {"plain", false}} {
		first, code, err := rawReceive(ctx, c, tc.group, "fifo-orders", "", 1, 0)
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, code, tc.group)
		require.Len(t, first, 1)
		require.Equal(t, "step0", string(first[0].GetBody()))
		second, _, err := rawReceive(ctx, c, tc.group, "fifo-orders", "", 1, 0)
		require.NoError(t, err)
		if tc.fifo {
			assert.Empty(t, second, "an orderly group gets no step1 while step0 is in flight")
		} else {
			require.Len(t, second, 1, "a concurrent group goes on")
			assert.Equal(t, "step1", string(second[0].GetBody()))
		}
	}
}

// TestTopicMessageTypeIsHonouredByRoutesAndSends: a topic whose
// message.type attribute is FIFO (mqadmin updateTopic -a
// +message.type=FIFO) is routed as accepting FIFO messages only, as
// Apache's proxy routes it, and a NORMAL send to it is
// MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (Apache's TopicMessageTypeValidator);
// a topic without the attribute accepts every supported type.
func TestTopicMessageTypeIsHonouredByRoutesAndSends(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{TopicMessageType: func(topic string) string {
		if topic == "typed-fifo" {
			return "FIFO"
		}
		return ""
	}})
	c := rawClient(t, b.endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	route := func(topic string) []v2.MessageType {
		r, err := c.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: topic}})
		require.NoError(t, err)
		require.Equal(t, v2.Code_OK, r.GetStatus().GetCode())
		return r.GetMessageQueues()[0].GetAcceptMessageTypes()
	}
	assert.Equal(t, []v2.MessageType{v2.MessageType_FIFO}, route("typed-fifo"))
	assert.Len(t, route("untyped"), 4)
	group := "g"
	send := func(typ v2.MessageType) v2.Code {
		sp := &v2.SystemProperties{MessageId: "01TYPED", MessageType: typ, BodyEncoding: v2.Encoding_IDENTITY, BornTimestamp: timestamppb.Now()}
		if typ == v2.MessageType_FIFO {
			sp.MessageGroup = &group
		}
		resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: &v2.Resource{Name: "typed-fifo"}, Body: []byte("x"), SystemProperties: sp}}})
		require.NoError(t, err)
		return resp.GetStatus().GetCode()
	}
	assert.Equal(t, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, send(v2.MessageType_NORMAL))
	assert.Equal(t, v2.Code_OK, send(v2.MessageType_FIFO))
}
