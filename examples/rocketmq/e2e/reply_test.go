//go:build !race

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

// TestV2RequestGetsTheReply is issue 30's request/reply finding with the
// unchanged v2 client: Producer.Request's message carries CLUSTER when
// consumed, the replier's CreateReplyMessage works, its SEND_REPLY_MESSAGE
// is accepted and the broker pushes the reply to the requester
// (PUSH_REPLY_MESSAGE_TO_CLIENT), so Request returns it.
func TestV2RequestGetsTheReply(t *testing.T) {
	b := rmqtest.Start(t)
	replier := newProducer(t, b.NameSrv)
	c := newPushConsumer(t, b.NameSrv, "reply-g")
	// The listener reports to the test body, never to t: it may run after
	// the test returned, until the consumer's cleanup.
	errs := make(chan error, 16)
	require.NoError(t, c.Subscribe("rpc", consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			reply, err := consumer.CreateReplyMessage(m, nil)
			if err == nil {
				reply.Body = append([]byte("re: "), m.Body...)
				_, err = replier.SendSync(ctx, reply)
			}
			if err != nil {
				select {
				case errs <- fmt.Errorf("reply to %s (CLUSTER %q): %w", m.MsgId, m.GetProperty(primitive.PropertyCluster), err):
				default:
				}
			}
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })

	requester := newProducer(t, b.NameSrv)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	got, err := requester.Request(ctx, 30*time.Second, primitive.NewMessage("rpc", []byte("ping")))
	select {
	case e := <-errs:
		require.NoError(t, e)
	default:
	}
	require.NoError(t, err)
	require.Equal(t, "re: ping", string(got.Body))
}
