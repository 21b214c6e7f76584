package brokercore

import (
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Defaults used for zero Config fields.
const (
	// DefaultQueuesPerTopic is the number of queues a Publisher spreads a topic
	// over. One queue keeps the whole topic in publish order.
	DefaultQueuesPerTopic = 1
	// DefaultInvisibleTime is how long a popped message stays hidden from the
	// other subscribers of its group while it waits for Ack. The subscriber
	// extends it while the handler is still working, so it only matters when
	// the process dies with the message in hand.
	DefaultInvisibleTime = 30 * time.Second
	// DefaultPollTime is how long one long-polling pop waits for a message
	// before it is issued again. Arrivals wake it at once.
	DefaultPollTime = 2 * time.Second
	// DefaultNackDelay is how long a nacked message waits before it is
	// delivered again: at once.
	DefaultNackDelay time.Duration = 0
	// DefaultBatchSize is how many messages one pop takes. They are handed to
	// the output channel one at a time, each after the previous one's Ack.
	DefaultBatchSize = 16
	// MaxBatchSize is the largest batch pop serves.
	MaxBatchSize = 32
	// RetryDelay is the pause after a failed pop before the next one.
	RetryDelay = 100 * time.Millisecond
)

// UUIDProperty is the store property that carries the Watermill message UUID.
// Every other property is a metadata entry of the message; a metadata entry
// under this name is overwritten by the UUID.
const UUIDProperty = "_watermill_message_uuid"

// Config configures a Publisher, a Subscriber or both (NewPubSub). The zero
// Config is not usable on its own: set Dir, or Store (and Pop for a
// Subscriber). Every other zero field means its default.
type Config struct {
	// Dir is a data directory. The constructor opens a Backend there
	// (brokercore.Open: the log in Dir/store, the pop service, the groups'
	// committed offsets in Dir/offsets; see OpenBackend) and the Publisher, the Subscriber, or the
	// pair from NewPubSub closes it on Close. A directory is opened by one
	// Backend at a time: to run several publishers and subscribers over one
	// directory, use NewPubSub, or OpenBackend once and pass Store and Pop.
	Dir string
	// StoreOptions and PopOptions are used when the constructor opens Dir.
	// Their Logger defaults to Logger bridged to slog; StoreOptions.OnAppend is
	// called before the pop service is woken.
	StoreOptions store.Options
	PopOptions   pop.Options

	// Store is an open store owned by the caller (Dir must be empty). Close
	// leaves it open.
	Store *store.Store
	// Pop is the pop service over Store, owned by the caller (pop.New
	// subscribes it to the store's arrivals). A Subscriber over Store needs
	// it; a Publisher ignores it.
	Pop *pop.Service

	// ConsumerGroup is the group a Subscriber pops for. Subscribers of one group
	// share its messages: each message goes to one of them, and one that was
	// not acked goes to the next. Empty means a fresh group for every
	// Subscriber, which therefore sees the whole topic from its oldest message
	// (like a Kafka consumer without a group). A group that never committed
	// starts at the oldest message, so a group created after publishing still
	// gets the old messages.
	ConsumerGroup string
	// QueuesPerTopic is how many queues a Publisher spreads a topic over
	// (default DefaultQueuesPerTopic). Order holds per queue.
	QueuesPerTopic int
	// PartitionKey is a metadata key: messages with the same value go to the
	// same queue. Empty means round robin over the queues.
	PartitionKey string

	// InvisibleTime is how long a popped message stays hidden from the rest of
	// its group while unacked (default DefaultInvisibleTime); extended while
	// its handler runs.
	InvisibleTime time.Duration
	// PollTime is the long-polling wait of one pop (default DefaultPollTime).
	PollTime time.Duration
	// FIFO makes a queue deliver strictly in order across all subscribers of
	// the group: while a batch is unacked no other subscriber gets the queue.
	FIFO bool
	// NackDelay is how long a nacked message stays hidden before it is
	// delivered again (default DefaultNackDelay). In FIFO mode the rest of its
	// batch waits with it, so the order holds.
	NackDelay time.Duration
	// BatchSize is how many messages one pop takes, 1..MaxBatchSize (default
	// DefaultBatchSize).
	BatchSize int

	// Logger receives the adapter's logs and, bridged to slog, those of the
	// store and pop service it opens. Nil means watermill.NopLogger.
	Logger watermill.LoggerAdapter
}

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Dir == "" && c.Store == nil:
		return c, fmt.Errorf("%w: set Dir or Store", ErrInvalidConfig)
	case c.Dir != "" && c.Store != nil:
		return c, fmt.Errorf("%w: set Dir or Store, not both", ErrInvalidConfig)
	case c.Pop != nil && c.Store == nil:
		return c, fmt.Errorf("%w: Pop without its Store", ErrInvalidConfig)
	case c.QueuesPerTopic < 0:
		return c, fmt.Errorf("%w: QueuesPerTopic %d", ErrInvalidConfig, c.QueuesPerTopic)
	case c.InvisibleTime < 0, c.PollTime < 0, c.NackDelay < 0:
		return c, fmt.Errorf("%w: negative duration (invisible %s, poll %s, nack delay %s)",
			ErrInvalidConfig, c.InvisibleTime, c.PollTime, c.NackDelay)
	case c.BatchSize < 0 || c.BatchSize > MaxBatchSize:
		return c, fmt.Errorf("%w: BatchSize %d not in 1..%d", ErrInvalidConfig, c.BatchSize, MaxBatchSize)
	}
	if c.QueuesPerTopic == 0 {
		c.QueuesPerTopic = DefaultQueuesPerTopic
	}
	if c.InvisibleTime == 0 {
		c.InvisibleTime = DefaultInvisibleTime
	}
	if c.PollTime == 0 {
		c.PollTime = DefaultPollTime
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
	return c, nil
}
