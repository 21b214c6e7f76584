// Package replicated runs the RocketMQ-compatible remoting broker as one
// node of a raft cluster, on examples/cluster's replica package.
//
// Every node runs a name server and a broker. Writes go through raft on the
// leader: a SEND (delayed and timed ones through the leader's replicated
// scheduler) is answered once a majority has it on disk, and consumer
// offsets (UPDATE_CONSUMER_OFFSET, a pull's commit offset) are committed
// through raft. Pulls, offset queries and the consumer registry are served
// from the node's own replica. The name server of every node answers routes
// whose broker address is the leader's (its own while it knows no leader),
// so producers and consumers send their writes there; a follower that gets
// a write anyway answers SERVICE_NOT_AVAILABLE, which the official clients
// retry.
//
// What the official v2 Go client does on a leader change: it refreshes its
// routes every 30 s (internal._PullNameServerInterval, a constant) and on no
// answer code, so a client that was talking to a leader that died reaches
// the new one at its next refresh: within 30 s plus the election, not
// sooner. A client that starts after the election asks a live name server
// and goes to the new leader at once.
//
// Not replicated (yet): CONSUMER_SEND_MSG_BACK (the client then consumes
// the message again itself, later), transactions, the topic table (every
// node creates topics on its own, with the same defaults), orderly queue
// locks (every node has its own table: a new leader starts with none), the
// gRPC endpoint and the admin HTTP endpoint.
package replicated
