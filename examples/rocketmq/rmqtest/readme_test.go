//go:build !race

// The official RocketMQ Go client (v2) has data races of its own (see
// e2e/doc.go), so these tests, like the e2e tests, run without -race.

package rmqtest_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

// The README's two Go snippets are these two tests, verbatim
// (TestREADMESnippetsAreTheseTests keeps them so): go test compiles and
// runs exactly what the README shows.

func TestRemotingV2(t *testing.T) {
	b := rmqtest.Start(t) // free loopback ports, data in t.TempDir(), stopped on t.Cleanup
	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{b.NameSrv}), producer.WithInstanceName("orders-p"))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	res, err := p.SendSync(context.Background(), primitive.NewMessage("orders", []byte("paid")))
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status)

	got := make(chan string, 1)
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{b.NameSrv}), consumer.WithGroupName("billing"),
		consumer.WithInstance("orders-c"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	err = c.Subscribe("orders", consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			select {
			case got <- string(m.Body):
			default:
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	require.NoError(t, err)
	require.NoError(t, c.Start())
	defer c.Shutdown()
	select {
	case body := <-got:
		require.Equal(t, "paid", body)
	case <-time.After(30 * time.Second):
		t.Fatal("nothing received")
	}
}

func TestGRPCV5(t *testing.T) {
	b := rmqtest.Start(t) // b.GRPC: the gRPC endpoint, TLS or plaintext on one port
	cfg := &rmq.Config{Endpoint: b.GRPC, ConsumerGroup: "billing-fifo", Credentials: &credentials.SessionCredentials{}}
	p, err := rmq.NewProducer(cfg, rmq.WithTopics("orders"))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.GracefulStop()
	for _, body := range []string{"created", "paid"} {
		m := &rmq.Message{Topic: "orders", Body: []byte(body)}
		m.SetMessageGroup("order-1") // one message group: one queue, in order
		_, err := p.Send(context.Background(), m)
		require.NoError(t, err)
	}

	// A group named *-fifo consumes in order: one batch per queue at a time.
	c, err := rmq.NewSimpleConsumer(cfg, rmq.WithSimpleAwaitDuration(5*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{"orders": rmq.SUB_ALL}))
	require.NoError(t, err)
	require.NoError(t, c.Start())
	defer c.GracefulStop()
	var bodies []string
	for len(bodies) < 2 {
		mvs, err := c.Receive(context.Background(), 16, 30*time.Second)
		require.NoError(t, err)
		for _, mv := range mvs {
			bodies = append(bodies, string(mv.GetBody()))
			require.NoError(t, c.Ack(context.Background(), mv))
		}
	}
	require.Equal(t, []string{"created", "paid"}, bodies)
}

// TestREADMESnippetsAreTheseTests fails when a Go snippet of ../README.md
// is not, character for character, one of the tests of this file.
func TestREADMESnippetsAreTheseTests(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.Len(t, blocks, 2, "the README's Go snippets: the v2 and the v5 client")
	for i, want := range []string{"func TestRemotingV2(", "func TestGRPCV5("} {
		require.True(t, strings.HasPrefix(blocks[i][1], want), "snippet %d should be %s…", i+1, want)
		require.Contains(t, string(src), blocks[i][1], "README snippet %d is not a test of readme_test.go", i+1)
	}
}
