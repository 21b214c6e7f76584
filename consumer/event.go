package consumer

import (
	"strconv"
	"sync"
)

// EventKind says what happened to a group.
type EventKind int

const (
	// EventChange: the group's client set changed; Event.Clients is the new
	// set (empty when the last client left).
	EventChange EventKind = iota + 1
	// EventRegister: the group came into existence (its first client joined).
	EventRegister
	// EventUnregister: the group was left with no clients and was removed,
	// together with its subscriptions.
	EventUnregister
	// EventClientRegister: Event.Client joined the group.
	EventClientRegister
	// EventClientUnregister: Event.Client left the group (unregister, channel
	// close, expiry, or replaced by another client id on the same channel).
	EventClientUnregister
)

// String returns the kind's name, e.g. "Change".
func (k EventKind) String() string {
	switch k {
	case EventChange:
		return "Change"
	case EventRegister:
		return "Register"
	case EventUnregister:
		return "Unregister"
	case EventClientRegister:
		return "ClientRegister"
	case EventClientUnregister:
		return "ClientUnregister"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one change of the registry, handed to Options.OnEvent.
//
// Client is set for EventClientRegister and EventClientUnregister; Clients is
// set for EventChange and is a fresh slice the handler owns.
type Event struct {
	Kind    EventKind
	Group   string
	Client  Client
	Clients []Client
}

// dispatcher delivers events outside the registry lock, in the order they
// were produced, one at a time.
//
// Events are queued while the registry lock is held (so the queue order is
// the order of the mutations) and drained after it is released by whichever
// registry call finds nobody else draining. A handler that calls back into
// the registry only queues more events; the drain loop it is running under
// delivers them after the handler returns, so there is no deadlock and no
// reordering.
type dispatcher struct {
	fn func(Event)

	mu       sync.Mutex
	queue    []Event
	draining bool
}

// push queues events. Called with the registry lock held.
func (d *dispatcher) push(evs []Event) {
	if d.fn == nil || len(evs) == 0 {
		return
	}
	d.mu.Lock()
	d.queue = append(d.queue, evs...)
	d.mu.Unlock()
}

// drain delivers queued events unless another call is already doing so.
// Called without the registry lock.
func (d *dispatcher) drain() {
	if d.fn == nil {
		return
	}
	d.mu.Lock()
	if d.draining {
		d.mu.Unlock()
		return
	}
	d.draining = true
	for len(d.queue) > 0 {
		batch := d.queue
		d.queue = nil
		d.mu.Unlock()
		d.deliver(batch)
		d.mu.Lock()
	}
	d.draining = false
	d.mu.Unlock()
}

// deliver calls the handler for each event. If the handler panics, the
// undelivered rest goes back to the front of the queue and the drain state is
// reset before the panic continues, so later calls still deliver.
func (d *dispatcher) deliver(batch []Event) {
	i := 0
	defer func() {
		if i < len(batch) {
			d.mu.Lock()
			d.queue = append(batch[i+1:len(batch):len(batch)], d.queue...)
			d.draining = false
			d.mu.Unlock()
		}
	}()
	for ; i < len(batch); i++ {
		d.fn(batch[i])
	}
}
