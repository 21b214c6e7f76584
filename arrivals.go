package brokercore

import (
	"context"
	"sync"
	"sync/atomic"
)

// Ends is what Arrivals reads of a log: a queue's next offset.
// *store.Store satisfies it.
type Ends interface {
	MaxOffset(topic string, queueID int) int64
}

// Arrivals is the long-poll waiter of protocol servers: a pull or receive
// that found nothing waits on its queue until a message arrives there, the
// queue's offsets are reset, its context ends or the Arrivals closes. It
// replaces a server's own map of waiters over the store's arrival hook.
//
// Hang Notify on the store's arrivals (store.Subscribe or
// store.Options.OnAppend) and call Wake after an offset reset; Open does
// both for Broker.Arrivals. A waiter costs no goroutine: each queue has at
// most one channel, made when the first waiter watches it and closed (then
// dropped) by the next arrival or wake, so a wake costs one close whatever
// the number of queues (and wakes the waiters of that queue only), and an
// arrival no one waits for costs a map lookup. It keeps one small entry per
// queue ever watched or woken.
//
// Arrivals is safe for concurrent use.
type Arrivals struct {
	src  Ends
	mu   sync.Mutex
	q    map[queueKey]*queueWait // under mu
	shut bool                    // under mu
	done chan struct{}

	notified, wakes, waits atomic.Uint64
}

type queueKey struct {
	topic string
	queue int
}

type queueWait struct {
	ch     chan struct{} // closed at the next arrival or wake; nil: no one watches
	resets uint64        // Wake calls so far
}

// ArrivalStats are the counters of an Arrivals.
type ArrivalStats struct {
	Watched  uint64 `json:"watched"`  // queues with a waiter now
	Notified uint64 `json:"notified"` // arrivals that woke a queue's waiters
	Wakes    uint64 `json:"wakes"`    // Wake calls (offset resets)
	Waits    uint64 `json:"waits"`    // Wait calls
}

// closedChan is what Watch returns after Close.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// NewArrivals returns an Arrivals over the queue ends of src.
func NewArrivals(src Ends) *Arrivals {
	return &Arrivals{src: src, q: map[queueKey]*queueWait{}, done: make(chan struct{})}
}

// Notify wakes the waiters of (topic, queueID): a message arrived. Its
// signature is the store's arrival hook's (next is not used).
func (a *Arrivals) Notify(topic string, queueID int, _ int64) {
	a.mu.Lock()
	w := a.q[queueKey{topic, queueID}]
	if w == nil || w.ch == nil {
		a.mu.Unlock()
		return
	}
	ch := w.ch
	w.ch = nil
	a.mu.Unlock()
	a.notified.Add(1)
	close(ch)
}

// Wake wakes the waiters of (topic, queueID) and makes every Wait on it
// return true: its offsets were reset, so what a waiter asked for may have
// changed. Open calls it after every offset reset (offset.Options.OnReset).
func (a *Arrivals) Wake(topic string, queueID int) {
	a.wakes.Add(1)
	a.mu.Lock()
	w := a.entry(queueKey{topic, queueID})
	w.resets++
	ch := w.ch
	w.ch = nil
	a.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// entry is the queue's wait state, made if missing; under mu.
func (a *Arrivals) entry(k queueKey) *queueWait {
	w := a.q[k]
	if w == nil {
		w = &queueWait{}
		a.q[k] = w
	}
	return w
}

// Watch returns a channel closed at the next arrival in (topic, queueID),
// Wake of it, or Close. Take it before looking at the queue, then wait on
// it (with the caller's own timer and shutdown in one select): an arrival
// between the look and the wait closes it, so no wake-up is lost. After
// Close it returns a closed channel; a loop that watches again must check
// Done.
func (a *Arrivals) Watch(topic string, queueID int) <-chan struct{} {
	ch, _ := a.watch(queueKey{topic, queueID})
	return ch
}

func (a *Arrivals) watch(k queueKey) (<-chan struct{}, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.shut {
		return closedChan, 0
	}
	w := a.entry(k)
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch, w.resets
}

// Wait returns true once (topic, queueID) holds a message at offset or
// past it (MaxOffset > offset), at once if it already does, or once the
// queue is woken by Wake (an offset reset: look again). It returns false
// when ctx ends or the Arrivals closes. An arrival below offset (the caller
// asked ahead of the end) keeps it waiting.
func (a *Arrivals) Wait(ctx context.Context, topic string, queueID int, offset int64) bool {
	a.waits.Add(1)
	k := queueKey{topic, queueID}
	ch, resets := a.watch(k)
	for {
		if a.closed() {
			return false
		}
		if a.src.MaxOffset(topic, queueID) > offset {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-a.done:
			return false
		}
		// Woken: look before watching again, so that a Wait the wake
		// answers leaves no channel armed behind it (Stats.Watched counts
		// queues someone waits on).
		if a.resetsOf(k) != resets {
			return !a.closed()
		}
		if a.src.MaxOffset(topic, queueID) > offset {
			return true
		}
		var r uint64
		if ch, r = a.watch(k); r != resets {
			return !a.closed()
		}
	}
}

// resetsOf is the queue's Wake count (0 once closed).
func (a *Arrivals) resetsOf(k queueKey) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.q[k]; w != nil {
		return w.resets
	}
	return 0
}

func (a *Arrivals) closed() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// Done is closed by Close.
func (a *Arrivals) Done() <-chan struct{} { return a.done }

// Close wakes every waiter (Wait returns false) and makes every later
// Watch return a closed channel. It is idempotent and does not cancel the
// arrival hook Notify hangs on (its owner does; Open's Broker does on
// Close).
func (a *Arrivals) Close() {
	a.mu.Lock()
	if a.shut {
		a.mu.Unlock()
		return
	}
	a.shut = true
	close(a.done)
	var chs []chan struct{}
	for _, w := range a.q {
		if w.ch != nil {
			chs = append(chs, w.ch)
		}
	}
	a.q = map[queueKey]*queueWait{}
	a.mu.Unlock()
	for _, ch := range chs {
		close(ch)
	}
}

// Stats returns a snapshot of the counters.
func (a *Arrivals) Stats() ArrivalStats {
	a.mu.Lock()
	var n uint64
	for _, w := range a.q {
		if w.ch != nil {
			n++
		}
	}
	a.mu.Unlock()
	return ArrivalStats{Watched: n, Notified: a.notified.Load(), Wakes: a.wakes.Load(), Waits: a.waits.Load()}
}
