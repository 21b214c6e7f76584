package grpcapi

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/brokercore/brokercore/acl"
)

// Defaults applied for zero fields of Options.
const (
	// DefaultCluster is the cluster stamped on stored messages.
	DefaultCluster = "DefaultCluster"
	// DefaultQueues is the number of queues every topic's route lists.
	DefaultQueues = 8
	// DefaultFIFOSuffix marks a FIFO consumer group: RocketMQ makes FIFO a
	// group attribute set by an admin call; here the name says it.
	DefaultFIFOSuffix = "-fifo"
	// DefaultMaxAttempts is the number of deliveries of a message, the first
	// included, reported to consumers (RocketMQ's 16). It must match the
	// pop service's MaxAttempts.
	DefaultMaxAttempts = 16
	// DefaultBackoffInitial, DefaultBackoffMax and DefaultBackoffMultiplier
	// are the consumers' retry backoff: exponential from 1 s, ×2, capped at
	// 10 s, so a poison message reaches the dead-letter topic in minutes.
	DefaultBackoffInitial    = time.Second
	DefaultBackoffMax        = 10 * time.Second
	DefaultBackoffMultiplier = 2
	// ProducerMaxAttempts, ProducerBackoffInitial, ProducerBackoffMax and
	// ProducerBackoffMultiplier are the send retry policy every producer's
	// settings answer carries: Apache's proxy's defaults
	// (grpcClientProducerMaxAttempts, …BackoffInitialMillis,
	// …BackoffMaxMillis, …BackoffMultiplier).
	ProducerMaxAttempts       = 3
	ProducerBackoffInitial    = 10 * time.Millisecond
	ProducerBackoffMax        = time.Second
	ProducerBackoffMultiplier = 2
	// DefaultBatchSize is the push consumers' receive batch size.
	DefaultBatchSize = 32
	// DefaultLongPolling is the push consumers' long-polling time, and the
	// long-polling time of a receive whose client has not told its own.
	DefaultLongPolling = 20 * time.Second
	// DefaultMaxBodySize is the largest message body accepted (4 MiB).
	DefaultMaxBodySize = 4 << 20
	// DefaultReadBufferSize is each connection's read buffer: grpc-go's
	// default.
	DefaultReadBufferSize = 32 << 10
	// DefaultHandshakeTimeout bounds the first byte and the TLS handshake of
	// a new connection.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultDeadlineMargin is how long before the client's deadline a
	// long-polling receive ends, so its answer arrives in time.
	DefaultDeadlineMargin = 1500 * time.Millisecond
	// DefaultSettingsHold is how long the first settings answer of a
	// Telemetry stream waits for the client's first settings re-sync.
	DefaultSettingsHold = 1500 * time.Millisecond
	// DefaultClientExpiry is how long a client that sent nothing (no
	// heartbeat, no call) is remembered.
	DefaultClientExpiry = 2 * time.Minute
)

