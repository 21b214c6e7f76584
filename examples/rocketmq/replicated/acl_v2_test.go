//go:build !race

package replicated

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"
)

func v2Producer(t *testing.T, ns []string, name string, creds primitive.Credentials, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	opts = append([]producer.Option{producer.WithNameServer(ns), producer.WithGroupName("pg-acl"),
		producer.WithInstanceName(t.Name() + "-" + name), producer.WithCredentials(creds)}, opts...)
	p, err := rocketmq.NewProducer(opts...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// The official v2 producer and push consumer with credentials on a
// three-node cluster with ACL: the allowed user's sends (spread by the
// client over the leader's and the followers' write queues, so some are
// forwarded) are all delivered to its consumer; a wrong secret, an unknown
// key and a user without Pub are refused (the latter by the broker, with
// NO_PERMISSION 16), and none of theirs is stored.
func TestACLV2ClientOnAReplicatedCluster(t *testing.T) {
	c := startCluster(t, 3, withACL(t))
	c.leader(30 * time.Second)
	ns := c.nameServers()
	const topic = "orders"
	p := v2Producer(t, ns, "app", primitive.Credentials{AccessKey: "app", SecretKey: "app-secret"}, producer.WithRetry(2))
	var keys []string
	for i := range 24 {
		k := fmt.Sprintf("k%02d", i)
		require.NoError(t, send(p, topic, k, time.Now().Add(30*time.Second)))
		keys = append(keys, k)
	}
	_, seen := startCounting(t, ns, "workers", t.Name()+"-c", topic, nil,
		consumer.WithCredentials(primitive.Credentials{AccessKey: "app", SecretKey: "app-secret"}))
	seen.waitAll(t, keys, 60*time.Second)
	stored := func() int64 {
		var n int64
		for q := range DefaultQueueNums {
			n += c.nodes[c.leader(30*time.Second)].Node().Store().MaxOffset(topic, q)
		}
		return n
	}
	require.EqualValues(t, len(keys), stored())

	for name, creds := range map[string]primitive.Credentials{
		"wrong secret": {AccessKey: "app", SecretKey: "guess"},
		"unknown key":  {AccessKey: "ghost", SecretKey: "app-secret"},
		"no Pub":       {AccessKey: "reader", SecretKey: "r3ader-secret"},
	} {
		bad := v2Producer(t, ns, name, creds, producer.WithRetry(0))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := bad.SendSync(ctx, primitive.NewMessage(topic, []byte("refused")))
		cancel()
		require.Error(t, err, name)
		t.Logf("%s: %v", name, err)
		if name == "no Pub" {
			require.ErrorContains(t, err, "CODE: 16", "the broker's NO_PERMISSION")
		}
	}
	require.EqualValues(t, len(keys), stored(), "nothing of the refused producers was stored")
}
