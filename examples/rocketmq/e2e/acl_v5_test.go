//go:build !race

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// v5ACL: "app" publishes and consumes orders* in group workers, except
// orders-audit (Deny over Allow).
const v5ACL = `{
  "users": [{"accessKey": "app", "secretKey": "s3cret"}],
  "rules": [
    {"user": "app", "resources": ["Topic:orders*", "Group:workers"], "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"user": "app", "resources": ["Topic:orders-audit"], "actions": ["All"], "decision": "Deny"}
  ]
}`

var v5LogOnce sync.Once

// quietV5 sends the v5 client's log to a temporary directory (it writes
// under $HOME by default).
func quietV5(t *testing.T) {
	v5LogOnce.Do(func() {
		dir, err := os.MkdirTemp("", "e2e-v5-logs")
		require.NoError(t, err)
		_ = os.Setenv("rocketmq.client.logRoot", dir)
		_ = os.Setenv("rocketmq.client.logLevel", "error")
		_ = os.Setenv("mq.consoleAppender.enabled", "false")
		rmq.ResetLogger()
	})
}

// skewClock is the broker's ACL clock, moved by the test.
type skewClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *skewClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *skewClock) Set(d time.Duration) {
	c.mu.Lock()
	c.off = d
	c.mu.Unlock()
}

func v5Config(endpoint, group, ak, sk string) *rmq.Config {
	return &rmq.Config{Endpoint: endpoint, ConsumerGroup: group,
		Credentials: &credentials.SessionCredentials{AccessKey: ak, AccessSecret: sk}}
}

func v5Start(t *testing.T, start func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- start() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		return errors.New("Start did not return within 20 s")
	}
}

func TestACLV5ClientAllowedAndRefused(t *testing.T) {
	quietV5(t)
	clk := &skewClock{}
	path := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(path, []byte(v5ACL), 0o600))
	az, err := acl.Open(path, acl.Options{Now: clk.Now, MaxSkew: time.Minute})
	require.NoError(t, err)
	b := rmqtest.StartConfig(t, server.Config{ACL: az})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	p, err := rmq.NewProducer(v5Config(b.GRPC, "", "app", "s3cret"), rmq.WithTopics("orders"))
	require.NoError(t, err)
	require.NoError(t, v5Start(t, p.Start))
	t.Cleanup(func() { _ = p.GracefulStop() })
	_, err = p.Send(ctx, &rmq.Message{Topic: "orders", Body: []byte("hello")})
	require.NoError(t, err)

	var rs *rmq.ErrRpcStatus
	for _, topic := range []string{"payroll", "orders-audit"} {
		_, err = p.Send(ctx, &rmq.Message{Topic: topic, Body: []byte("no")})
		require.ErrorAs(t, err, &rs, topic)
		assert.EqualValues(t, 40300, rs.Code, "FORBIDDEN for %s", topic)
		assert.Zero(t, stored(b, topic))
	}

	sc, err := rmq.NewSimpleConsumer(v5Config(b.GRPC, "workers", "app", "s3cret"),
		rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{"orders": rmq.SUB_ALL}))
	require.NoError(t, err)
	require.NoError(t, v5Start(t, sc.Start))
	t.Cleanup(func() { _ = sc.GracefulStop() })
	var got []*rmq.MessageView
	for ctx.Err() == nil && len(got) == 0 {
		got, err = sc.Receive(ctx, 1, 20*time.Second)
		if errors.As(err, &rs) && rs.Code == 40401 {
			err = nil
		}
		require.NoError(t, err)
	}
	require.Len(t, got, 1)
	require.NoError(t, sc.Ack(ctx, got[0]))

	for name, cfg := range map[string]*rmq.Config{
		"wrong secret":     v5Config(b.GRPC, "", "app", "guess"),
		"unknown key":      v5Config(b.GRPC, "", "ghost", "s3cret"),
		"no signature":     {Endpoint: b.GRPC},
		"empty credential": {Endpoint: b.GRPC, Credentials: &credentials.SessionCredentials{}},
	} {
		bad, err := rmq.NewProducer(cfg, rmq.WithTopics("orders"))
		require.NoError(t, err, name)
		err = v5Start(t, bad.Start)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "UNAUTHORIZED", name)
	}

	// A push consumer of a group outside the rules: its settings sync is
	// refused, so it cannot start.
	pc, err := rmq.NewPushConsumer(v5Config(b.GRPC, "readers", "app", "s3cret"),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{"orders": rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: func(*rmq.MessageView) rmq.ConsumerResult { return rmq.SUCCESS }}))
	require.NoError(t, err)
	assert.Error(t, v5Start(t, pc.Start))

	// The broker's clock two minutes ahead: every fresh signature of the
	// client is too old for the one-minute window.
	clk.Set(2 * time.Minute)
	_, err = p.Send(ctx, &rmq.Message{Topic: "orders", Body: []byte("late")})
	require.ErrorAs(t, err, &rs)
	assert.EqualValues(t, 40100, rs.Code)
	clk.Set(0)
	assert.EqualValues(t, 1, stored(b, "orders"), "only the allowed send was stored")

	// A reload takes effect without a restart.
	denied := `{"users": [{"accessKey": "app", "secretKey": "s3cret"}], "rules": [
	  {"user": "app", "resources": ["*"], "actions": ["All"], "decision": "Deny"}]}`
	require.NoError(t, os.WriteFile(path, []byte(denied), 0o600))
	require.NoError(t, az.ReloadFile(path))
	_, err = p.Send(ctx, &rmq.Message{Topic: "orders", Body: []byte("after reload")})
	require.ErrorAs(t, err, &rs)
	assert.EqualValues(t, 40300, rs.Code)
	assert.EqualValues(t, 1, stored(b, "orders"))
}
