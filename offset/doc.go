// Package offset keeps consumer offsets on the broker side, with an epoch per
// (group, topic, queue) that fences commits across resets, and gives the
// consumer side a queue table in which a reset can never leave an orphan pull.
//
// # Broker side: Manager
//
// A Manager maps (group, topic, queue) to a committed offset (the next
// offset to consume) and an epoch. Reset sets the offset and bumps the epoch;
// from then on CommitFenced with any other epoch returns ErrStaleEpoch and
// changes nothing, so a consumer (or pop service) that has not seen the reset
// cannot write its old progress back over it. Plain Commit is for hosts that
// do not use epochs, and it never loses to one that does: on a key whose
// epoch a fenced committer has read (Epoch, Position) or used
// (CommitFenced) — a queue a pop service serves — Commit is applied as a
// reset (epoch bumped, file written before it returns), so the fenced
// committer's older progress is refused instead of being written back over
// the commit, and it restarts at the committed offset. Elsewhere a plain
// commit is one atomic swap; one that moves an offset backwards is accepted,
// counted and logged.
//
// With Options.Bounds (brokercore.Open sets it to the store), Commit,
// CommitFenced and Reset refuse an offset past the queue's end (its
// MaxOffset) alike, with an *EndError wrapping ErrBeyondEnd, and change
// nothing.
//
// Epochs of a key strictly increase and are never reused: a reset is written
// to the file before Reset returns (a failed write fails the Reset and
// changes nothing), and removing a key remembers its epoch in a floor that
// the next epoch of any re-created key starts above. Clone is a reset of
// every destination key.
//
// Position returns a key's offset and epoch as one consistent pair; callers
// that use Epoch and Committed separately should read Epoch first (a reset
// stores the offset before the epoch). Remove(group), RemoveTopic(group,
// topic) and PurgeTopic(topic) (every group's, written before it returns)
// delete keys; Groups and Topics list them; Lag is max − committed,
// never negative. Stats returns plain counters.
//
// Commits are lock-free apart from per-key state: the table is an
// xsync.MapOf keyed by a comparable struct, a plain commit on an unserved
// key is one atomic swap and a fenced commit holds only its key's mutex.
//
// # Persistence
//
// With Options.Path the whole table is written as one file: on Flush, on
// Close, every Options.FlushEvery (default DefaultFlushEvery, 5 s; a
// negative value, FlushEveryCommit, writes on every commit instead), and on
// every Reset and Clone. The file is versioned and checksummed (CRC-32C,
// internal/crc) and replaced atomically: keep the current file as Path.bak,
// then (internal/fsx.WriteFile) write Path.tmp, fsync, rename it over Path,
// fsync the directory. A failed write leaves Path as it was. Open fails with
// ErrCorrupt for a torn, truncated, extended or corrupt file, and never
// silently starts from zero; Options.FallbackToBackup lets it load the
// backup instead (logged; what the last write added is lost, and every epoch
// is moved above any epoch that can have been handed out, so even a reset
// lost with the corrupt file cannot be overwritten by a fenced commit). A
// crash loses at most the commits since the last write: a consumer then
// re-consumes them (at-least-once).
// One Manager per file: two processes sharing a Path are not supported.
//
// # Consumer side: QueueTable and ProcessQueue
//
// A QueueTable holds exactly one live *ProcessQueue per assigned queue. Every
// operation that takes a process queue out of the table (Assign over an
// existing one, Reset, Revoke) drops that instance in the same critical
// section. A pull is tied to the process queue it was issued for: once the
// queue is dropped, ProcessQueue.Deliver returns ErrDropped and buffers
// nothing, and the puller must not re-issue the pull; ProcessQueue.Commit
// refuses with ErrDropped, and the Manager refuses its old epoch with
// ErrStaleEpoch. This rules out the RocketMQ failure in which repeated
// offset resets removed process queues from the table without dropping
// them: their pull requests lived on, filled memory into full-GC storms,
// blocked orderly consumers and could commit old positions over the reset.
//
// Flow control: Deliver of a batch that would take a non-empty buffer past
// TableOptions.MaxBuffered (default DefaultMaxBuffered, 1000 messages) or
// MaxBufferedBytes (default DefaultMaxBufferedBytes, 100 MiB of bodies)
// returns ErrBackpressure and buffers nothing; an empty buffer always takes
// one batch, so an oversized batch cannot wedge a queue. Dropping releases
// the buffered messages.
//
// The table does not compare epochs (the latest call wins): apply the resets
// of one queue in the order their epochs were handed out.
//
// # Ownership
//
// Deliver keeps the *store.Message pointers (not the slice passed in) until
// Take hands them out; the slice Take returns is the caller's. Slices
// returned by Groups and Topics are fresh copies.
//
// # Defaults
//
// DefaultFlushEvery (5 s), DefaultMaxBuffered (1000), DefaultMaxBufferedBytes
// (100 MiB). The zero Options is an in-memory Manager; the zero TableOptions
// a table with the default limits.
package offset