// Options configures a Server. The zero value is a working default.
type Options struct {
	// Advertise is the address ("host:port") routes and assignments name,
	// or several IP addresses separated by ";" (a replicated cluster's
	// nodes); "" = the address the client used to reach the server (its
	// access point), or the listener's address.
	Advertise string
	// BrokerName is the broker name in routes (default "brokercore").
	BrokerName string
	// Cluster is the broker's cluster, stamped on every stored message as
	// its CLUSTER property, as Apache's SendMessageProcessor does for the
	// proxy's sends (default DefaultCluster, the remoting broker's too).
	Cluster string
	// CertDir keeps the self-signed TLS certificate (generated on first
	// start, stable across restarts); "" = a fresh one in memory.
	CertDir string
	// Queues is the number of queues of every topic's route (default
	// DefaultQueues) when QueueCount is nil. A FIFO message goes to queue
	// hash(message_group) mod the count; a normal one round robin.
	Queues int
	// QueueCount, if set, gives a topic's queue count (creating the topic
	// if needed), so that the gRPC routes agree with another protocol's
	// topic table; an error answers the call ILLEGAL_TOPIC.
	QueueCount func(topic string) (int, error)
	// FIFOSuffix marks FIFO consumer groups (default DefaultFIFOSuffix);
	// FIFOGroups names more.
	FIFOSuffix string
	FIFOGroups []string
	// GroupFIFO, if set, reports groups the host's subscription group
	// table marks orderly (RocketMQ's consumeMessageOrderly, set with
	// mqadmin updateSubGroup -o true): they are FIFO whatever their name.
	// It is called for every receive and settings answer; keep it cheap.
	GroupFIFO func(group string) bool
	// TopicMessageType, if set, gives a topic's message.type attribute
	// (Apache's TopicMessageType: "NORMAL", "FIFO", "DELAY",
	// "TRANSACTION"; "" or "MIXED" = any): its routes accept that type only
	// and a send of another type is MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, as
	// Apache's proxy does. Called for every route and send; keep it cheap.
	TopicMessageType func(topic string) string
	// MaxAttempts is the total number of deliveries of a message reported
	// to consumers (default DefaultMaxAttempts); the pop service must be
	// configured with the same value (it dead-letters after that many).
	MaxAttempts int
	// BackoffInitial, BackoffMax and BackoffMultiplier are the consumers'
	// exponential retry backoff.
	BackoffInitial, BackoffMax time.Duration
	BackoffMultiplier          float64
	// BatchSize is the push consumers' receive batch size (1..32, default
	// DefaultBatchSize; FIFO groups always get 1, see the package doc).
	BatchSize int
	// LongPolling is the push consumers' long-polling time (default
	// DefaultLongPolling).
	LongPolling time.Duration
	// PushInvisible is the invisible time of a receive that names none (the
	// push consumer's auto_renew receives); 0 = 60 s plus the whole retry
	// backoff of MaxAttempts deliveries, so a FIFO push consumer's local
	// retries finish before the message could come back.
	PushInvisible time.Duration
	// MaxBodySize is the largest accepted body (default DefaultMaxBodySize).
	MaxBodySize int
	// ACL, if set, authenticates every call by its v5 signature and
	// authorizes each request before it runs (see auth.go); nil = none.
	ACL *acl.Authorizer
	// ClientAddr, if set, names a call's client when it is not the
	// connection's peer (a replicated leader serving a call a member
	// forwarded, whose client address the member vouched for): ok false
	// is the peer's address; an error refuses the call UNAUTHORIZED.
	ClientAddr func(ctx context.Context) (addr netip.Addr, ok bool, err error)
	// ReadBufferSize is each connection's read buffer (default
	// DefaultReadBufferSize). It is most of what an idle connection costs:
	// about 38 KB of heap in plaintext and 44 KB over TLS with the
	// default, 9 KB and 16 KB with 4 KiB (TestIdleConnectionsAreCheap). A small buffer costs CPU under load, when many
	// frames wait to be read (a read per few frames instead of per dozens):
	// in alternated runs at load 10-16, 4 KiB took a median 1.38x the
	// broker CPU per send of 32 KiB. Frames larger than it are read
	// straight into their own buffers.
	ReadBufferSize int
	// HandshakeTimeout bounds a new connection's first byte and TLS
	// handshake (default DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// DeadlineMargin: a long-polling receive ends this long before the
	// client's deadline (default DefaultDeadlineMargin).
	DeadlineMargin time.Duration
	// ClientExpiry: a silent client is forgotten after it (default
	// DefaultClientExpiry).
	ClientExpiry time.Duration
	// SettingsHold holds the first settings answer of a Telemetry stream
	// until the client's first settings re-sync arrived (v5.1.4 sends it
	// 1 s after Start), at most this long; negative = answer at once
	// (default DefaultSettingsHold). The stock v5.1.4 client writes the
	// settings it applies without synchronisation against that re-sync,
	// which reads them: a data race inside the client that the race
	// detector reports in any program (tests included) running it against
	// a server that answers at once. Answering after the re-sync orders
	// the two. It costs each client's Start about a second.
	SettingsHold time.Duration
	// Writer, if set, takes every write over (see Writer): a replicated
	// core. Pop, if set, replaces the Broker's pop service (a replicated
	// core's leader runs its own).
	Writer Writer
	Pop    Popper
	// Timers, if set, cancels the timers RecallMessage names (a Writer's
	// scheduler; the Broker's Scheduler otherwise).
	Timers Timers
	// UnaryInterceptors and StreamInterceptors run before the server's own
	// handlers (after its metrics and ACL): a replicated host forwards the
	// calls that need the leader with them.
	UnaryInterceptors  []grpc.UnaryServerInterceptor
	StreamInterceptors []grpc.StreamServerInterceptor
	// Now is the clock of client bookkeeping (nil = time.Now).
	Now func() time.Time
	// Logger receives rejected requests, dead letters and connection events
	// with the usual keys (nil = discard).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.BrokerName == "" {
		o.BrokerName = "brokercore"
	}
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	if o.Queues <= 0 {
		o.Queues = DefaultQueues
	}
	if o.FIFOSuffix == "" {
		o.FIFOSuffix = DefaultFIFOSuffix
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.BackoffInitial <= 0 {
		o.BackoffInitial = DefaultBackoffInitial
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.BackoffMax < o.BackoffInitial {
		o.BackoffMax = o.BackoffInitial
	}
	if o.BackoffMultiplier < 1 {
		o.BackoffMultiplier = DefaultBackoffMultiplier
	}
	if o.BatchSize <= 0 || o.BatchSize > 32 {
		o.BatchSize = DefaultBatchSize
	}
	if o.LongPolling <= 0 {
		o.LongPolling = DefaultLongPolling
	}
	if o.PushInvisible <= 0 {
		o.PushInvisible = time.Minute + o.retryBudget()
	}
	if o.MaxBodySize <= 0 {
		o.MaxBodySize = DefaultMaxBodySize
	}
	if o.ReadBufferSize <= 0 {
		o.ReadBufferSize = DefaultReadBufferSize
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.DeadlineMargin <= 0 {
		o.DeadlineMargin = DefaultDeadlineMargin
	}
	if o.SettingsHold == 0 {
		o.SettingsHold = DefaultSettingsHold
	}
	if o.ClientExpiry <= 0 {
		o.ClientExpiry = DefaultClientExpiry
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// resyncGap is how long after a Telemetry stream's first settings command
// a command counts as the client's 1-s re-sync rather than one more of
// Start's per-route syncs: two fifths of SettingsHold (600 ms by default).
func (o Options) resyncGap() time.Duration { return o.SettingsHold * 2 / 5 }

// backoff is the retry delay after the failed delivery number attempt
// (1 = the first), as the client computes it from the settings.
func (o Options) backoff(attempt int) time.Duration {
	d := float64(o.BackoffInitial)
	for i := 1; i < attempt && d < float64(o.BackoffMax); i++ {
		d *= o.BackoffMultiplier
	}
	return min(time.Duration(d), o.BackoffMax)
}

// retryBudget is the sum of the backoffs between MaxAttempts deliveries.
func (o Options) retryBudget() time.Duration {
	var sum time.Duration
	for a := 1; a < o.MaxAttempts; a++ {
		sum += o.backoff(a)
	}
	return sum
}

// isFIFO reports whether group consumes in FIFO order.
func (o Options) isFIFO(group string) bool {
	if strings.HasSuffix(group, o.FIFOSuffix) {
		return true
	}
	for _, g := range o.FIFOGroups {
		if g == group {
			return true
		}
	}
	return o.GroupFIFO != nil && o.GroupFIFO(group)
}
