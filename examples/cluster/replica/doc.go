// Package replica replicates a brokercore core over hashicorp/raft, for a
// host to wire into its own protocol server (examples/cluster's HTTP API is
// one such host).
//
// A Node is one member: a raft voter whose state machine feeds a local
// store.Store, and — while it leads — a pop service and a scheduler over
// that store, built fresh for every term over the replicated state:
//
//   - Produce (one atomic batch; ProduceDelayed, ProduceAt for the
//     scheduler) is acknowledged once a majority has it on disk; every
//     node assigns the same offsets and timestamps. SendBack (a message a
//     consumer gives back: retry topic through the scheduler, or dead
//     letters) and ProduceSystem (the host's own state in reserved topics)
//     are the broker's own writes, checked with the rules for those.
//   - Pop, Ack, ChangeInvisible run on the leader; acknowledged consumer
//     offsets are committed through raft every Config.CommitEvery, and
//     ResetOffset moves one (with a new epoch that fences older acks).
//   - The scheduler's deliveries are raft entries that carry its progress
//     and apply only on top of the progress they started from, so a
//     deposed leader delivers nothing and a retried delivery nothing twice.
//   - DeleteTopic releases a topic (store.DeleteTopic) and drops its
//     offsets, ForgetGroup drops a group's offsets: raft entries (with the
//     host's record of the delete, if it gives one), so every node hides
//     the same messages at the same point of its log (the release points
//     travel in snapshots). CancelTimer and CancelTimerAt cancel a timer
//     in the leader's scheduler, part of its progress.
//   - With Config.Transactions, every leader term runs a txn.Manager
//     (Transactions) rebuilt from the replica after the term's barrier and
//     closed with the term; its records are raft entries that apply only
//     in that term (a commit's real message and op record one batch), so
//     only the leader of the moment appends them or checks back.
//   - AddMember / RemoveMember change the voters; every member's client
//     address (Config.Addr) is replicated before it votes.
//   - Snapshots carry the store and the small state; a node far behind
//     catches up from one.
//
// Writes need the leader. A follower answers a *NotLeaderError
// (errors.Is(err, ErrNotLeader)) naming the leader's raft id and client
// address, for the host to redirect (Leader() says the same). Bad input is
// refused before anything is proposed (ErrInvalid; produces are checked
// with brokercore.CheckProduce). An entry the state machine refuses anyway
// is a replicated, deterministic rejection (ErrRejected): every node
// decides the same and goes on. ErrNotCommitted means raft did not confirm
// the entry: it may still be committed by the next leader, so clients that
// retry should deduplicate by message keys.
//
// # Raft port authentication
//
// With Config.ClusterSecret (the same on every member; LoadSecret reads a
// file of it) every connection to the raft port starts with a mutual
// HMAC-SHA256 challenge–response over both sides' random nonces, before the
// group header and before any raft RPC is read; a peer that cannot prove the
// secret is closed, logged and counted (RaftRefused). AuthStream does it
// around any raft.StreamLayer, for a host that builds its own transport.
// Without a secret a RaftAddr beyond loopback is refused (ErrInsecureRaft)
// unless Config.InsecureRaft. It authenticates; it does not encrypt.
//
// # Several raft groups
//
// Groups (OpenGroups) runs several raft groups in one process and shards
// the queues over them: queue q of every topic belongs to group q mod N
// (GroupOf), on every member and across restarts (a data directory keeps
// its N). Each group is a whole Node — its own leader, raft log, store and
// directory, membership (AddMember/RemoveMember name the group), snapshots,
// and a scheduler on its leader over its store, fenced by its raft — and
// all of a process's groups share one TCP listener (each connection names
// its group). Groups' Produce, Pop, Ack, ResetOffset, … route by queue and
// answer the group's *NotLeaderError (NotLeaderError.Group, the group's
// leader); a pop names its queue, its handles name their group. With one
// group, Groups is exactly a Node on Config.Dir.
package replica
