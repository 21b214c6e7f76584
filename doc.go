// Package brokercore is an embeddable library of message-broker core
// components, modelled on the broker internals of Apache RocketMQ.
//
// A host application — a custom Go messaging service, a test suite, a
// bespoke broker — imports the packages it needs and wires them together
// through small interfaces. No package needs a server, a network or a config
// file, and none leaves a goroutine running after its Close or Stop.
//
// The library exists because broker internals keep failing in the same few
// ways: two code paths that must keep state in step and don't, services
// restarted under a still-running task, retries that lose their place to an
// unrelated lock. Each package makes one such failure impossible by
// construction, and its tests replay the field report that found it.
//
// # The packages
//
//   - [github.com/brokercore/brokercore/store]: the append-only log on
//     github.com/tidwall/wal — atomic batches, CRC-32C records, torn-tail
//     repair on Open, group commit, a per-queue index and a time index kept in
//     files (bounded memory), retention of whole segments.
//   - [github.com/brokercore/brokercore/pop]: pop / ack / change-invisible-time
//     over any log that satisfies pop.Source; FIFO batches with attemptId
//     reentrancy that waits for the group@topic lock instead of coming back
//     empty; long polling; dead letters; epoch-fenced commits.
//   - [github.com/brokercore/brokercore/lock]: a lease lock table for queue
//     ownership with fencing tokens, and a Keeper that renews at no more than
//     a third of the lease and unlocks everything on Close.
//   - [github.com/brokercore/brokercore/schedule]: delay levels; every delivery
//     task belongs to a generation, so a stop/start flap cannot deliver a
//     level twice.
//   - [github.com/brokercore/brokercore/consumer]: the consumer registry keyed
//     by channel; one mutation path writes the group, channel and topic tables
//     together.
//   - [github.com/brokercore/brokercore/offset]: consumer offsets with
//     epoch-fenced resets (broker side), and the consumer's queue table in
//     which a reset drops the old process queue atomically (no orphan pulls).
//
// # How the pieces compose
//
// The store is the foundation; pop, schedule and offset each declare the few
// store methods they need as an interface of their own, which *store.Store
// satisfies, so a host may substitute its own log:
//
//	st, _ := store.Open(dir, store.Options{OnAppend: func(t string, q int, _ int64) { svc.Arrived(t, q) }})
//	offs, _ := offset.Open(offset.Options{Path: filepath.Join(dir, "offsets")})
//	svc := pop.New(st, pop.Options{Offsets: offs})       // *offset.Manager satisfies pop.Offsets
//	sch, _ := schedule.New(st, schedule.Options{})        // *store.Store satisfies schedule.Log
//	_ = sch.Start()
//	offs.ResetToTime(group, topic, q, t, st)              // *store.Store satisfies offset.TimeIndex
//
// The arrival hook store.Options.OnAppend wakes pop's long polls; an offset
// reset through the offset.Manager bumps the queue's epoch, which pop sees on
// its next pop of that queue. lock and consumer stand alone: a broker uses
// lock.Table for orderly consumers' queue ownership and consumer.Registry for
// heartbeats, calling Registry.ChannelClosed when a connection closes.
// Shutdown runs in reverse: pop.Close wakes long polls, schedule's Stop ends
// its generation, offset's Close flushes, the store closes last.
//
// examples/broker composes all six into a small HTTP broker;
// examples/embedtest shows the store and pop service embedded in a unit test.
//
// # Conventions
//
// Every package follows the same rules: the zero Options is a working default
// (each default is a named constant); Options.Now injects the clock that every
// expiry, due time and lease decision reads, so tests move time instead of
// sleeping; Options.Logger (a *slog.Logger, nil = discard) receives
// contention, takeover, expiry, recovery and every rejected request with its
// keys; errors are exported sentinels wrapped with %w; bad input changes
// nothing; Stats returns a plain struct of counters; everything is safe for
// concurrent use.
package brokercore
