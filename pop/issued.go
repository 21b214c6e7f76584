package pop

import (
	"sort"
	"unsafe"
)

// issued.go recognizes the handles a pop of this Service returned when
// they come back as the very same strings (an in-process consumer acking
// what it popped, the usual case of an embedded broker): their bytes can
// only have been made by this Service, so the ack needs neither decoding
// nor a MAC check. Handles that arrive any other way (over a network,
// copied, or made up) take the full path of lookup.

// issuedBatch is what one pop's handles say: deliveries encodes them into
// one string, all, which each handle slices.
type issuedBatch struct {
	all  string
	gt   *groupTopic
	n    int
	ends [MaxBatch]int32 // ends[i]: where handle i ends in all
	hs   [MaxBatch]issuedHandle
}

type issuedHandle struct {
	offset int64
	inc    uint64
	queue  int32
	gen    uint32
}

// issuedRing is how many recent pops' batches a Service recognizes (a few
// consumers popping and acking at once each find theirs).
const issuedRing = 8

// add records h, which ends at end in all; past MaxBatch handles (no pop
// has more) b.n stops counting and the batch is not published.
func (b *issuedBatch) add(h *handle, end int) {
	if b.n == len(b.ends) {
		return
	}
	b.ends[b.n] = int32(end)
	b.hs[b.n] = issuedHandle{offset: h.offset, inc: h.inc, queue: int32(h.queue), gen: h.gen}
	b.n++
}

// publish makes b (complete, with its string) recognizable.
func (s *Service) publish(b *issuedBatch) {
	s.issued[s.issuedNext.Add(1)%issuedRing].Store(b)
}

// ownHandle reports whether str is exactly one of the handles of a
// recently published batch, and if so returns it parsed. Strings are
// immutable and the garbage collector does not move them, so a string
// whose bytes lie inside a batch's string, from one handle's start to
// its end, is that handle.
func (s *Service) ownHandle(str string) (handle, *groupTopic, bool) {
	if len(str) == 0 {
		return handle{}, nil, false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(str)))
	for i := range s.issued {
		b := s.issued[i].Load()
		if b == nil {
			continue
		}
		base := uintptr(unsafe.Pointer(unsafe.StringData(b.all)))
		if p < base || p-base >= uintptr(len(b.all)) {
			continue
		}
		start := int(p - base)
		k := sort.Search(b.n, func(k int) bool { return int(b.ends[k]) > start })
		if k == b.n || int(b.ends[k]) != start+len(str) || (k > 0 && int(b.ends[k-1]) != start) || (k == 0 && start != 0) {
			return handle{}, nil, false // a piece of handles, not one
		}
		ih := &b.hs[k]
		return handle{nonce: s.nonce, inc: ih.inc, queue: int(ih.queue), offset: ih.offset, gen: ih.gen,
			group: b.gt.key.group, topic: b.gt.key.topic}, b.gt, true
	}
	return handle{}, nil, false
}
