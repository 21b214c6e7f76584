// Package pop implements pop consumption over a message log: Pop hands out
// messages that stay invisible until acked or until their invisible time
// ends, Ack settles them through a receipt handle, ChangeInvisible extends
// (or shortens) a delivery, and FIFO pops with an attempt id give strictly
// ordered, reentrant batches. Long polling, dead letters and epoch-fenced
// offset commits are built in.
//
// # Model
//
// A Service reads a Source (*store.Store satisfies it) and commits through
// Offsets (*offset.Manager satisfies it; nil = an in-memory MemoryOffsets).
// For every (group, topic, queue) it keeps, in memory, the next offset to
// pop and one small entry per popped offset not yet settled: its
// visible-at time, attempt count and delivery generation — offsets, not
// messages (a redelivery reads the body again), ordered by visible time
// (per-duration lanes, a heap as fallback: lanes.go).
// Those decisions are plain methods taking `now`: core.go plans a pop's
// reads and applies what was read (queue.go, fifo.go). The driver (pop.go,
// round.go, ack.go, longpoll.go) adds the group@topic lock, the Source
// reads and the Offsets commits outside the mutex, the waits and a
// background loop that only wakes waiters.
//
//   - A group with no committed offset starts at the queue's MinOffset
//     (Options.InitialOffset = Latest: at its MaxOffset). A topic or queue
//     with nothing in it yet is not an error: the pop long-polls.
//   - Non-FIFO: a popped message is invisible for Request.Invisible; if not
//     acked by then it is delivered again with Attempts+1. After
//     Options.MaxAttempts deliveries, when the last invisible time ends, it
//     goes to Options.DeadLetter (a nil DeadLetter: it keeps being
//     redelivered); until DeadLetter returns nil the message is kept and
//     the call retried every Options.DeadLetterRetry — unless its error
//     says the refusal is for good (ErrDeadLetterRefused, store.ErrInvalid):
//     then the message is settled without a dead letter, logged at ERROR
//     and counted (Stats.DeadLetterDropped), so it cannot hold its queue's
//     offset back forever.
//   - FIFO: each queue has at most one in-flight batch, always its lowest
//     unacked messages. While any member is invisible, pops with another
//     attempt id get nothing from the queue; a pop with the batch's attempt
//     id gets the same members again with fresh handles and no attempt
//     counted (older handles go stale). When the batch's invisible time
//     ends it is delivered again with Attempts+1 to the next FIFO pop.
//   - Every visibility decision reads Options.Now at the call, so a test
//     that moves an injected clock and pops again sees the effect at once.
//   - The ack that advances the lowest unacked offset commits it, fenced
//     with the epoch the queue's state was built under, before Ack returns.
//     Each pop compares the Offsets epoch: after a reset the queue's state
//     is dropped and popping restarts at the committed offset; handles from
//     before it are stale and cannot commit over the reset.
//   - Nothing popped and unacked is lost: the committed offset never passes
//     an unacked message, so after a restart a new Service over the same
//     Source and Offsets delivers every such message again (at-least-once;
//     messages acked above the committed offset are delivered again too,
//     and attempt counts restart at 1).
//
// # The group@topic lock
//
// Pops of one group@topic are serialized by a lock held across the Source
// read. A contended non-FIFO pop never waits on it: with Poll > 0 it
// long-polls (woken when the lock is released), otherwise it returns empty.
// A FIFO pop with an attempt id queues for the lock and sleeps until the
// holder hands it over — no spin — bounded by its ctx and Poll, or
// Options.LockWait when Poll is 0; then it re-checks the in-flight state.
// If the wait runs out it returns ErrLockTimeout, never an empty success,
// so the client keeps its attempt id (apache/rocketmq#10827). Holds carry
// tokens, so an unlock never releases another holder's lock, and the
// expiry backstop (Options.LockExpiry) only frees a hold whose request is
// over (apache/rocketmq#10750).
//
// # Tag filters
//
// Request.Filter is a subscription expression as RocketMQ clients send it,
// parsed by ParseFilter — the one grammar every front-end uses, with Apache
// RocketMQ's rules: "" and "*" match every message, "A || B || C" a message
// whose Tags is one of the tags (parts trimmed, empty parts dropped; "*"
// inside a list is a literal tag); an expression naming no tag ("||") is
// ErrInvalid with the reason. A message the filter rejects is settled for the group
// without being delivered (Stats.Filtered): the committed offset moves
// past it once everything before it is settled, and a FIFO queue is never
// blocked by it. The filter is the group's subscription on the topic: a
// pop with a different one replaces it (logged, Stats.FilterChanges) and
// what the old one skipped is never delivered. A pop whose reads found
// only rejected messages reads on at once (a long poll until its Poll
// ends, a Poll 0 pop for up to 16 reads), so a flood of non-matching
// messages never makes a long poll answer empty early.
//
// # Receipt handles
//
// Handles are MAC'd strings (AES-128 CBC-MAC over fixed-length blocks,
// keys derived from Options.HandleKey) carrying group, topic, queue,
// offset and delivery generation. A malformed or
// forged handle gives ErrBadHandle; a genuine one whose delivery was
// superseded (acked, re-popped, redelivered, changed, reset, or issued
// before a restart) gives ErrStaleHandle. Nothing changes on either.
//
// # Long polling
//
// Waiters wake on arrival: New subscribes Arrived to its Source when the
// Source can Subscribe (as *store.Store can) and Close cancels it; a host
// composing another Source calls Arrived itself. They also wake on
// an ack that unblocks a FIFO queue, on the group@topic lock being
// released, and when an invisible time or FIFO block ends (checked every
// Options.Tick). Options.MaxWaitersPerKey and Options.MaxWaiters cap them
// (ErrTooManyWaiters). Close wakes every waiter.
//
// # Closing
//
// After Close of the Service, or of its Source when the Source has a
// Done() <-chan struct{} (as *store.Store has), every call answers an error
// wrapping ErrClosed and long polls end with it.
//
// # Defaults
//
// A zero Request.Max means 1 and a zero Request.Invisible means
// DefaultInvisible (60 s). DefaultMaxAttempts (16), DefaultMinInvisible
// (1 s) and DefaultMaxInvisible (12 h) — Request.Invisible is clamped into
// them and Result.Invisible/Result.Clamped show it — DefaultLockWait (3 s),
// DefaultLockExpiry (2 min), DefaultMaxWaitersPerKey (1024),
// DefaultMaxWaiters (65536), DefaultTick (100 ms), DefaultDeadLetterRetry
// (1 s). Request.Max is 0..MaxBatch (32).
//
// # Ownership and caveats
//
// Messages returned by Pop are the Source's (for *store.Store, the
// caller's own copies); the Service keeps no reference to them. In-flight
// state lives in memory, about 100 bytes per popped, unsettled offset; a
// host bounds it by its consumers' Max and invisible times. An in-flight
// message that retention removes from the log before it is acked cannot be
// delivered again: it is settled and logged at WARN. All methods are safe
// for concurrent use.
package pop
