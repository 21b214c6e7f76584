// Package brokercore is an embeddable library of message-broker core
// components, modelled on the broker internals of Apache RocketMQ.
//
// A host application imports the packages it needs and wires them together
// through small interfaces; no package needs a server, a network or a config
// file, and none leaves goroutines running after Close.
//
// # The packages
//
//   - store: the append-only log (on github.com/tidwall/wal) with a per-queue
//     index and a time index.
//   - pop: pop / ack / change-invisible-time, FIFO with attemptId reentrancy,
//     long polling.
//   - lock: a lease lock table for queue ownership with fencing tokens, and a
//     client-side keeper.
//   - schedule: delay levels with generation-guarded delivery.
//   - consumer: the consumer registry keyed by channel.
//   - offset: consumer offsets with epoch-fenced resets, and the consumer's
//     one-live-pull queue table.
package brokercore
