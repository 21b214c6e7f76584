// Package broker is a RocketMQ broker's request handling over brokercore:
// Broker is a transport.Handler (with InlineHandler, BatchHandler and
// ConnObserver) that maps every request onto a brokercore package:
//
//	SEND_MESSAGE, _V2, SEND_BATCH_MESSAGE  store.Append (async flush: one per read burst); DELAY → schedule.Delay, timers → schedule.At
//	PULL_MESSAGE                           store.Read + tag filter from consumer.Registry, long poll on store.Subscribe
//	HEART_BEAT, UNREGISTER_CLIENT          consumer.Registry (connection = channel, close = ChannelClosed)
//	QUERY/UPDATE_CONSUMER_OFFSET           offset.Manager (Position, CommitFenced per connection epoch)
//	GET_MAX/MIN_OFFSET, SEARCH_OFFSET_...  store.MaxOffset, MinOffset, OffsetAt
//	LOCK/UNLOCK_BATCH_MQ                   lock.Table
//	CONSUMER_SEND_MSG_BACK                 %RETRY%<group> via schedule.Delay, %DLQ%<group>
//
// A request code is served by the handler its entry in Broker.Serve's
// switch (broker.go) names; Topics is the topic table it shares with the
// name server. Sends are checked with brokercore.CheckProduce, so nothing
// is stored that the scheduler, a retry or a consumer cannot deliver.
package broker
