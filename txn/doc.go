// Package txn is RocketMQ's transactional messages as a broker-core
// component: half (prepared) messages that consumers never see, commit and
// rollback, and check-back of transactions the producer left open.
//
// # Model
//
// Prepare stores the message in HalfTopic (queue 0) with its real topic and
// queue in properties (PropRealTopic, PropRealQueue, PropTransaction,
// PropProducerGroup, Apache's REAL_TOPIC, REAL_QID, TRAN_MSG and PGROUP).
// The half's queue offset in HalfTopic is the transaction's ID. Commit
// appends the real message (the half with its topic and queue restored) and
// an op record to OpTopic in one atomic store batch; Rollback appends only
// the op record. A transaction still open TransactionTimeout after it was
// stored (or CHECK_IMMUNITY_TIME_IN_SECONDS, when the message sets it) is
// checked back with a producer of its group through the host's Checker,
// then every CheckInterval, at most CheckMax times; after that it is rolled
// back and its half kept in CheckMaxTimeTopic. Every check is an op record
// too, so the count survives a restart.
//
// # Guarantees
//
// The log is the only truth: New rebuilds the open transactions, their
// check counts and the outcome of recent ones from the half and op records.
// The progress file (Options.ProgressPath) only says where that reading may
// start; a missing, damaged or outdated one (the log lost records it had
// counted on) costs a longer read, never a wrong state.
//
// A commit appends the real message exactly once whatever moment the
// process dies: the real message and the op record that closes the
// transaction are one batch, and a batch is all-or-nothing across a crash,
// so after a restart the transaction is either open (nothing appended; the
// producer commits again or is checked) or closed with its message. Within
// one process a commit or rollback that arrives twice has the effect of one
// (the second answers nil), and the opposite resolution of a closed
// transaction is refused with ErrAlreadyResolved and logged. EndAsync
// answers once a resolution is decided, before its batch is durable (as
// Apache's proxy forwards EndTransaction oneway): should the process die
// first, the transaction is open after the restart and checked back.
//
// An append that failed in a way that may have landed leaves its
// transaction uncertain (ErrUncertain: no check, no resolution) only while
// the log keeps failing: a probe record that succeeds, then a read of the
// log, settles it — closed as the log says, or open again — on a retried
// End or at the driver's next tick.
//
// The check scan costs O(open transactions): open transactions sit in a
// heap by due time in memory (their group, due time and check count, not
// their bodies); the half is read back only to be checked or resolved, and
// not even then while it is among the last halves this Manager prepared
// (up to 4096 of them, 16 MiB, kept until their transaction's next append).
//
// # Concurrency
//
// A Manager is safe for concurrent use. Start runs one driver goroutine that
// sends due checks every Options.Tick and ingests half and op records other
// writers appended (a host replaying a replicated log); EndAsync runs each
// append on a goroutine of its own (a bounded number). Close stops them all
// and waits for them.
package txn
