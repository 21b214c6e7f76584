// Package brokercore is a Watermill (github.com/ThreeDotsLabs/watermill)
// Pub/Sub over brokercore's store and pop service: an embedded, persistent
// message broker in a directory, with consumer groups, at-least-once
// delivery, FIFO order and nack redelivery, proven by Watermill's universal
// Pub/Sub test suite (pubsub/tests.TestPubSub).
//
// # Model
//
// A Publisher appends each Publish call's messages to the store as one
// atomic batch: the payload is the body, every metadata entry a property,
// and the UUID the UUIDProperty (and the message key). A topic is spread over
// Config.QueuesPerTopic queues (by Config.PartitionKey, else round robin).
//
// A Subscriber long-polls the pop service for its Config.ConsumerGroup, over
// every queue of the topic, Config.BatchSize messages at a time, and hands
// them to the output channel one by one, each after the previous one's Ack
// or Nack:
//
//   - Ack → pop.Ack. The ack that advances the group's lowest unacked
//     offset commits it.
//   - Nack → pop.ChangeInvisible(Config.NackDelay): the message comes back
//     after the delay, with its attempt count (DeliveryFromContext) one
//     higher. In FIFO mode the rest of its batch goes back with it, so
//     nothing overtakes it.
//   - While a handler works, the subscriber extends the invisible time of
//     the message and of the rest of its batch every third of
//     Config.InvisibleTime, so a slow handler does not cause a redelivery.
//   - Cancelling the Subscribe ctx or closing the Subscriber ends the
//     subscription: its goroutine hands every unacked message it holds back
//     to the group at once (ChangeInvisible to the shortest allowed time),
//     closes the output channel and exits; Close waits for it. The next
//     subscriber of the group gets those messages without waiting for their
//     invisible time.
//
// Groups are independent: each sees every message of the topic. A group that
// never committed starts at the oldest retained message, so a group created
// after publishing still gets the old messages. An empty ConsumerGroup gives
// each Subscriber a fresh group of its own (like a Kafka consumer without a
// group).
//
// # Guarantees
//
// At-least-once: a message is delivered again when it was nacked, when its
// subscriber went away without acking it, or when its process died (after
// InvisibleTime, or after a restart: pop's in-flight state is in memory and
// the committed offset never passes an unacked message). Handlers must be
// idempotent. Order: with FIFO on, a queue's messages reach the group's
// subscribers strictly in order, one batch in flight at a time; with the
// default single queue per topic that is the topic's publish order. With
// FIFO off, subscribers of one group consume a queue in parallel and order
// across them is not kept.
//
// # Defaults
//
// DefaultQueuesPerTopic (1), DefaultInvisibleTime (30 s), DefaultPollTime
// (2 s), DefaultNackDelay (0: at once), DefaultBatchSize (16, at most
// MaxBatchSize 32), RetryDelay (100 ms after a failed pop). When the
// constructor opens Config.Dir itself, pop's MinInvisible clamp (1 s by
// default) is lowered to the nack delay (at least 1 ms) unless
// Config.PopOptions sets it; a caller-supplied pop service clamps NackDelay
// and the Close hand-back to its own MinInvisible.
//
// # Caveats
//
// A data directory is opened by one Backend at a time. pop's in-flight
// state (and, without a persisted pop.Offsets, the committed offsets) lives
// in memory: after a restart with the default in-memory offsets every group
// starts again at the oldest message. Each fresh group (empty
// ConsumerGroup) keeps its state in the pop service for the service's
// lifetime. Payloads handed out are copies the handler may keep or modify.
package brokercore
