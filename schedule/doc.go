// Package schedule is brokercore's delay-level scheduler: a producer's message
// waits in Topic (level L in queue L-1) and is delivered back to its real topic
// once StoredAt plus the level's delay has passed on Options.Now.
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
// recorded and, with Options.ProgressPath, persisted by an atomic file replace
// (temp file, fsync, rename, directory fsync) after every delivered batch and
// on Stop.
//
// The decisions live in a plain method (step) that takes the time as a value;
// the goroutines, tickers and channels are a thin driver around it.
//
// # Guarantees
//
//   - Never early: a message is appended only once Options.Now has reached
//     StoredAt + delay.
//   - Exactly once under any interleaving of Start and Stop, from any
//     goroutines. Every loop belongs to a generation (one per Start). A
//     delivery holds its level's lock from the check "is my generation
//     current" through the append to the progress update, and Stop takes every
//     level's lock to end the generation; so a delivery either completes
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
//
// # Defaults
//
// DefaultLevels (RocketMQ's 18 levels "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m
// 9m 10m 20m 30m 1h 2h"), DefaultTick (100 ms), DefaultMaxBatch (1024),
// MaxRetryBackoff (5 s), ProgressPath "" (memory only), Now time.Now, Logger
// discarding.
//
// # Caveats
//
//   - A progress file that is torn or corrupt is ErrCorrupt from New and Start;
//     the scheduler never guesses zero. A missing file is a first start: every
//     level starts at its queue's MinOffset.
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
package schedule
