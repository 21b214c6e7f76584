// Package store is brokercore's append-only message log: an atomic-batch,
// checksummed log on github.com/tidwall/wal with a per-queue index and a time
// index, in the shape of RocketMQ's commit log and consume queues.
//
// # Model
//
// Every message belongs to a (Topic, QueueID). Append assigns it a
// QueueOffset (0, 1, 2, … within its queue, dense), a LogOffset (0, 1, 2, …
// across the whole log) and a StoredAt time (from Options.Now, never
// decreasing along the log; in UTC, as Read returns it). Read pages through one queue by QueueOffset,
// ReadAt fetches by LogOffset, OffsetAt maps a time to the first queue offset
// stored at or after it.
//
// # Guarantees
//
//   - A batch (one Append call) is all-or-nothing, across a crash too: each
//     record carries a batch-end marker and recovery cuts an unfinished batch.
//   - Every record carries a version byte and a CRC-32C. Open repairs a torn
//     or corrupt tail itself (cut back to the last whole batch, logged with
//     what was cut); a bad record followed by good ones is corruption in the
//     middle of the log, reported as an error naming segment and position.
//   - Under SyncGroup (the default) Append returns after its records are
//     fsynced, concurrent appends share one fsync (group commit), and records
//     are readable only once durable. Only writes never acknowledged as
//     synced may be lost.
//   - A failed write or fsync puts the Store into a failed state: every later
//     call returns an error wrapping ErrFailed. Reopen to recover.
//   - Offsets never go backwards, across reopen and retention, even for a
//     queue retained to empty.
//   - Options.OnAppend runs after the records are readable and never under a
//     store lock.
//
// # Memory and files
//
// The index is a set of files of fixed-size entries (one per queue, one for
// the whole log), so it costs no memory per message; a Read is a pread of
// the index and one pread per span of nearby records (a queue's records are
// often adjacent in the log), done without holding the store lock. A checkpoint file records how far the
// index is durable, so Open replays only the log past it. tidwall/wal keeps
// the segment being written in memory, and the last closed one in its cache,
// so the log's heap is bounded by about twice SegmentSize.
//
// # Defaults
//
// Sync: SyncGroup. SyncEvery: DefaultSyncEvery (1 s, SyncInterval only).
// SegmentSize: DefaultSegmentSize (16 MiB). MaxAge, MaxBytes: 0 (keep
// everything). RetainEvery: DefaultRetainEvery (1 min). MaxMessageSize:
// DefaultMaxMessageSize (4 MiB of Body; metadata up to MaxMetadataSize).
// Read clamps max to MaxReadBatch. Now: time.Now. Logger: discard.
//
// # Ownership
//
// Messages returned by Read and ReadAt are fresh copies owned by the caller
// (the messages of one Read may share one allocation; each Body is capped,
// so appending to one never touches another).
// Append reads the messages passed to it during the call, fills in their
// assigned fields on success, and keeps no reference to them.
//
// # Caveats
//
// One Store per directory (an flock on dir/LOCK enforces it on Unix).
// Retention drops whole segments only, never the one being written. Index
// entries take 32 bytes per message per file (queue and log); retention frees
// their disk blocks by punching holes (Linux), the files keep their logical
// size. Every segment and every queue's index file stays open while the
// Store is. The log directory belongs to the store: tidwall/wal's
// TruncateFront/TruncateBack are never used on it.
package store
