// Package store is brokercore's append-only message log: an atomic-batch,
// checksummed log in github.com/tidwall/wal's format with a per-queue index
// and a time index, in the shape of RocketMQ's commit log and consume queues.
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
//   - The log is the only truth. Every record carries a version byte and a
//     CRC-32C. Open cuts a torn tail itself (only when no intact record
//     follows the first bad byte of the last segment; cut back to the last
//     whole batch, logged with what was cut). A bad record followed by an
//     intact one is corruption: Open refuses it with a *CorruptError
//     (ErrCorrupt) naming the segment, the byte position and the log
//     offsets affected, and never drops an acknowledged record silently.
//     Open decodes every record of the last segment, but proves an older,
//     closed segment by its end only (a reopen must not re-read the whole
//     log). Segments must cover the log without gaps from what retention
//     kept to the end: a missing or short segment is a *CorruptError naming
//     the missing range (retention records what it removes before removing
//     it, so its segments are not gaps).
//   - Offsets never go backwards, across any damage: no queue offset or log
//     offset is ever handed out twice. When records the checkpoint recorded
//     as durable are missing at Open (the tail of the last segment damaged
//     or cut after a clean Close, the segment replaced by an older copy, a
//     Repair cut), Open opens anyway, with every next offset above all
//     ever issued: it writes a tombstone for every lost log offset and
//     every lost queue offset of the queues the checkpoint lists (one
//     atomic batch, so the floors live in the log and survive the loss of
//     every derived file later), logs the lost range at ERROR and counts it
//     (Stats.LostRecords). Readers skip tombstones; ReadAt of one is
//     ErrCorrupt. (A log that lost records no checkpoint recorded as durable
//     — writes never acknowledged as synced — restarts where it ends.)
//   - A damaged record costs exactly that record: Read (and so pop and
//     every offset-based reader) delivers every intact record before and
//     after a damaged one and never returns it as data; it is stepped past
//     (an ERROR line naming segment, position and offsets, once, and
//     Stats.CorruptRecords), never retried forever. ReadAt of it is
//     ErrCorrupt.
//   - Repair is the explicit way out: a damaged record whose framing is
//     intact is replaced by a tombstone (exactly that record is lost);
//     where the framing is gone it cuts the log there. Either way it keeps
//     the bytes it removes in a file under dir/quarantine, reports exactly
//     which log offsets and records were lost, and keeps the next offsets
//     above everything they had.
//   - Derived files (the index files, the log-wide index, the checkpoint)
//     are never trusted beyond what the log proves: any of them may be lost
//     or damaged between a crash and Open, any number of times, with failed
//     Opens in between; Open rebuilds what is missing or damaged from the
//     log (invalidating the checkpoint before it deletes what the
//     checkpoint vouched for), and a damaged index entry met at Read is
//     repaired from the log (Stats.IndexRepairs). The one fact the log
//     cannot give back is the offsets of a queue retention emptied: they
//     live in the checkpoint.
//   - Under SyncGroup (the default) Append returns after its records are
//     fsynced, concurrent appends share one fsync (group commit: the next
//     group is written while the previous fsync runs), and records are
//     readable only once durable. Only writes never acknowledged as synced
//     may be lost.
//   - A failed write or fsync puts the Store into a failed state: every later
//     call returns an error wrapping ErrFailed; Close still closes. Reopen to
//     recover (Open after a full disk is freed recovers everything).
//   - Offsets never go backwards, across reopen and retention, even for a
//     queue retained to empty (see damage above).
//   - Options.OnAppend and Subscribe hooks run after the records are
//     readable and never under a store lock.
//
// # Key index and topic release
//
// LookupKey answers RocketMQ's QUERY_MESSAGE: the newest max messages of a
// topic stored in a time range that carry a key (in Keys, or as the value
// of a property named in Options.KeyProperties). The key index is derived
// state like the queue index and never trusted over the log: every hit is
// read back and compared (a hash collision costs a read, never a wrong
// answer). Each key costs 24 bytes of memory while its segment is the one
// being written (and the one closed before it, until the next checkpoint);
// the checkpoint after a segment roll writes that segment's entries, sorted
// by hash, to one file under dir/keys (32 bytes per key plus a 64-byte
// header; not fsynced), so appends do no key-index I/O and a checkpoint
// without a roll writes nothing for it. A lookup costs a binary search (one
// pread per probe) in each key file whose time range overlaps, newest
// first, a scan of the in-memory entries, and one ReadAt per candidate.
// Open checks each key file's header against its segment and rebuilds any
// that is missing or wrong from the segment; the last segment's keys come
// back from the key file Close wrote for it, else from the segment
// (Stats.KeyFileRebuilds counts rebuilds, also those a lookup makes when
// it meets a damaged entry). Measured at 100,000 keys (BenchmarkKeyIndex-
// Reopen100K): Close and Open each take a few milliseconds more than with
// the index off. Retention removes a
// segment's key file with it. Options.NoKeyIndex turns it all off.
//
// DeleteTopic releases a topic (RocketMQ deletes its consume queues): its
// messages appended so far are gone for Read and LookupKey, MinOffset
// moves to MaxOffset, its index files are removed, and retention frees the
// log space as usual; offsets are never reused (a topic written again goes
// on from its MaxOffset). The release is a fact the log does not hold, so
// it is kept in dir/released (a floor log offset per topic, replaced
// atomically and fsynced before anything else changes) and applied at
// every Open after the index is loaded or rebuilt: a crash during a
// DeleteTopic leaves the topic whole or released, and a damaged released
// file is refused at Open (ErrCorrupt), never guessed. A released topic
// keeps its queues' offset state (as a queue retention emptied does, 512
// bytes each) but Topics and Queues leave it out until it is written
// again; ReadAt of a released message still answers it until retention
// removes it.
//
// # tidwall/wal
//
// The log is in tidwall/wal's segment format (files named by the index of
// their first entry, entries framed as a uvarint length and the data),
// which recovery reads before wal.Open. At Open, wal checks the log through
// its exported API (Open, LastIndex, FirstIndex, TruncateFront to finish an
// interrupted retention, Close); then the store appends to the tail
// segment itself, rolling to a new segment where wal would (after the
// entry that reaches SegmentSize; the finished segment fsynced), so the
// files stay what wal.Open reads. wal's own write path keeps the whole
// segment being written in memory and grows it by copying: a WriteBatch of
// 64 records of 1 KiB measured 6× the time of one write of the same bytes.
// The store keeps its own record positions, so a Read is a pread, and
// verifies them against the files: the tail segment's length and the
// framing of the last record at every group commit, at every segment roll
// (the new segment must exist and the one before it end where the store
// placed its records) and at every checkpoint, and under SyncNone and
// SyncInterval before a read uses a record not verified yet. On the first
// divergence the store fails. The cost: one fstat and one small pread per
// group commit. Retention removes whole segments' files, oldest first,
// after a checkpoint recorded where the log now starts. Repair, with the
// directory locked, rewrites a segment through a temporary file and a rename
// to replace a damaged record by a tombstone.
//
// # Memory and files
//
// The index is a set of files of fixed-size entries (one per queue, one for
// the whole log), so it costs no memory per message; a Read is a pread of
// the index and one pread per span of nearby records (a queue's records are
// often adjacent in the log), done without holding the store lock. New
// entries wait in a per-queue buffer, off the append path; a checkpoint
// (at every segment roll, every CheckpointBytes of log, every
// CheckpointEvery, and on Close) writes each buffer that reached 4 KiB to
// its file and every other new entry to one index journal in a single
// write, so a checkpoint costs O(1) writes whatever the number of queues
// that changed, and records how far each file and the journal go, so Open
// replays only the log past it and reads the journal back (the checkpoint
// file itself lists every queue, about 10 bytes plus the topic name each,
// so its size follows the number of queues). Index files and
// the journal are not fsynced (they are checked and repaired from the log
// instead). Per queue the store keeps its state (offsets, index file
// bookkeeping, map entries, its line of the checkpoint), within 512 bytes,
// and its buffered entries, 32 bytes each: at most 64 KiB (a queue that
// takes more between two checkpoints has that block written by the Append
// that fills it, one write per 2,048 entries), under 4 KiB once a
// checkpoint finds it quiet. The log itself holds no segment in memory
// (Open reads the tail once, through wal): with the defaults the heap stays
// under 64 MiB plus 512 bytes and the buffered entries per queue.
//
// Open file descriptors are bounded by configuration, not by the number of
// queues: index files are opened when used and closed least recently used
// first to keep at most MaxOpenFiles (DefaultMaxOpenFiles, 256) open; add
// one per log segment (a read handle), the journal, the log-wide index and
// the lock.
//
// Under SyncGroup appenders place and encode their records under the lock
// and the group-commit leader writes the round's records to the log in one
// write, outside the lock, then fsyncs them.
//
// # Defaults
//
// Sync: SyncGroup. SyncEvery: DefaultSyncEvery (1 s, SyncInterval only).
// SegmentSize: DefaultSegmentSize (16 MiB). MaxAge, MaxBytes: 0 (keep
// everything). RetainEvery: DefaultRetainEvery (1 min). MaxMessageSize:
// DefaultMaxMessageSize (4 MiB of Body; metadata up to MaxMetadataSize).
// CheckpointBytes: DefaultCheckpointBytes (4 MiB). CheckpointEvery:
// DefaultCheckpointEvery (10 s). MaxOpenFiles: DefaultMaxOpenFiles (256).
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
// One Store per directory (an flock on dir/LOCK enforces it on Unix; Repair
// takes it too). Retention drops whole segments only, never the one being
// written. Index entries take 32 bytes per message per file (queue and
// log); retention frees their disk blocks by punching holes (Linux), the
// files keep their logical size. Every segment keeps a read handle open
// while the Store is (index files do not: see MaxOpenFiles). The log
// directory belongs to the store.
package store
