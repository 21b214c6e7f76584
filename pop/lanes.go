package pop

// lanes.go keeps the invisible entries of a queue ordered by visible time
// cheaply. Entries hidden for the same duration become visible in the
// order they were hidden (the clock does not go back), so each duration
// has a lane: a FIFO of slots, O(1) to add and to find the earliest. A
// queue has at most maxLanes lanes; an entry whose duration has no lane,
// or whose visible time would be earlier than its lane's last one (the
// clock was set back), goes to the slot heap instead. Removal is lazy:
// an item names its entry's hide sequence number and is skipped once the
// entry was hidden again or left.

const maxLanes = 8

type laneItem struct {
	at   int64 // the entry's visible time when it joined the lane
	slot int32
	hseq uint32
}

type lane struct {
	dur   int64 // the invisible duration of its entries
	items []laneItem
	head  int
	dead  int // items whose entry left the lane
}

// laneOf returns the index of the lane for dur, or -1 (use the heap).
func (q *queueState) laneOf(dur int64, visibleAt int64) int {
	for i := range q.lanes {
		l := &q.lanes[i]
		if l.dur != dur {
			continue
		}
		if n := len(l.items); n > l.head && l.items[n-1].at > visibleAt {
			return -1 // the clock was set back: keep the lane in order
		}
		return i
	}
	if dur <= 0 || len(q.lanes) >= maxLanes {
		return -1
	}
	q.lanes = append(q.lanes, lane{dur: dur})
	return len(q.lanes) - 1
}

func (q *queueState) valid(li int, it laneItem) bool {
	e := &q.slab[it.slot]
	return e.where == inHidden && int(e.lane) == li && e.hseq == it.hseq
}

// laneHead returns the earliest live item of lane li, dropping dead ones.
func (q *queueState) laneHead(li int) (int32, bool) {
	l := &q.lanes[li]
	for l.head < len(l.items) {
		it := l.items[l.head]
		if q.valid(li, it) {
			return it.slot, true
		}
		l.head++
		l.dead--
	}
	l.items, l.head, l.dead = l.items[:0], 0, 0
	return 0, false
}

// laneLeft records that an entry left lane li; a lane mostly made of dead
// items is compacted.
func (q *queueState) laneLeft(li int) {
	l := &q.lanes[li]
	l.dead++
	if live := len(l.items) - l.head - l.dead; l.dead < 64 || l.dead < live {
		return
	}
	items := l.items[:0]
	for _, it := range l.items[l.head:] {
		if q.valid(li, it) {
			items = append(items, it)
		}
	}
	l.items, l.head, l.dead = items, 0, 0
}

// earliestHidden returns the hidden entry that becomes visible first.
func (q *queueState) earliestHidden() (*entry, bool) {
	var best *entry
	for li := range q.lanes {
		if s, ok := q.laneHead(li); ok {
			if e := &q.slab[s]; best == nil || e.visibleAt < best.visibleAt {
				best = e
			}
		}
	}
	if len(q.hidden) > 0 {
		if e := &q.slab[q.hidden[0]]; best == nil || e.visibleAt < best.visibleAt {
			best = e
		}
	}
	return best, best != nil
}
