package grpcapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/meta"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

// TestProgramServesGRPCNextToRemoting: the program (through rmqtest, as a
// user's test starts it) listens for RocketMQ 5 clients too, with routes
// from the program's topic table, and its certificate under the data dir.
func TestProgramServesGRPCNextToRemoting(t *testing.T) {
	t.Parallel()
	b := rmqtest.Start(t)
	require.NotEmpty(t, b.GRPC)
	topic := "program-topic"
	p := newProducer(t, b.GRPC, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := sendN(t, ctx, p, topic, 10, nil)
	n, ok := b.Server.Topics().Queues(topic)
	require.True(t, ok, "the gRPC route did not go through the program's topic table")
	require.Equal(t, b.Server.Topics().DefaultQueues(), n)
	c := newSimpleConsumer(t, b.GRPC, "program-g", topic, time.Second, nil)
	got := newSeenSet()
	for got.len() < len(ids) {
		require.NoError(t, ctx.Err())
		mvs, err := receive(ctx, c, 32, 30*time.Second)
		require.NoError(t, err)
		for _, mv := range mvs {
			got.add(mv.GetMessageId())
			require.NoError(t, c.Ack(ctx, mv))
		}
	}
	for _, id := range ids {
		require.Equal(t, 1, got.m[id])
	}
}

// TestProgramMetricsCountGRPCRequestsStreamsAndReceives: /metrics has the
// gRPC listener's series next to the remoting ones — requests by method
// and answer code, open Telemetry streams, receives in flight.
func TestProgramMetricsCountGRPCRequestsStreamsAndReceives(t *testing.T) {
	t.Parallel()
	b := rmqtest.Start(t)
	topic := "metrics-topic"
	p := newProducer(t, b.GRPC, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sendN(t, ctx, p, topic, 3, nil)
	c := newSimpleConsumer(t, b.GRPC, "metrics-g", topic, time.Second, nil)
	_, err := receive(ctx, c, 32, 30*time.Second)
	require.NoError(t, err)
	_, _ = receive(ctx, c, 32, 30*time.Second) // MESSAGE_NOT_FOUND, or more
	resp, err := http.Get("http://" + b.Metrics + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	body := string(raw)
	for _, m := range []string{
		`rocketmq_grpc_requests_total{code="OK",method="SendMessage"} 3`,
		`rocketmq_grpc_requests_total{code="OK",method="QueryRoute"}`,
		`rocketmq_grpc_requests_total{code="OK",method="ReceiveMessage"}`,
		`rocketmq_grpc_streams{method="Telemetry"} 2`,
		`rocketmq_grpc_receives_in_flight 0`,
		`rocketmq_remoting_broker_accepted_total`,
	} {
		require.True(t, strings.Contains(body, m), "/metrics lacks %s", m)
	}
}

// TestProgramGroupsAndTopicTypesReachTheGRPCListener: the program's group
// table (mqadmin updateSubGroup -o true) makes a group FIFO over gRPC and
// its topic table's message.type (updateTopic -a +message.type=FIFO)
// narrows the gRPC route, as on Apache's proxy.
func TestProgramGroupsAndTopicTypesReachTheGRPCListener(t *testing.T) {
	t.Parallel()
	b := rmqtest.Start(t)
	g := meta.DefaultGroup("billing")
	g.ConsumeMessageOrderly = true
	require.NoError(t, b.Server.Groups().Put(g))
	tc, err := meta.ParseCreateTopic(map[string]string{"topic": "typed", "readQueueNums": "2", "writeQueueNums": "2", "attributes": "+message.type=FIFO"}, nil)
	require.NoError(t, err)
	require.NoError(t, b.Server.TopicConfigs().Put(tc))

	c := rawClient(t, b.GRPC)
	ctx, cancel := context.WithTimeout(withClientID(context.Background(), "program-fifo"), 20*time.Second)
	defer cancel()
	push := v2.ClientType_PUSH_CONSUMER
	s, err := c.Telemetry(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType: &push, PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: &v2.Resource{Name: "billing"}}},
	}}}))
	out, err := s.Recv()
	require.NoError(t, err)
	require.True(t, out.GetSettings().GetSubscription().GetFifo(), "an orderly group is FIFO over gRPC")
	r, err := c.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "typed"}})
	require.NoError(t, err)
	require.Equal(t, []v2.MessageType{v2.MessageType_FIFO}, r.GetMessageQueues()[0].GetAcceptMessageTypes())
}
