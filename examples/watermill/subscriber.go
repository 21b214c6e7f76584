package brokercore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/brokercore/brokercore/pop"
)

// Subscriber is a Watermill message.Subscriber that long-polls a brokercore
// pop service for its consumer group. It is safe for concurrent use; every
// Subscribe call runs one goroutine, which Close (or the cancelled ctx of
// that Subscribe call) stops and waits for.
type Subscriber struct {
	cfg      Config
	pop      *pop.Service
	owned    *sharedBackend
	group    string
	clientID string
	logger   watermill.LoggerAdapter
	subs     atomic.Uint64 // numbers the subscriptions for their client ids
	st       subscriberCounters

	ctx    context.Context // cancelled by Close; parent of every subscription
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed against wg.Add
	closed bool
	wg     sync.WaitGroup
}

var _ message.Subscriber = (*Subscriber)(nil)

// NewSubscriber returns a Subscriber over cfg.Store and cfg.Pop, or over a
// store and pop service it opens in cfg.Dir and closes on Close.
func NewSubscriber(cfg Config) (*Subscriber, error) {
	cfg, err := subscriberConfig(cfg)
	if err != nil {
		return nil, err
	}
	_, svc, owned, err := resolve(cfg, 1)
	if err != nil {
		return nil, err
	}
	return newSubscriber(cfg, svc, owned), nil
}

// NewPubSub returns a Publisher and a Subscriber over one store and pop
// service: cfg.Store and cfg.Pop, or those it opens in cfg.Dir, which are then
// closed once both the Publisher and the Subscriber are closed.
func NewPubSub(cfg Config) (*Publisher, *Subscriber, error) {
	cfg, err := subscriberConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	st, svc, owned, err := resolve(cfg, 2)
	if err != nil {
		return nil, nil, err
	}
	return newPublisher(cfg, st, owned), newSubscriber(cfg, svc, owned), nil
}

func subscriberConfig(cfg Config) (Config, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return cfg, err
	}
	if cfg.Store != nil && cfg.Pop == nil {
		return cfg, fmt.Errorf("%w: a Subscriber over Store needs its Pop service (see OpenBackend)", ErrInvalidConfig)
	}
	return cfg, nil
}

func newSubscriber(cfg Config, svc *pop.Service, owned *sharedBackend) *Subscriber {
	group := cfg.ConsumerGroup
	if group == "" {
		group = "watermill-" + watermill.NewShortUUID()
	}
	id := "watermill-" + watermill.NewShortUUID()
	ctx, cancel := context.WithCancel(context.Background())
	return &Subscriber{
		cfg:      cfg,
		pop:      svc,
		owned:    owned,
		group:    group,
		clientID: id,
		logger: cfg.Logger.With(watermill.LogFields{
			"component": "brokercore.subscriber", "group": group, "client": id}),
		ctx:    ctx,
		cancel: cancel,
	}
}

// Group is the consumer group the Subscriber pops for: Config.ConsumerGroup,
// or the fresh one it made up when that was empty.
func (s *Subscriber) Group() string { return s.group }

// Subscribe returns a channel that delivers topic's messages for the
// Subscriber's group, one at a time: the next message comes after the
// previous one's Ack or Nack. Ack removes the message for the group; Nack
// delivers it again after Config.NackDelay. The channel is closed when ctx is
// cancelled or the Subscriber is closed; messages handed out and not acked by
// then are handed back to the group at once.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if topic == "" {
		return nil, fmt.Errorf("%w: empty topic", ErrInvalidTopic)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrSubscriberClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	client := s.clientID + "/" + strconv.FormatUint(s.subs.Add(1), 10)
	c := &consumer{
		Subscriber: s,
		topic:      topic,
		client:     client,
		out:        make(chan *message.Message),
		logger:     s.logger.With(watermill.LogFields{"topic": topic, "client": client}),
	}
	go func() {
		defer s.wg.Done()
		defer cancel()
		defer stop()
		c.run(ctx)
	}()
	return c.out, nil
}

// Close stops every subscription, waits until their goroutines have handed
// back what they held and closed their channels, and, if the Subscriber
// opened the store, closes it (the pair from NewPubSub closes it with the
// second of its two Close calls). Close is idempotent.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return s.owned.release()
}

// Delivery describes where a delivered message comes from; the context of
// every message a Subscriber hands out carries it (see DeliveryFromContext).
type Delivery struct {
	Topic       string
	QueueID     int
	QueueOffset int64
	Attempts    int // 1 on the first delivery to the group
}

type deliveryKey struct{}

// DeliveryFromContext returns the Delivery of a message handed out by a
// Subscriber, from msg.Context().
func DeliveryFromContext(ctx context.Context) (Delivery, bool) {
	d, ok := ctx.Value(deliveryKey{}).(Delivery)
	return d, ok
}

// consumer is the goroutine behind one Subscribe call.
type consumer struct {
	*Subscriber
	topic  string
	client string
	out    chan *message.Message
	logger watermill.LoggerAdapter
	tries  uint64 // numbers FIFO attempt ids
}

// run pops until ctx ends or the pop service closes, then closes out.
func (c *consumer) run(ctx context.Context) {
	defer close(c.out)
	attempt := ""
	for ctx.Err() == nil {
		if c.cfg.FIFO && attempt == "" {
			// A FIFO client keeps its attempt id until a pop brings a batch:
			// retrying with the same id after an error re-pops the same batch
			// instead of being locked out by it.
			c.tries++
			attempt = c.client + "#" + strconv.FormatUint(c.tries, 10)
		}
		res, err := c.pop.Pop(ctx, pop.Request{
			Group:     c.group,
			Topic:     c.topic,
			ClientID:  c.client,
			QueueID:   pop.AllQueues,
			Max:       c.cfg.BatchSize,
			Invisible: c.cfg.InvisibleTime,
			Poll:      c.cfg.PollTime,
			FIFO:      c.cfg.FIFO,
			AttemptID: attempt,
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.st.popErrors.Add(1)
			switch {
			case errors.Is(err, pop.ErrClosed):
				c.logger.Info("pop service closed, subscription ends", nil)
				return
			case errors.Is(err, pop.ErrInvalid):
				c.logger.Error("pop refused the request, subscription ends", err, nil)
				return
			case errors.Is(err, pop.ErrLockTimeout):
				// The wait was bounded by PollTime: no spin, retry at once.
				c.logger.Debug("FIFO lock wait ran out, retrying with the same attempt id", watermill.LogFields{"attempt": attempt})
			default:
				c.logger.Error("pop failed, retrying", err, watermill.LogFields{"retry_in": RetryDelay.String()})
				sleep(ctx, RetryDelay)
			}
			continue
		}
		if len(res.Messages) == 0 {
			continue
		}
		attempt = ""
		c.st.pops.Add(1)
		c.deliver(ctx, newBatch(res.Messages))
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
