// Package schedule is brokercore's scheduler of delayed messages: by delay
// level (RocketMQ 4's 18 levels: a message waits in Topic, level L in queue
// L-1, until StoredAt plus the level's delay) and by timer (RocketMQ 5's
// timer messages: a message waits in TimerTopic until any time up to
// Options.MaxTimerDelay, one year by default, ahead). Both are delivered back
// to their real topic on Options.Now, never early, exactly once.
//
// # Timers
//
// At rewrites a message for TimerTopic with its real topic and queue and the
// time (PropTimerDeliverMS and PropStartDeliverTime, Unix ms); the host
// appends it. A record a protocol layer appends to TimerTopic itself, with
// PropRealTopic and one of the two time properties, is scheduled the same
// way. Cancel(uniqKey) stops a pending timer durably; CancelAt(uniqKey, t)
// does the same reading only the index slot of t.
//
// Pending timers live in the log and in a timer index the scheduler owns: a
// time wheel of one-hour slots on disk (SlotWidth), one append-only file per
// slot of fixed 24-byte entries (time, TimerTopic offset, key hash, CRC).
// The timer lane reads TimerTopic in offset order and appends each record's
// entry to its slot's file (ingest); it holds in memory only the slot due
// next (the window), sorted by time, and delivers from it in time order.
// Why slots and not one sorted structure: a slot is the unit of loading, so
// memory is one slot's timers whatever the total (10M timers over 30 days
// are ~14k per slot); files are appended, never rewritten, so ingest costs
// one write per slot touched and one fsync per file per flush; a restart
// lists the directory and reads one slot, not every pending timer; and
// deleting a delivered slot is removing a file.
//
// The index is derived state. The progress holds, for the timers, the
// ingest offset below which every record is in the index, the key (time,
// offset) up to which every timer was delivered, the index's ID and the
// outstanding cancels. From these and the log the index is rebuilt whenever
// its meta file is missing, its ID is not the progress's (another node wrote
// the progress, or the index was lost), or an entry fails its checksum.
//

