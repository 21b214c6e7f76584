package store

import (
	"sync"
	"sync/atomic"
)

// hooks holds the arrival hooks registered after Open, copy-on-write so that
// notify reads them without a lock.
type hooks struct {
	mu   sync.Mutex // serializes writers
	list atomic.Pointer[[]*hook]
}

type hook struct {
	fn func(topic string, queueID int, next int64)
}

func (h *hooks) add(fn func(topic string, queueID int, next int64)) (cancel func()) {
	hk := &hook{fn: fn}
	h.mu.Lock()
	var cur []*hook
	if p := h.list.Load(); p != nil {
		cur = *p
	}
	next := append(append(make([]*hook, 0, len(cur)+1), cur...), hk)
	h.list.Store(&next)
	h.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { h.remove(hk) }) }
}

func (h *hooks) remove(hk *hook) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.list.Load()
	if p == nil {
		return
	}
	next := make([]*hook, 0, len(*p))
	for _, x := range *p {
		if x != hk {
			next = append(next, x)
		}
	}
	h.list.Store(&next)
}

func (h *hooks) any() bool {
	p := h.list.Load()
	return p != nil && len(*p) > 0
}

func (h *hooks) call(topic string, queueID int, next int64) {
	p := h.list.Load()
	if p == nil {
		return
	}
	for _, x := range *p {
		x.fn(topic, queueID, next)
	}
}

// Subscribe registers fn as an arrival hook after Open, with the guarantees
// of Options.OnAppend: it is called once per (topic, queue) of each appended
// batch with the queue's next offset, after the records are readable (after
// their fsync under SyncGroup), never under a store lock, possibly from
// several goroutines at once. Hooks registered this way run after
// Options.OnAppend. The returned cancel removes the hook; it is idempotent,
// and once it returns fn is not called for appends that start later.
//
// Subscribe is how a pop service wires itself to the store without the
// host forwarding OnAppend: pop.New finds it by type assertion.
func (s *Store) Subscribe(fn func(topic string, queueID int, next int64)) (cancel func()) {
	if fn == nil {
		return func() {}
	}
	return s.hooks.add(fn)
}

// Done returns a channel that is closed when Close begins, so a component
// built over the store (a long poll, a scheduler) can stop waiting for
// arrivals that will never come and answer its own ErrClosed.
func (s *Store) Done() <-chan struct{} { return s.done }
