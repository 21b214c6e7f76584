package grpcapi_test

import (
	"context"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

func asClient(ctx context.Context, id string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", id)
}

func consumerHeartbeat(ctx context.Context, t *testing.T, c v2.MessagingServiceClient, group string) v2.Code {
	t.Helper()
	resp, err := c.Heartbeat(ctx, &v2.HeartbeatRequest{Group: &v2.Resource{Name: group}, ClientType: v2.ClientType_PUSH_CONSUMER})
	require.NoError(t, err)
	return resp.GetStatus().GetCode()
}

func clientIDs(b *broker, group string) []string {
	var ids []string
	for _, c := range b.Consumers().Clients(group) {
		ids = append(ids, c.ClientID)
	}
	return ids
}

// TestClientIDBoundToItsConnection: a client id belongs to the connection
// that registered it. Another connection that says it is "A" can neither
// unregister A (NotifyClientTermination) nor take its registration over
// (Heartbeat): FORBIDDEN, and A stays registered. Once A's connection is
// gone, the id is free again.
func TestClientIDBoundToItsConnection(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctxA := asClient(ctx, "A")

	a := rawClient(t, b.endpoint)
	require.Equal(t, v2.Code_OK, consumerHeartbeat(ctxA, t, a, "g"))
	require.Equal(t, []string{"A"}, clientIDs(b, "g"))

	spoofer := rawClient(t, b.endpoint)
	resp, err := spoofer.NotifyClientTermination(ctxA, &v2.NotifyClientTerminationRequest{Group: &v2.Resource{Name: "g"}})
	require.NoError(t, err)
	assert.Equal(t, v2.Code_FORBIDDEN, resp.GetStatus().GetCode())
	assert.Equal(t, []string{"A"}, clientIDs(b, "g"), "a stranger unregistered A")

	assert.Equal(t, v2.Code_FORBIDDEN, consumerHeartbeat(ctxA, t, spoofer, "g2"))
	assert.Empty(t, clientIDs(b, "g2"), "a stranger registered as A")

	// A itself still may: heartbeats go on, and its goodbye is heard.
	require.Equal(t, v2.Code_OK, consumerHeartbeat(ctxA, t, a, "g"))
	resp, err = a.NotifyClientTermination(ctxA, &v2.NotifyClientTerminationRequest{Group: &v2.Resource{Name: "g"}})
	require.NoError(t, err)
	assert.Equal(t, v2.Code_OK, resp.GetStatus().GetCode())
	assert.Empty(t, clientIDs(b, "g"))
}

// TestClientIDFreeOnceItsConnectionIsGone: a client that reconnects (a new
// connection, the old one closed) registers its id again.
func TestClientIDFreeOnceItsConnectionIsGone(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctxA := asClient(ctx, "A")

	cc, err := grpc.NewClient(b.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, consumerHeartbeat(ctxA, t, v2.NewMessagingServiceClient(cc), "g"))
	require.NoError(t, cc.Close())

	again := rawClient(t, b.endpoint)
	// The server learns of the closed connection asynchronously: the
	// refusal lasts until it has (no timing margin: wait for the event).
	require.Eventually(t, func() bool { return consumerHeartbeat(ctxA, t, again, "g") == v2.Code_OK }, 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"A"}, clientIDs(b, "g"))
}

