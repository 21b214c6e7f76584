//go:build !race

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// TestV2AdminDeleteTopicReleasesItsDataAndOffsets: the unchanged v2
// client's admin.DeleteTopic releases the topic's data and every group's
// offsets of it (issue 30, "the route goes and the data is released"): a
// topic created again under the name delivers to a consumer from the first
// offset only what was sent after, never a message from before.
func TestV2AdminDeleteTopicReleasesItsDataAndOffsets(t *testing.T) {
	b := rmqtest.StartConfig(t, server.Config{NoAutoCreate: true})
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{b.NameSrv})))
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "v2-released"
	create := func() {
		require.NoError(t, adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(b.Broker),
			admin.WithReadQueueNums(2), admin.WithWriteQueueNums(2)))
	}
	create()
	p := newProducer(t, b.NameSrv)
	for i := range 20 {
		sendSync(t, p, primitive.NewMessage(topic, []byte("old")).WithKeys([]string{fmt.Sprint("old-", i)}))
	}
	offs := b.Server.Core().Offsets()
	for q := range 2 {
		require.NoError(t, offs.Commit("v2-released-g", topic, q, 3))
		require.NoError(t, offs.Commit("v2-other-g", topic, q, 3))
	}
	require.NoError(t, offs.Commit("v2-other-g", "TBW102", 0, 0))

	require.NoError(t, adm.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(b.Broker),
		admin.WithNameSrvAddr([]string{b.NameSrv})))
	st := b.Server.Core().Store()
	for q := range 2 {
		assert.Equal(t, st.MaxOffset(topic, q), st.MinOffset(topic, q), "queue %d holds nothing", q)
		for _, g := range []string{"v2-released-g", "v2-other-g"} {
			_, ok := offs.Committed(g, topic, q)
			assert.False(t, ok, "%s's offset of queue %d is gone", g, q)
		}
	}
	_, ok := offs.Committed("v2-other-g", "TBW102", 0)
	assert.True(t, ok, "other topics' offsets stay")

	create()
	for i := range 4 {
		sendSync(t, p, primitive.NewMessage(topic, []byte("new")).WithKeys([]string{fmt.Sprint("new-", i)}))
	}
	got := newSeen()
	c := newPushConsumer(t, b.NameSrv, "v2-released-g")
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got.add(m.GetKeys())
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
	got.waitUnique(t, 4, 30*time.Second)
	got.mu.Lock()
	defer got.mu.Unlock()
	for k := range got.m {
		assert.True(t, strings.HasPrefix(k, "new-"), "a message from before the deletion was delivered: %s", k)
	}
}
