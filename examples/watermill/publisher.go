package brokercore

import (
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/brokercore/brokercore/store"
)

// Publisher is a Watermill message.Publisher that appends to a brokercore
// store. It is safe for concurrent use.
type Publisher struct {
	cfg    Config
	store  *store.Store
	owned  *sharedBackend // set when the constructor opened cfg.Dir
	logger watermill.LoggerAdapter
	next   atomic.Uint64 // round robin over the queues
	st     publisherCounters

	mu     sync.RWMutex // Publish holds it shared, Close exclusively
	closed bool
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher over cfg.Store, or over a store it opens in
// cfg.Dir and closes on Close.
func NewPublisher(cfg Config) (*Publisher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, _, owned, err := resolve(cfg, 1)
	if err != nil {
		return nil, err
	}
	return newPublisher(cfg, st, owned), nil
}

func newPublisher(cfg Config, st *store.Store, owned *sharedBackend) *Publisher {
	return &Publisher{
		cfg:    cfg,
		store:  st,
		owned:  owned,
		logger: cfg.Logger.With(watermill.LogFields{"component": "brokercore.publisher"}),
	}
}

// Publish appends msgs to topic as one atomic batch: after a crash either all
// of them are in the log or none. It returns once the store says they are
// durable (under its default SyncGroup policy, after the fsync), and wakes the
// subscribers waiting on topic.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrInvalidTopic)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrPublisherClosed
	}
	if len(msgs) == 0 {
		return nil
	}
	now := time.Now()
	batch := make([]*store.Message, len(msgs))
	for i, m := range msgs {
		batch[i] = toStore(topic, p.queueFor(m), m, now)
	}
	if err := p.store.Append(batch...); err != nil {
		p.st.failed.Add(1)
		p.logger.Error("publish failed", err, watermill.LogFields{"topic": topic, "messages": len(msgs)})
		return fmt.Errorf("brokercore watermill: publish %d messages to %q: %w", len(msgs), topic, err)
	}
	p.st.batches.Add(1)
	p.st.messages.Add(uint64(len(msgs)))
	p.logger.Trace("published", watermill.LogFields{"topic": topic, "messages": len(msgs),
		"first_offset": batch[0].LogOffset})
	return nil
}

// queueFor picks m's queue: by the hash of its PartitionKey metadata value
// if configured and present, else round robin.
func (p *Publisher) queueFor(m *message.Message) int {
	n := p.cfg.QueuesPerTopic
	if n == 1 {
		return 0
	}
	if p.cfg.PartitionKey != "" {
		if v, ok := m.Metadata[p.cfg.PartitionKey]; ok {
			h := fnv.New32a()
			_, _ = h.Write([]byte(v))
			return int(h.Sum32() % uint32(n))
		}
	}
	return int((p.next.Add(1) - 1) % uint64(n))
}

// Close waits for the Publish calls in progress, makes later ones fail with
// ErrPublisherClosed and, if the Publisher opened the store, closes it (the
// pair from NewPubSub closes it with the second of its two Close calls).
// Close is idempotent.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	return p.owned.release()
}