// # Model
//
// Delay rewrites a message for Topic and keeps its real topic, queue and level
// in the properties REAL_TOPIC, REAL_QID and DELAY; the host appends the
// result to its log. Every level has one delivery loop that, at least every
// Options.Tick (DefaultTick, 100 ms), reads the due prefix of its queue (at
// most Options.MaxBatch, DefaultMaxBatch, messages), restores each message
// (topic, queue, body, tags, keys, properties including UNIQ_KEY, born time,
// reconsume times; the scheduling properties removed) and appends the batch to
// the log in one Append. Progress (level -> next queue offset) is then
// recorded and, with Options.ProgressPath, persisted after every delivered
// batch and on Stop: the progress file is a journal, one CRC-framed record
// appended and fsynced per batch, compacted now and then by an atomic
// replace (temp file, fsync, rename, directory fsync). A torn last record
// (a crash in the middle of an append) is ignored, so the record before it
// stands and only the batch in flight is delivered again; a damaged record
// with records after it is ErrCorrupt.
//
// The timers are one more lane beside the levels: one loop that ingests
// TimerTopic into the index and delivers due timers from the window in
// (time, offset) order, a batch per Append.
//
// The decisions live in plain methods (step for a level, timerLane.step for
// the timers) that take the time as a value; the goroutines, tickers and
// channels are a thin driver around them, and the tests drive the steps
// directly.
//
// # Guarantees
//
//   - Never early: a message is appended only once Options.Now has reached
//     StoredAt + delay; a timer only once Options.Now has reached its time
//     (rounded up to the millisecond). A timer in the past is due when it
//     was stored, so it is delivered at once.
//   - Exactly once under any interleaving of Start and Stop, from any
//     goroutines, for levels and timers alike (one mechanism). Every loop
//     belongs to a generation (one per Start). A delivery holds its lane's
//     lock from the check "is my generation current" through the append to
//     the progress update, and Stop takes every lane's lock to end the
//     generation; so a delivery either completes
//     before Stop goes on or never starts, and a loop of an ended generation
//     can neither append, nor continue, nor write progress. This is the fix
//     for the RocketMQ field report in which a task blocked mid-append outlived
//     a stop/start (an HA leader flap) and rescheduled itself next to its
//     successor, delivering a whole level twice.
//   - Stop returns after the in-flight deliveries of its generation have
//     finished, its loops have exited and progress is recorded.
//   - Across a crash at most the batch that was in flight is delivered again,
//     with its UNIQ_KEY intact (Delay assigns one to a message that has none),
//     so consumers can recognise the duplicate.
//   - A failed append is retried from the same offset with a backoff from one
//     Tick doubling up to MaxRetryBackoff; progress never passes an
//     undelivered message. A failed progress write is retried the same way,
//     and until it succeeds the level delivers nothing more (so a crash still
//     repeats at most one batch).
//   - No record stops its level or the timers: an append the log refuses for
//     good (store.ErrInvalid — a real topic over the store's limit in a
//     record someone wrote to Topic by hand, metadata over the limits) is
//     retried one message at a time, and the refused message goes to
//     DeadLetterTopic ("%DLQ%SCHEDULE_CONSUMER") with PropDLQReason and its
//     origin, in the same commit as the progress past it (logged at ERROR,
//     Stats.DeadLettered). Should the log refuse even the dead letter, the
//     progress moves past it all the same (ERROR with its keys,
//     Stats.Dropped). Every other error is transient: retried as above.
//
// # Defaults
//
// DefaultLevels (RocketMQ's 18 levels "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m
// 9m 10m 20m 30m 1h 2h"), DefaultTick (100 ms), DefaultMaxBatch (1024),
// DefaultMaxTimerDelay (one year), MaxRetryBackoff (5 s), Now time.Now,
// Logger discarding. ProgressPath "" keeps progress in the log (records in
// ProgressTopic, appended in the same atomic batch as the deliveries they
// account for) and the timer index in memory, rebuilt by New from the log:
// a new Scheduler over the same log never delivers again what an earlier
// one delivered. A Log that implements ProgressLog (a replicated host) gets
// the same through its AppendWithProgress.
//
// # Caveats
//
//   - A progress file that is corrupt (a damaged record with records after
//     it, no intact record, an old-format file that is torn) is ErrCorrupt
//     from New and Start; the scheduler never guesses zero. A missing file is
//     a first start: every level starts at its queue's MinOffset. A file of
//     the format before the journal (one record) is read and rewritten as a
//     journal by New; an older brokercore cannot read the journal.
//   - Loaded progress is clamped into the queue's [MinOffset, MaxOffset]: what
//     retention removed before delivery is skipped and logged (Stats.Skipped).
//   - A record in Topic without the scheduling properties cannot be delivered;
//     it is skipped, logged and counted (LevelStats.Malformed).
//   - The message returned by Delay is a fresh copy owned by the caller. The
//     scheduler takes ownership of messages returned by Log.Read.
//   - Log.Append runs under the level's lock, which Stop waits for: an Append
//     (or a hook it calls, such as store.Options.OnAppend) must not call Start
//     or Stop. Progress and Stats take no lock and are safe anywhere.
//   - A Log.Append that fails after writing (a failed fsync) is retried, so
//     that batch may arrive twice, recognisable by UNIQ_KEY.
//   - Cancel reads the whole index (24 bytes per timer indexed, delivered
//     ones of the last KeepDelivered included) and holds the timer lane
//     meanwhile: its cost is linear in the timers indexed, about 40 ms per
//     1M (BenchmarkCancel). CancelAt, given the timer's time, reads only
//     that time's slot. A cancel is part of every progress record until
//     KeepDelivered after its time.
//   - A timer record appended by hand with a time more than MaxTimerDelay
//     after its StoredAt, or without a real topic or a time, is skipped,
//     logged and counted (TimerStats.Malformed).
//   - Without a ProgressPath the index is in memory and New rebuilds it by
//     reading every timer in TimerTopic: memory then grows with the pending
//     timers. brokercore.Open sets a ProgressPath.
//   - Progress kept in ProgressTopic is subject to the log's retention like
//     any topic: a log that retains nothing written since the last delivery
//     loses the position (the levels then start at their MinOffset).
//   - The index directory is rebuilt when its meta file is missing or
//     damaged, or an entry fails its checksum; a slot file deleted by hand
//     while the meta file stays is not noticed (its timers are lost).
package schedule
