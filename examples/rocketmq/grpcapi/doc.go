// Package grpcapi serves RocketMQ 5's gRPC protocol
// (apache.rocketmq.v2.MessagingService, the protocol of the Apache RocketMQ
// proxy) over a brokercore core, so that the official Go v5 client
// (github.com/apache/rocketmq-clients/golang/v5 v5.1.4) — its Producer,
// SimpleConsumer and PushConsumer — works against it unchanged. It uses
// the generated protocol code that client module ships (protocol/v2).
//
// # Transport
//
// One port serves TLS and plaintext: the first byte of a connection tells
// them apart (0x16 starts a TLS handshake), as the Apache proxy does. TLS,
// the stock client's default, uses a self-signed certificate generated on
// first start and kept in Options.CertDir (stable across restarts), and
// negotiates ALPN h2 (grpc-go ≥ 1.67 refuses a server that does not).
//
// # How the protocol maps onto the core
//
//   - QueryRoute: every topic has Options.Queues (or Options.QueueCount)
//     readable and writable queues in a stable order on this broker, which
//     accept NORMAL, FIFO, DELAY and TRANSACTION messages, or only the
//     topic's message.type (Options.TopicMessageType), whose other types
//     a send is refused; the broker endpoints are Options.Advertise or the
//     address the client reached.
//   - SendMessage: one atomic store append per request, one OK entry per
//     message with the client's id (kept as UNIQ_KEY). Normal messages go
//     round robin, FIFO ones to queue hash(message_group) mod queues, DELAY
//     ones to the scheduler's timers (schedule.Scheduler.At). Bad input gets
//     the protocol's code and a message, and nothing is stored.
//     Every stored message carries the broker's cluster (CLUSTER). A
//     DELAY message's entry carries Apache 5.3's recall handle (base64url
//     of "v1 topic broker timestamp id").
//   - Transactions: a TRANSACTION message is a half message of the txn
//     component (brokercore.Broker.Transactions; its group is its topic,
//     as in Apache's proxy). EndTransaction answers once the commit or
//     rollback is decided (txn.Manager.EndAsync: Apache's proxy forwards
//     it oneway), and an open transaction is checked back with a live
//     producer of its topic, as a RecoverOrphanedTransactionCommand on its
//     Telemetry stream. A Broker whose manager runs only at times (a
//     replicated node's, while it leads) says so with TransactionsNow: an
//     ErrNotWritable there fails the call with UNAVAILABLE.
//   - Priority (RocketMQ 5.4) and lite-topic (5.5) messages are not
//     supported: routes never list them among the accepted types (the
//     stock producer refuses such a send itself), a send of one is
//     MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (Apache's answer for a type its
//     topic does not accept) and SyncLiteSubscription NOT_IMPLEMENTED.
//   - RecallMessage: cancels a DELAY message's timer by that handle
//     (schedule.Scheduler.CancelAt, or a Writer's host's Options.Timers),
//     with Apache's answers.
//   - ReceiveMessage: a pop (pop.Service) across all the topic's queues —
//     the requested queue only selects the broker — with the request's batch
//     size, invisible time (Options.PushInvisible when none is given, as for
//     the push consumer's auto-renew receives) and TAG filter
//     (pop.Request.Filter; SQL92 is UNSUPPORTED). The long poll lasts the
//     request's long_polling_timeout or the client's subscription setting,
//     cut to end Options.DeadlineMargin before the client's deadline: the
//     client drops a whole answer whose stream has not ended by then. An
//     empty answer is MESSAGE_NOT_FOUND.
//   - FIFO: a consumer group whose name ends in Options.FIFOSuffix ("-fifo"),
//     is listed in Options.FIFOGroups or is orderly by Options.GroupFIFO
//     (the host's subscription group table) consumes in order: its receives are
//     FIFO pops, each queue handing out one batch at a time. A receive that
//     carries the attempt_id of the batch in flight gets that batch again at
//     once, with fresh receipt handles and no extra attempt counted, even
//     while other receives of the group contend for the group@topic lock
//     (apache/rocketmq#10827); a receive without an attempt id is a new
//     attempt. Push consumers of FIFO groups get batch size 1, because the
//     v5.1.4 push consumer goes on with the next message of a batch when one
//     fails.
//   - AckMessage, ChangeInvisibleDuration: settle through the receipt handle
//     (the message's queue and offset plus pop's signed handle). A refused
//     handle is INVALID_RECEIPT_HANDLE; a change always answers a usable
//     handle, because the client keeps whatever comes back.
//   - Dead letters: after Options.MaxAttempts deliveries (16, the first
//     included) pop moves a message to "%DLQ%"+group, a topic like any
//     other; ForwardMessageToDeadLetterQueue (the FIFO push consumer's give
//     up) appends it there and settles it.
//   - QueryAssignment: one assignment, queue id -1 (the whole topic on this
//     broker), always OK and non-empty.
//   - Heartbeat and Telemetry: consumers are registered in the consumer
//     registry; the first settings command of a stream is answered with the
//     server's settings (max body size; for producers Apache's send retry
//     policy, 3 attempts from 10 ms, ×2, up to 1 s; for consumers the FIFO
//     flag, batch size, long-polling time and an exponential backoff from
//     1 s, ×2, up to 10 s, with the max attempts; metrics off). See
//     Options.SettingsHold for why that answer waits about a second.
//   - Message frames carry Apache's body digest: MD5, upper-case hex.
//
// # Where this differs from Apache's proxy (kept on purpose)
//
// Answers were checked field by field against Apache's proxy (RouteActivity,
// SendMessageActivity, ReceiveMessageActivity, GrpcClientSettingsManager).
// These differences remain:
//
//   - Retry policy in consumers' settings: exponential from 1 s, ×2, up to
//     10 s, Options.MaxAttempts (16) deliveries in all. Apache answers the
//     group's policy, by default the customized ladder 1 s, 5 s, 10 s,
//     30 s, 1 m … 2 h and retryMaxTimes+1 (17) attempts. Why: a poison
//     message reaches its dead-letter topic in minutes, not a day; the
//     Backoff* options set another policy.
//   - QueryAssignment of a FIFO group: one assignment, queue -1, as for
//     other groups (Apache lists every queue). Order is per queue either
//     way: FIFO pops hand out one batch per queue at a time, so one receive
//     loop serves all queues.
//   - FIFO push consumers get batch size 1 (Apache: 32), for the client
//     behaviour described under FIFO above.
//   - A long poll ends Options.DeadlineMargin (1.5 s) before the client's
//     deadline (Apache reserves 100 ms), because on a busy machine an
//     answer cut that close arrives after the client gave up.
//   - GZIP-encoded bodies are UNSUPPORTED (Apache stores them compressed
//     with the COMPRESSED flag); SQL92 filters are UNSUPPORTED (Apache
//     filters by SQL92 when enablePropertyFilter is on; it is off by
//     default); priority and lite-topic messages are refused (above).
//   - One broker per route: this process is the only broker, so routes
//     and assignments name one (Apache lists each broker of the cluster).
//   - Telemetry carries settings and transaction check-backs only; Apache
//     also sends VerifyMessageCommand and PrintThreadStackTraceCommand when
//     its admin tools ask.
//
// Nothing waits for a client's settings: sends and receives work before
// they arrive. The v5 client never closes its streams, so a client is
// forgotten when it stops calling, and its in-flight messages come back
// through their invisible time.
package grpcapi
