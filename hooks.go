package brokercore

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
)

// OffsetReset is one offset reset (offset.Options.OnReset's arguments): the
// queue's committed offset is now Offset under the new Epoch.
type OffsetReset struct {
	Group, Topic string
	QueueID      int
	Offset       int64
	Epoch        uint64
}

// hookList is a list of subscribers called in subscription order. The list
// is copied on write, so a call holds no lock while the subscribers run and
// a subscriber may subscribe or unsubscribe (itself too) from its call.
type hookList[E any] struct {
	mu   sync.Mutex // serializes add and remove
	subs atomic.Pointer[[]*hookSub[E]]
}

type hookSub[E any] struct{ fn func(E) }

// add subscribes fn; the returned remove is idempotent, and once it
// returns fn is not called for events that start later.
func (h *hookList[E]) add(fn func(E)) (remove func()) {
	if fn == nil {
		return func() {}
	}
	s := &hookSub[E]{fn: fn}
	h.mu.Lock()
	h.subs.Store(new(append(h.load(), s)))
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			old := h.load()
			i := slices.Index(old, s)
			next := append(old[:i:i], old[i+1:]...)
			h.subs.Store(&next)
		})
	}
}

func (h *hookList[E]) load() []*hookSub[E] {
	if p := h.subs.Load(); p != nil {
		return *p
	}
	return nil
}

// call hands e to every subscriber, in order, on the caller's goroutine.
func (h *hookList[E]) call(e E) {
	for _, s := range h.load() {
		s.fn(e)
	}
}

// OnConsumerEvent subscribes fn to the consumer registry's events after
// Open: it is called synchronously, for every event, in the order the
// registry reports them (consumer.Options.OnEvent's guarantees), after the
// host's own Options.Consumer.OnEvent, and never under a registry lock.
// Subscribers run in the order they subscribed. remove unsubscribes: it is
// idempotent, and once it returns fn gets no event that starts later. Safe
// to call at any time, from any goroutine, from a hook too.
func (b *Broker) OnConsumerEvent(fn func(consumer.Event)) (remove func()) {
	return b.consumerHooks.add(fn)
}

// OnLockEvent subscribes fn to the lock table's lease changes after Open,
// with lock.Options.OnEvent's guarantees (synchronously, outside the
// table's locks), after the host's own Options.Lock.OnEvent; remove as for
// OnConsumerEvent.
func (b *Broker) OnLockEvent(fn func(lock.Event)) (remove func()) {
	return b.lockHooks.add(fn)
}

// OnOffsetReset subscribes fn to every offset reset after Open, called
// synchronously after the reset is persisted, after Open's own wake-ups
// (pop's long polls and Arrivals) and the host's own
// Options.Offset.OnReset; remove as for OnConsumerEvent.
func (b *Broker) OnOffsetReset(fn func(OffsetReset)) (remove func()) {
	return b.resetHooks.add(fn)
}
