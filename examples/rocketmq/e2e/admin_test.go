//go:build !race

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// TestV2AdminCreatesListsAndDeletesTopicsAndListsGroups is issue 30's
// finding 1 through the unchanged v2 client's admin package: CreateTopic
// makes the topic with the queues asked for, FetchAllTopicList lists it,
// DeleteTopic removes its route, GetAllSubscriptionGroup decodes. (The
// admin package returns nil whatever the broker answers: the effects are
// what is checked.)
func TestV2AdminCreatesListsAndDeletesTopicsAndListsGroups(t *testing.T) {
	b := rmqtest.StartConfig(t, server.Config{NoAutoCreate: true})
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{b.NameSrv})))
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	require.NoError(t, adm.CreateTopic(ctx, admin.WithTopicCreate("admin-topic"), admin.WithBrokerAddrCreate(b.Broker),
		admin.WithReadQueueNums(2), admin.WithWriteQueueNums(2)))
	n, ok := b.Server.Topics().Queues("admin-topic")
	require.True(t, ok, "CreateTopic created the topic")
	require.Equal(t, 2, n, "with the queues asked for")
	mqs, err := adm.FetchPublishMessageQueues(ctx, "admin-topic")
	require.NoError(t, err)
	require.Len(t, mqs, 2)

	list, err := adm.FetchAllTopicList(ctx)
	require.NoError(t, err)
	require.True(t, slices.Contains(list.TopicList, "admin-topic"), "%v", list.TopicList)

	groups, err := adm.GetAllSubscriptionGroup(ctx, b.Broker, 3*time.Second)
	require.NoError(t, err)
	require.NotNil(t, groups.SubscriptionGroupTable)

	require.NoError(t, adm.DeleteTopic(ctx, admin.WithTopicDelete("admin-topic"), admin.WithBrokerAddrDelete(b.Broker),
		admin.WithNameSrvAddr([]string{b.NameSrv})))
	_, ok = b.Server.Topics().Queues("admin-topic")
	require.False(t, ok, "DeleteTopic removed the topic")
	list, err = adm.FetchAllTopicList(ctx)
	require.NoError(t, err)
	require.False(t, slices.Contains(list.TopicList, "admin-topic"), "%v", list.TopicList)
}
