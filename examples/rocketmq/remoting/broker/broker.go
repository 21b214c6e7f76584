package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// Core is the broker core the remoting broker serves from: brokercore.Open's
// *Broker satisfies it.
type Core interface {
	Store() *store.Store
	// Arrivals wakes the long polls of pulls (brokercore.Broker.Arrivals).
	Arrivals() *brokercore.Arrivals
	// SendBack applies RocketMQ's send-back rules (brokercore.Broker.SendBack).
	SendBack(m *store.Message, group string, delayLevel, maxReconsume int) (*store.Message, error)
	Offsets() *offset.Manager
	Scheduler() *schedule.Scheduler
	Locks() *lock.Table
	Consumers() *consumer.Registry
}

// BrokerStats are the broker's counters.
type BrokerStats struct {
	Sent            uint64 `json:"sent"`
	SendRejected    uint64 `json:"send_rejected"`
	Delayed         uint64 `json:"delayed"`
	Pulls           uint64 `json:"pulls"`
	PulledMessages  uint64 `json:"pulled_messages"`
	PullSuspended   uint64 `json:"pull_suspended"`
	PullOffsetMoved uint64 `json:"pull_offset_moved"`
	Commits         uint64 `json:"commits"`
	StaleCommits    uint64 `json:"stale_commits"`
	SentBack        uint64 `json:"sent_back"`
	DeadLettered    uint64 `json:"dead_lettered"`
	Heartbeats      uint64 `json:"heartbeats"`
	Notifies        uint64 `json:"notifies"`
	Rejected        uint64 `json:"rejected"`
	Unsupported     uint64 `json:"unsupported"`
	Connections     int    `json:"connections"`
}

// Broker serves the broker side of the remoting protocol over a Core.
type Broker struct {
	core      Core
	st        *store.Store
	topics    *Topics
	opts      BrokerOptions
	log       *slog.Logger
	storeHost [8]byte

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	connMu sync.RWMutex
	conns  map[string]*transport.Conn

	notifyMu      sync.Mutex
	notifyPending map[string]bool

	rates *rates // the runtime table's TPS figures

	stats struct {
		sent, sendRejected, delayed, pulls, pulled, suspended, moved atomic.Uint64
		commits, stale, sentBack, dlq, heartbeats, notifies          atomic.Uint64
		rejected, unsupported                                        atomic.Uint64
	}
}

// NewBroker returns the broker handler over core. Call Close to stop its
// background work (it does not close core).
func NewBroker(core Core, topics *Topics, opts BrokerOptions) *Broker {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{core: core, st: core.Store(), topics: topics, opts: opts,
		log: opts.Logger.With("server", "broker"), storeHost: wire.HostBytes(opts.Addr),
		ctx: ctx, cancel: cancel, conns: map[string]*transport.Conn{},
		notifyPending: map[string]bool{}, rates: newRates(time.Now())}
	b.wg.Add(1)
	go b.sampleRates()
	return b
}

// Close stops the broker's background work and waits for it.
func (b *Broker) Close() error {
	b.cancel()
	b.wg.Wait()
	return nil
}

// Stats returns the broker's counters.
func (b *Broker) Stats() BrokerStats {
	b.connMu.RLock()
	n := len(b.conns)
	b.connMu.RUnlock()
	s := &b.stats
	return BrokerStats{Sent: s.sent.Load(), SendRejected: s.sendRejected.Load(), Delayed: s.delayed.Load(),
		Pulls: s.pulls.Load(), PulledMessages: s.pulled.Load(), PullSuspended: s.suspended.Load(),
		PullOffsetMoved: s.moved.Load(), Commits: s.commits.Load(), StaleCommits: s.stale.Load(),
		SentBack: s.sentBack.Load(), DeadLettered: s.dlq.Load(), Heartbeats: s.heartbeats.Load(),
		Notifies: s.notifies.Load(), Rejected: s.rejected.Load(), Unsupported: s.unsupported.Load(),
		Connections: n}
}

// ConnOpened implements transport.ConnObserver.
func (b *Broker) ConnOpened(c *transport.Conn) {
	b.connMu.Lock()
	b.conns[c.ID()] = c
	b.connMu.Unlock()
}

// ConnClosed implements transport.ConnObserver: the connection is the channel, its
// close removes its consumers at once (the client never unregisters).
func (b *Broker) ConnClosed(c *transport.Conn) {
	b.connMu.Lock()
	delete(b.conns, c.ID())
	b.connMu.Unlock()
	b.releaseOnShutdown(c)
	if groups := b.core.Consumers().ChannelClosed(c.ID()); len(groups) > 0 {
		b.log.Info("channel closed", "channel", c.ID(), "client", clientIDOf(c), "groups", groups)
	}
}

// OnConsumerEvent is the consumer registry's OnEvent: a group's member set
// changed, so its members are told to rebalance.
func (b *Broker) OnConsumerEvent(ev consumer.Event) {
	if ev.Kind != consumer.EventChange {
		return
	}
	b.notifyClients(ev.Group, ev.Clients)
}

// OnLockEvent is the lock table's OnEvent: when a lease expires, its group
// is told to rebalance, so a member takes the queue over now instead of at
// its next periodic rebalance.
func (b *Broker) OnLockEvent(ev lock.Event) {
	if ev.Kind != lock.EventExpired {
		return
	}
	b.log.Info("lock expired", "group", ev.Group, "topic", ev.Queue.Topic, "queue", ev.Queue.QueueID,
		"old_client", ev.Client)
	b.notifyGroup(ev.Group)
}

func (b *Broker) notifyGroup(group string) {
	b.notifyClients(group, b.core.Consumers().Clients(group))
}

func (b *Broker) notifyClients(group string, clients []consumer.Client) {
	b.connMu.RLock()
	defer b.connMu.RUnlock()
	for _, cl := range clients {
		if c := b.conns[cl.ChannelID]; c != nil {
			if c.Notify(wire.CodeNotifyConsumerIdsChanged, map[string]string{"consumerGroup": group}) {
				b.stats.notifies.Add(1)
			}
		}
	}
}

// notifyLater tells group to rebalance after d, once per group at a time.
func (b *Broker) notifyLater(group string, d time.Duration) {
	if d < 0 {
		return
	}
	b.notifyMu.Lock()
	if b.notifyPending[group] {
		b.notifyMu.Unlock()
		return
	}
	b.notifyPending[group] = true
	b.notifyMu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-b.ctx.Done():
		}
		b.notifyMu.Lock()
		delete(b.notifyPending, group)
		b.notifyMu.Unlock()
		if b.ctx.Err() == nil {
			b.notifyGroup(group)
		}
	}()
}

// storeCode maps a store error to a response code.
func storeCode(err error) int16 {
	switch {
	case errors.Is(err, store.ErrInvalid):
		return wire.MessageIllegal
	case errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrFailed):
		return wire.ServiceNotAvailable
	}
	return wire.SystemError
}

func clientIDOf(c *transport.Conn) string {
	if v, ok := c.Value("clientID", nil).(string); ok {
		return v
	}
	return ""
}