// TestClientIDBoundToItsAccessKey: with ACL, a client id also belongs to
// the access key that registered it: another user allowed on the same
// group, even on the same connection (a proxy's), may neither unregister
// it nor register as it.
func TestClientIDBoundToItsAccessKey(t *testing.T) {
	t.Parallel()
	cfg, err := acl.Parse([]byte(`{
  "users": [{"accessKey": "one", "secretKey": "s1"}, {"accessKey": "two", "secretKey": "s2"}],
  "rules": [
    {"user": "one", "resources": ["Group:g"], "actions": ["Sub"], "decision": "Allow"},
    {"user": "two", "resources": ["Group:g"], "actions": ["Sub"], "decision": "Allow"}
  ]
}`))
	require.NoError(t, err)
	az, err := acl.New(cfg, acl.Options{})
	require.NoError(t, err)
	b := startBroker(t, grpcapi.Options{ACL: az})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	as := func(ak, sk string) context.Context {
		dt := time.Now().UTC().Format(acl.V5DateTimeLayout)
		return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "A", acl.V5DateTimeHeader, dt,
			acl.V5AuthorizationHeader, acl.V5Authorization(ak, sk, dt))
	}

	c := rawClient(t, b.endpoint) // one connection for both users
	require.Equal(t, v2.Code_OK, consumerHeartbeat(as("one", "s1"), t, c, "g"))
	require.Equal(t, []string{"A"}, clientIDs(b, "g"))

	resp, err := c.NotifyClientTermination(as("two", "s2"), &v2.NotifyClientTerminationRequest{Group: &v2.Resource{Name: "g"}})
	require.NoError(t, err)
	assert.Equal(t, v2.Code_FORBIDDEN, resp.GetStatus().GetCode())
	assert.Equal(t, []string{"A"}, clientIDs(b, "g"), "another user unregistered A")
	assert.Equal(t, v2.Code_FORBIDDEN, consumerHeartbeat(as("two", "s2"), t, c, "g"))

	resp, err = c.NotifyClientTermination(as("one", "s1"), &v2.NotifyClientTerminationRequest{Group: &v2.Resource{Name: "g"}})
	require.NoError(t, err)
	assert.Equal(t, v2.Code_OK, resp.GetStatus().GetCode())
	assert.Empty(t, clientIDs(b, "g"))
}

// TestClientIDTelemetryFromAnotherConnectionRegistersNothing: a Telemetry
// stream that says it is A, from a connection other than A's, is answered
// but does not put A in its group.
func TestClientIDTelemetryFromAnotherConnectionRegistersNothing(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctxA := asClient(ctx, "A")
	require.Equal(t, v2.Code_OK, consumerHeartbeat(ctxA, t, rawClient(t, b.endpoint), "g"))

	stream, err := rawClient(t, b.endpoint).Telemetry(ctxA)
	require.NoError(t, err)
	settings := &v2.Settings{ClientType: v2.ClientType_PUSH_CONSUMER.Enum(), PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{
		Group: &v2.Resource{Name: "g2"}, Subscriptions: []*v2.SubscriptionEntry{{Topic: &v2.Resource{Name: "t"}, Expression: &v2.FilterExpression{Expression: "*"}}},
	}}}
	require.NoError(t, stream.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: settings}}))
	answer, err := stream.Recv() // after the settings were handled
	require.NoError(t, err)
	require.NotNil(t, answer.GetSettings())
	assert.Empty(t, clientIDs(b, "g2"), "a stranger's Telemetry registered A")
	assert.Equal(t, []string{"A"}, clientIDs(b, "g"))
	require.NoError(t, stream.CloseSend())
}

// TestClientIDFreeOnceItsOwnerIsSilent: a client whose old connection the
// server still thinks open (half-open after a network cut) gets its id
// back once the old connection has been silent for ClientExpiry.
func TestClientIDFreeOnceItsOwnerIsSilent(t *testing.T) {
	t.Parallel()
	clk := &aclClock{}
	b := startBroker(t, grpcapi.Options{Now: clk.Now})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctxA := asClient(ctx, "A")
	require.Equal(t, v2.Code_OK, consumerHeartbeat(ctxA, t, rawClient(t, b.endpoint), "g"))

	again := rawClient(t, b.endpoint)
	require.Equal(t, v2.Code_FORBIDDEN, consumerHeartbeat(ctxA, t, again, "g"))
	clk.Advance(grpcapi.DefaultClientExpiry - time.Second)
	require.Equal(t, v2.Code_FORBIDDEN, consumerHeartbeat(ctxA, t, again, "g"), "the owner is not silent for long enough yet")
	clk.Advance(2 * time.Second)
	require.Equal(t, v2.Code_OK, consumerHeartbeat(ctxA, t, again, "g"))
	assert.Equal(t, []string{"A"}, clientIDs(b, "g"))
}
