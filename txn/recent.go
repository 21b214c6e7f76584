package txn

import (
	"maps"
	"sync"

	"github.com/brokercore/brokercore/store"
)

// Bounds of the recent halves.
const (
	maxRecent      = 4096
	maxRecentBytes = 16 << 20
)

// recent keeps copies of the halves this Manager prepared, a bounded
// number, so that resolving one soon after does not read it back from the
// log: the copy is what Append stored (Append fills in the offsets and the
// time as Read returns them). A half leaves once an append about its
// transaction succeeded, or oldest first past maxRecent halves or
// maxRecentBytes; without it the log is read, as after a restart.
type recent struct {
	limit int // halves kept (0: maxRecent)
	mu    sync.Mutex
	m     map[int64]*store.Message
	order []int64 // ids in the order they came; some may have left already
	bytes int
}

func (r *recent) add(h *store.Message) {
	c := *h
	c.Properties = maps.Clone(h.Properties)
	c.Body = append([]byte(nil), h.Body...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[int64]*store.Message)
	}
	if _, ok := r.m[c.QueueOffset]; ok {
		return
	}
	r.m[c.QueueOffset] = &c
	r.order = append(r.order, c.QueueOffset)
	r.bytes += len(c.Body)
	limit := r.limit
	if limit == 0 {
		limit = maxRecent
	}
	for len(r.m) > limit || r.bytes > maxRecentBytes {
		r.removeLocked(r.order[0])
		r.order = r.order[1:]
	}
	if len(r.order) > 2*limit { // ids that left on their own
		live := r.order[:0]
		for _, id := range r.order {
			if _, ok := r.m[id]; ok {
				live = append(live, id)
			}
		}
		r.order = live
	}
}

// get returns the half of transaction id, or nil.
func (r *recent) get(id int64) *store.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

func (r *recent) remove(ids []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.removeLocked(id)
	}
}

func (r *recent) removeLocked(id int64) {
	if h, ok := r.m[id]; ok {
		r.bytes -= len(h.Body)
		delete(r.m, id)
	}
}
