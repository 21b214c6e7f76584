// Package consumer is a consumer registry keyed by channel, after RocketMQ's
// ConsumerManager.
//
// # Model
//
// A consumer group has clients, one per channel (connection) on which the
// group registered, and subscriptions, one per topic. The Registry keeps
// three tables:
//
//   - the group table: group -> clients (by channel id) and subscriptions;
//   - the channel attribute: channel -> groups registered on it, which
//     ChannelClosed reads so a closed connection is cleaned up in time
//     proportional to its own groups, not to the number of channels;
//   - the topic table: topic -> groups subscribed to it (GroupsConsuming).
//
// # Guarantees
//
// One internal function writes all three tables (and the heartbeat index)
// together, under one lock. Register, RegisterWithoutSub, Unregister,
// ChannelClosed and Scan all go through it, so no path can add a client
// without its channel attribute or remove a group without cleaning the topic
// table. Consequently ChannelClosed(ch) removes exactly what a full scan of
// the group table for ch would. (The RocketMQ bug this rules out: the
// heartbeat path without subscriptions did not write the channel attribute,
// so the fast close path left dead consumers for 120 s.)
//
// Liveness (Client.LastSeen) is kept per (group, channel) and refreshed only
// by a registration of that group on that channel; Scan expires a
// registration silent for longer than Options.ChannelExpiry. A heartbeat of a
// known, unchanged client (RegisterWithoutSub) touches only that entry,
// without the registry lock; a heartbeat racing with Scan either refreshes
// the entry before it is judged or re-registers it.
//
// Subscriptions belong to the group: Register merges its list by version (a
// higher Version replaces, an equal or lower one is ignored; topics absent
// from the list are dropped, as in RocketMQ), and they are removed with the
// group's last client.
//
// Every removal of a client fires EventClientUnregister followed by
// EventChange; removal of the last client then fires EventUnregister. A
// new group fires EventRegister, a new client EventClientRegister and then
// EventChange. EventChange fires only when the client set changed. Events
// reach Options.OnEvent one at a time, in the order the changes were made,
// never while a lock is held, so a handler may call back into the Registry
// (its own changes are delivered after it returns). They are delivered on
// the goroutine of a registry call: normally the call that caused them,
// before it returns; if another goroutine is delivering at that moment, that
// goroutine delivers them. A handler slower than the rate of changes keeps
// the delivering call busy until the queue is empty; keep handlers short.
//
// Bad input (empty group, channel id or client id, empty topic) returns an
// error wrapping ErrInvalid and changes nothing (logged at DEBUG: the
// caller has the error). After Close, changes answer ErrClosed and reads
// keep answering from memory.
//
// # Defaults
//
// DefaultChannelExpiry (120 s) when Options.ChannelExpiry is zero; Now
// defaults to time.Now, Logger to a discarding logger (one withDefaults in
// options.go). The Registry starts no goroutines; the host calls Scan
// periodically (brokercore.Open does, every DefaultConsumerScanEvery).
//
// # Ownership
//
// Every slice returned (Clients, Subscriptions, GroupsOf, GroupsConsuming,
// Groups, ChannelClosed, Event.Clients) is a fresh copy the caller owns.
// Subscription slices passed to Register are copied.
package consumer
