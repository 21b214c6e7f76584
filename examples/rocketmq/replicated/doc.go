// Package replicated runs the RocketMQ-compatible remoting broker as one
// node of a raft cluster, on examples/cluster's replica package.
//
// Every node runs a name server and a broker. Writes go through raft on the
// leader: a SEND (delayed and timed ones through the leader's replicated
// scheduler) is answered once a majority has it on disk, and consumer
// offsets (UPDATE_CONSUMER_OFFSET, a pull's commit offset) are committed
// through raft. Pulls, offset queries and the consumer registry are served
// from the node's own replica.
//
// Routes: every node's name server answers routes whose broker
// ("broker-a", read and write) is at the leader's address (its own while it
// knows no leader), and which list other nodes as write-only brokers
// ("broker-a-<id>"): the followers that are up as far as the answering
// node can tell (peers.go: the leader lists every follower raft is in
// contact with, replica.Node.Reachable; a follower asks the leader for
// that list every second), since a client asks a broker picked at random
// from the route for its group's consumer list, and one that picked a dead
// node did not rebalance. A topic configured by an admin is routed the
// same way. Every node enters each topic the replicated log holds messages
// of in its own topic table (topics.go), so a new leader serves pulls of
// topics only the old one had created. A send that reaches a follower is forwarded to the
// leader and the leader's answer returned; a follower that knows no leader
// answers SERVICE_NOT_AVAILABLE, which the official clients retry.
//
// Why the write-only brokers: the official v2 Go client refreshes its
// routes every 30 s (internal._PullNameServerInterval, a constant) and on
// no answer code, and sends only to the master (broker id 0) of a broker
// name. What it does at once is retry a failed send on a queue of another
// broker name. So when the leader dies, its producers' next send fails
// over to a follower, which forwards it to the new leader as soon as one
// is elected: sends resume within about the election timeout. Consumers
// read "broker-a" only; they reach the new leader at their next route
// refresh (within 30 s) and go on from the offsets they hold (a consumer
// that starts anew reads the replicated committed offset).
//
// A send answered "not committed" (raft lost the entry's leadership) is
// answered SERVICE_NOT_AVAILABLE and may still be committed by the next
// leader: the client's retry can then store it twice. Deduplicate by
// message key.
//
// An admin offset reset (INVOKE_BROKER_TO_RESET_OFFSET) goes through raft
// on the leader too (a follower forwards it like a send: served there, it
// would move that node's offset manager only): every queue's new offset
// in one entry, and the leader moves its own offsets (its connections'
// epochs) and answers SUCCESS only once raft committed it; a reset raft
// refuses (not the leader any more, a timeout, shutdown, a refused entry)
// is answered SYSTEM_ERROR naming the cause and moves nothing (one raft
// did not confirm in time may still be applied by a later leader, as a
// send may). An
// UPDATE_CONSUMER_OFFSET is recorded through raft before the node's own
// offset moves, the same way. CONSUMER_SEND_MSG_BACK goes through raft
// on the leader too (forwarded the same way): the leader applies the library's rules
// (brokercore.PlanSendBack, replica.Node.SendBack), the retry waits in the
// replicated scheduler and lands on %RETRY%group, and past the consumer's
// max reconsume times the message goes to %DLQ%group.
//
// Transactions go through raft too (txn.go; replica.Config.Transactions):
// the leader runs the library's transaction manager (txn.Manager), rebuilt
// from the replicated half and op records at the start of every leader
// term (after raft's barrier: it sees every earlier leader's records) and
// closed when the term ends. A half message, a commit's real message with
// its op record (one batch, all or nothing on every replica), a rollback
// and every check are raft entries that apply only in the term that
// proposed them, so a deposed leader's manager changes nothing. A follower
// runs none: it forwards transactional sends and END_TRANSACTION (and, over
// gRPC, SendMessage and EndTransaction) to the leader and checks nothing
// back; a half message is on no node's real topic until its commit.
// Check-backs (CHECK_TRANSACTION_STATE, RecoverOrphanedTransactionCommand)
// go to a producer of the group connected to the leader: a v2 producer
// heartbeats every node, and a follower that forwarded a producer's
// transactional send asks that producer once it leads. A v5 producer
// keeps its Telemetry stream to whichever node it dialed: when none of
// the group's is to the leader, the check is relayed as Apache's broker
// does through its proxy (relay.go). Every follower reports to the leader,
// each second, the groups (topics) of the producer streams it holds, and
// the leader sends the check to the follower that reported the group
// last, which pushes RecoverOrphanedTransactionCommand on one of them; the
// answer's EndTransaction is forwarded to the leader as always. A report
// lasts 3 s (a follower that stops reporting is asked nothing after
// that), and a new leader learns of the followers' producers within a
// second; a check that reaches no producer waits for the next
// CheckInterval, as when none is online. The reports and checks carry an
// HMAC keyed by the cluster secret over their body, so only a member
// names an address for checks (they carry message bodies) or has a check
// pushed (without Config.ClusterSecret the key is public, as raft's port
// is then unauthenticated too). A transaction prepared on a leader that
// dies is checked back by the next one; a commit whose entry raft did not
// confirm is settled from the log (it landed in its term, or the
// transaction is open) and never lands twice.
//
// gRPC (RocketMQ 5's clients): with Config.GRPCAddr every node serves the
// endpoint, and its routes and assignments name every peer's
// Peer.GRPCAddr as the one broker's endpoints. The v5 client keeps one
// connection to one of them and, when a call fails with UNAVAILABLE (the
// node died), dials again and reaches another. A follower forwards the
// calls that need the leader (SendMessage, ReceiveMessage, AckMessage,
// ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue) to the
// leader's gRPC endpoint, with the client's metadata and deadline, and
// relays the answer: pop's state (receipt handles, invisible times) is the
// leader's. A forwarded receive carries the client's long-polling time
// (its settings reached the follower, not the leader). While no leader is known it waits for one, at most
// DefaultForwardTimeout within the call's deadline, then answers
// UNAVAILABLE (the client reconnects and resends). A new leader's pop
// starts from the replicated committed offsets, so messages in flight at
// a leader's death are delivered again (at once) and acks of the last
// replica.Config.CommitEvery may be repeated: consumers see redeliveries.
// DELAY messages go through the replicated scheduler, TRANSACTION ones
// through the leader's transaction manager (above). RecallMessage (a
// follower forwards it) cancels the timer in the leader's scheduler, and
// the cancel is part of the scheduler's replicated progress, so the next
// leader never delivers it either (recall.go).
//
// The admin's table changes (UPDATE_AND_CREATE_TOPIC,
// DELETE_TOPIC_IN_BROKER, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
// DELETE_SUBSCRIPTIONGROUP) go through raft as a log in AdminTopic
// (tables.go): every node applies them in order to its topic table, topic
// configuration (queue numbers, permission, message.type) and subscription
// groups (orderly groups are FIFO over gRPC too), so routes and FIFO queue
// choices agree on every node. Topics created on first use are every
// node's own, with the same defaults. A DELETE_TOPIC_IN_BROKER is logged
// in the raft entry that releases the topic's messages and every group's
// offsets of it, a DELETE_SUBSCRIPTIONGROUP with cleanOffset in the one
// that drops the group's committed offsets (release.go,
// replica.Node.DeleteTopic and ForgetGroup): every node does it at the
// same point of its log, so reads of the topic are empty on every node,
// its queue offsets are never handed out again, and a consumer of the
// group started afterwards on any node starts from its consume-from rule.
// The release point is in snapshots, and a node restored from one ends
// identical.
//
// Orderly queue locks (LOCK_BATCH_MQ) are every node's own, as every
// Apache broker's (RebalanceLockManager, lockInStrictMode off): the
// leader grants them, a follower grants none, so a client locks at the
// leader its routes name; a new leader starts with an empty table
// (locks.go).
//
// Access control (Config.ACL, the program's -acl): every node loads the
// same ACL file, and needs Config.ClusterSecret (-cluster-secret-file),
// which authenticates the raft port (replica.Config.ClusterSecret: a peer
// that cannot prove it is refused before raft reads anything) and keys the
// marks of forwarded requests. Each node checks what it serves itself —
// routes, pulls, offsets, heartbeats, AUTH_* reads, gRPC calls — as a
// single broker does. The writes a follower forwards (sends, send-backs,
// offset resets, table and ACL changes) are checked by the leader, which holds the newest
// rules: the follower refuses one without credentials, and passes the
// others on with the client's own fields and signature under a mark, an
// HMAC keyed by the cluster secret over the client's address, the code
// and the signature (acl.go). The leader verifies and removes the mark,
// then checks the client's signature and rules with the client's address;
// a request carrying a mark that does not verify (a client cannot make
// one) is refused NO_PERMISSION, so neither a follower nor a forged
// "forwarded" field gets a request past the rules. A forwarded v5 call is
// checked by the follower and again by the leader, marked the same way in
// its metadata (over the client's address, the method and its signature):
// a mark that does not verify is refused UNAUTHORIZED on any node.
//
// Apache 5.3's AUTH_* edits (createUser … deleteAcl, on any node) go
// through the admin log like the table changes: every node applies them in
// order to its own ACL file (written atomically, then in force). An edit
// is decided where it lands in the log: the leader checks it when it
// arrives and logs it with the client's address, and every node checks
// the editor's signature and rights again when applying it, against its
// rules at that point of the log — the same everywhere, so an edit logged
// after one that revoked its editor's right is refused on every node (and
// the editor answered NO_PERMISSION), however close the two came. A user
// created on one node sends through any node at once (sends are the
// leader's to check) and is refused everywhere once deleted; what a
// follower serves itself follows as soon as it applied the entry. A
// node's SIGHUP reload is that node's only: change every node's file, or
// edit through AUTH_*. Give every node the same initial file: a new node
// applies the whole admin log to it.
//
// The metrics and admin HTTP endpoint (Config.MetricsAddr, the program's
// -metrics-addr; http.go) has a single broker's paths and credentials.
// Metrics are the node's own (scrape every node; rocketmq_replica_leader
// says which leads). GET /admin/offsets answers the replicated committed
// offsets as the node applied them (without epochs, which are every
// node's own). POST /admin/reset goes through raft on the leader, as
// INVOKE_BROKER_TO_RESET_OFFSET does, and answers once raft committed the
// new offsets (503 with Retry-After and the cause when it did not: nothing
// moved). A follower checks the caller's credentials, forwards the reset
// to the leader as that remoting request (signed with the caller's
// credentials under the forwarding mark, so the leader checks it against
// its rules as an admin request) and answers the leader's result; while
// it knows no leader it answers 503 with Retry-After.
package replicated
