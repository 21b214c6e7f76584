// Package brokercore is an embeddable library of message-broker core
// components, modelled on the broker internals of Apache RocketMQ.
//
// A host application — a custom Go messaging service, a test suite, a
// bespoke broker — opens the composed core with one call, or imports the
// pieces it needs and wires them itself through small interfaces. No
// package needs a server, a network or a config file, and none leaves a
// goroutine running after its Close or Stop.
//
// The library exists because broker internals keep failing in the same few
// ways: two code paths that must keep state in step and don't, services
// restarted under a still-running task, retries that lose their place to an
// unrelated lock. Each package makes one such failure impossible by
// construction, and its tests replay the field report that found it.
//
// # Open: the composed core
//
// Open turns a directory into a correctly wired broker core (ExampleOpen
// is the whole program):
//
//	b, err := brokercore.Open(dir, brokercore.Options{})
//	if err != nil {
//		return err
//	}
//	defer b.Close()
//	if err := b.Store().Append(&store.Message{Topic: "orders", Body: []byte("paid")}); err != nil {
//		return err
//	}
//	res, err := b.Pop().Pop(ctx, pop.Request{Group: "billing", Topic: "orders", ClientID: "w1", Poll: time.Second})
//	if err != nil {
//		return err
//	}
//	for _, d := range res.Messages {
//		if err := b.Pop().Ack(d.Handle); err != nil { // the ack commits the offset
//			return err
//		}
//	}
//
// What Open wires, so that no host has to:
//
//   - the store lives in dir/store (StoreDir); its arrivals — the
//     scheduler's deliveries of delayed messages included — wake pop's long
//     polls (pop.New subscribes to the store itself);
//   - pop commits through the offset manager, persisted at dir/offsets
//     (OffsetsFile) and bounded by the store, so an offset past a queue's
//     end is refused by Commit and Reset alike; a plain Commit on a queue
//     pop serves fences pop's older acks instead of being overwritten;
//   - receipt handles are signed with a key kept in dir/handle.key, so a
//     handle from before a restart answers pop.ErrStaleHandle, not
//     pop.ErrBadHandle;
//   - the scheduler keeps its progress in dir/schedule/progress and is
//     started: a delayed message is delivered once, across reopens too;
//   - the transaction manager (Broker.Transactions) keeps half messages in
//     TransHalfTopic and op records in TransOpTopic, its start position in
//     dir/txn.progress, and checks open transactions back through
//     Options.Txn.Checker; a commit appends its message exactly once;
//   - a message that pop.Options.MaxAttempts deliveries did not settle is
//     appended to queue 0 of DeadLetterPrefix+group ("%DLQ%billing"), a
//     topic like any other, with its origin in properties (PropDLQOrigin…);
//   - expired leases are swept from the lock table every LockSweepEvery
//     and silent consumer channels expired every ConsumerScanEvery;
//   - Options.Now and Options.Logger reach every package whose own is nil.
//
// # The RocketMQ layer every front-end shares
//
// A protocol server (remoting, gRPC, HTTP) translates; the rules live here,
// so every front-end applies the same ones:
//
//   - names and limits: CheckProduce, CheckClientTopic, CheckGroupName,
//     ReservedTopic (names.go) refuse what a later step could not deliver;
//   - tag filters: pop.ParseFilter is the one grammar (Apache's), used for
//     pops (pop.Request.TagFilter) and a server's own pulls (Filter.Match);
//   - long polls: Broker.WaitArrival, or Broker.Arrivals().Watch in a
//     server's own select, wakes on every append (the scheduler's deliveries
//     included) and every offset reset, with no goroutine or map per server;
//   - retries: PlanSendBack and Broker.SendBack apply RocketMQ's send-back
//     rules (RetryTopic, reconsume times, the delay ladder from
//     RetryBaseLevel, DeadLetterTopic past DefaultMaxReconsumeTimes);
//   - events after Open: Broker.OnConsumerEvent, OnLockEvent and
//     OnOffsetReset subscribe a server built after the core, with the
//     guarantees of the Options hooks (which still run first).
//
// No retry loop in the library retries a permanent refusal forever: a
// delayed message or timer the store refuses for good goes to
// schedule.DeadLetterTopic with its reason, and the level moves on.
//
// Close stops everything in reverse order and waits for every goroutine;
// afterwards the store, pop, the offset manager and the consumer registry
// answer their ErrClosed, and the scheduler's Start and Cancel answer
// schedule.ErrClosed (it starts nothing over the closed store).
// For tests, package brokertest opens a Broker in t.TempDir() on an
// injectable clock and closes it with the test (it also runs under
// testing/synctest).
//
// # The packages
//
//   - [github.com/brokercore/brokercore/store]: the append-only log in
//     github.com/tidwall/wal's format (wal checks it at Open) — atomic batches, CRC-32C records, torn-tail
//     repair on Open, group commit, a per-queue index and a time index kept in
//     files (bounded memory), retention of whole segments.
//   - [github.com/brokercore/brokercore/pop]: pop / ack / change-invisible-time
//     over any log that satisfies pop.Source; FIFO batches with attemptId
//     reentrancy that waits for the group@topic lock instead of coming back
//     empty; long polling; tag filters; dead letters; epoch-fenced commits.
//   - [github.com/brokercore/brokercore/lock]: a linearizable lease lock
//     table for queue ownership with fencing tokens, and a Keeper that
//     renews at no more than a third of the lease and unlocks everything on
//     Close.
//   - [github.com/brokercore/brokercore/schedule]: delay levels and timers;
//     every delivery task belongs to a generation, so a stop/start flap
//     cannot deliver a level twice.
//   - [github.com/brokercore/brokercore/txn]: transactional messages — half
//     messages, commit and rollback (the real message and its op record in
//     one atomic batch, so exactly once across crashes), check-back of open
//     transactions through a host's Checker, state rebuilt from the log.
//   - [github.com/brokercore/brokercore/consumer]: the consumer registry keyed
//     by channel; one mutation path writes the group, channel and topic tables
//     together.
//   - [github.com/brokercore/brokercore/offset]: consumer offsets with
//     epoch-fenced resets (broker side), and the consumer's queue table in
//     which a reset drops the old process queue atomically (no orphan pulls).
//   - [github.com/brokercore/brokercore/acl]: protocol-neutral access
//     control — users, rules per topic and group and action (Deny wins),
//     source IP ranges, a reloadable JSON file — and the RocketMQ v5 and
//     remoting signature checks a protocol front-end verifies before it
//     authorizes.
//
// # Composing by hand
//
// Every piece stays usable on its own. The store is the foundation; pop,
// schedule and offset each declare the few store methods they need as an
// interface of their own, which *store.Store satisfies, so a host may
// substitute its own log. Order matters only for Close (reverse), never for
// wiring: pop.New finds the store's Subscribe and Done by type assertion,
// so appends before or after it are seen the same way. Example (by hand)
// is this code, run:
//
//	st, err := store.Open(filepath.Join(dir, "store"), store.Options{})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer st.Close()
//	offs, err := offset.Open(offset.Options{Path: filepath.Join(dir, "offsets"), Bounds: st})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer offs.Close()
//	svc := pop.New(st, pop.Options{Offsets: offs}) // *offset.Manager is a pop.Offsets
//	defer svc.Close()
//	sch, err := schedule.New(st, schedule.Options{ProgressPath: filepath.Join(dir, "schedule", "progress")})
//	if err != nil {
//		log.Fatal(err)
//	}
//	if err := sch.Start(); err != nil {
//		log.Fatal(err)
//	}
//	defer sch.Stop()
//
// An offset reset through the offset.Manager bumps the queue's epoch, which
// pop sees on its next pop of that queue (offs.ResetToTime takes the store
// as its offset.TimeIndex). lock and consumer stand alone: a broker uses
// lock.Table for orderly consumers' queue ownership and consumer.Registry
// for heartbeats, calling Registry.ChannelClosed when a connection closes,
// and sweeps and scans them on a period as Open does.
//
// examples/broker composes all six into a small HTTP broker on Open;
// examples/embedtest shows the core embedded in a unit test.
//
// # Conventions
//
// Every package follows the same rules: the zero Options is a working default
// (each default is a named constant, applied by the package's one
// withDefaults in options.go); Options.Now injects the clock that every
// expiry, due time and lease decision reads, so tests move time instead of
// sleeping; Options.Logger (a *slog.Logger, nil = discard) receives
// contention, takeover, expiry, recovery and every rejected request with
// the same keys everywhere (group, topic, queue, client, offset, token,
// old_client, new_client) — errors a call returns are logged at DEBUG, WARN
// is kept for what the caller cannot see; errors are exported sentinels
// wrapped with %w; bad input changes nothing; Stats returns a plain struct
// of uint64 counters with snake_case json tags; everything is safe for
// concurrent use.
package brokercore
