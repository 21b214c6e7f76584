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
