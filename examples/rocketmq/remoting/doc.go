// Package remoting speaks Apache RocketMQ's remoting protocol over
// brokercore: the frame codec (4-byte length, 4-byte header length whose
// high byte is the serialize type, a JSON or ROCKETMQ binary header, the
// body), a connection server that serves each request on its own goroutine
// (or, for the cheap ones an InlineHandler names, on the connection's read
// loop, their answers written once per burst of input; those a
// BatchHandler names, the sends under -flush async, are served together,
// one store append per burst) and answers by opaque in any order, the name
// server (routes of the one
// broker, TBW102) and the broker's request handlers, which map every request
// onto a brokercore package:
//
//	SEND_MESSAGE, _V2, SEND_BATCH_MESSAGE  store.Append (async flush: one per read burst); DELAY → schedule.Delay, timers → schedule.At
//	PULL_MESSAGE                           store.Read + tag filter from consumer.Registry, long poll on store.Subscribe
//	HEART_BEAT, UNREGISTER_CLIENT          consumer.Registry (connection = channel, close = ChannelClosed)
//	QUERY/UPDATE_CONSUMER_OFFSET           offset.Manager (Position, CommitFenced per connection epoch)
//	GET_MAX/MIN_OFFSET, SEARCH_OFFSET_...  store.MaxOffset, MinOffset, OffsetAt
//	LOCK/UNLOCK_BATCH_MQ                   lock.Table
//	CONSUMER_SEND_MSG_BACK                 %RETRY%<group> via schedule.Delay, %DLQ%<group>
//
// Decoding never panics (FuzzDecode); a header that cannot be decoded is
// answered with an error, and only broken framing closes a connection.
package remoting
