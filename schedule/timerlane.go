package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/store"
)

// flushEvery bounds the index entries buffered in memory before they are
// written and synced.
const flushEvery = 1 << 19

// timerLane is the timers' one delivery lane: it indexes TimerTopic in
// offset order (ingest) and delivers from the window (the loaded slots) in
// key order, under the same generation guard as the levels.
type timerLane struct {
	s  *Scheduler
	mu sync.Mutex // like level.mu: held from the generation check to the progress update

	idx       index
	st        timerState         // in memory; st.ingested is the ingest cursor
	durable   int64              // the index is synced for every record below this offset
	cancelled map[int64]timerKey // offset -> key: the set st.cancels holds
	win       []entry            // pending entries of the slots <= wslot, sorted by key
	wslot     int64              // last slot loaded into win
	broken    error              // the index is damaged: rebuild before anything else
	unsaved   bool               // the last change's progress is not stored yet
	base      timerState         // the stored state the index was last rebuilt from

	saved atomic.Pointer[timerState] // what a progress record holds for the timers now

	delivered, retried, skipped, malformed, cancels, rebuilds atomic.Uint64
	deadLettered, dropped                                     atomic.Uint64
	single                                                    int // as level.single; under mu
	oldestDue, inWindow, slots                                atomic.Int64
}

func newTimerLane(s *Scheduler, files slotFiles) *timerLane {
	t := &timerLane{s: s, idx: index{files: files}, cancelled: map[int64]timerKey{}}
	t.st.done = noneDone
	t.publish()
	return t
}

// publish makes the durable part of the state what the next progress
// record holds. Caller holds mu (or owns t).
func (t *timerLane) publish() {
	ts := t.persisted()
	t.saved.Store(&ts)
	t.inWindow.Store(int64(len(t.win)))
	t.slots.Store(int64(len(t.idx.slots)))
}

// persisted is the state as a progress record must hold it: the ingest
// position only as far as the index is durable.
func (t *timerLane) persisted() timerState {
	return timerState{ingested: t.durable, done: t.st.done, index: t.idx.id, cancels: slices.Clone(t.st.cancels)}
}

// adopt takes the stored progress p (nil: none) as the timers' state. New
// (first) reopens the index when p names it and rebuilds it otherwise;
// Start keeps the state in memory (never older than what it stored) unless
// p was written against another index (another node), which it rebuilds
// from. Caller holds every lane's mu.
func (t *timerLane) adopt(p *progress, first bool) error {
	stored := timerState{done: noneDone}
	if p != nil {
		stored = p.timer
	}
	if !first {
		if stored.index == t.idx.id || equalTimerState(stored, t.base) {
			return nil
		}
		return t.rebuild(stored, "progress written against another index")
	}
	ok, err := t.idx.open()
	if err != nil {
		return fmt.Errorf("timer index: %w", err)
	}
	switch {
	case !ok:
		return t.rebuild(stored, "no index")
	case p == nil || stored.index != t.idx.id:
		return t.rebuild(stored, "index not the one the progress names")
	}
	t.place(stored)
	t.base = stored
	return nil
}

func equalTimerState(a, b timerState) bool {
	return a.ingested == b.ingested && a.done == b.done && a.index == b.index && slices.Equal(a.cancels, b.cancels)
}

// place sets the in-memory state to stored (whose index is t.idx) with an
// empty window that starts at done's slot.
func (t *timerLane) place(stored timerState) {
	lo, hi := t.s.src.MinOffset(TimerTopic, 0), t.s.src.MaxOffset(TimerTopic, 0)
	ing := stored.ingested
	if ing < lo {
		if ing > 0 {
			t.s.log.Warn("schedule: retention removed timers before they were indexed", "topic", TimerTopic, "queue", 0, "offset", ing, "to", lo, "lost", lo-ing)
			t.skipped.Add(uint64(lo - ing))
		}
		ing = lo
	}
	if ing > hi {
		t.s.log.Warn("schedule: timer progress beyond the end of the log, clamped", "topic", TimerTopic, "queue", 0, "offset", ing, "max", hi)
		ing = hi
	}
	t.st = timerState{ingested: ing, done: stored.done, index: t.idx.id, cancels: slices.Clone(stored.cancels)}
	t.durable = ing
	clear(t.cancelled)
	for _, c := range t.st.cancels {
		t.cancelled[c.off] = c
	}
	t.win, t.wslot = nil, slotOf(stored.done.due)-1
	t.broken = nil
	t.unsaved = false
	t.publish()
}

// rebuild recreates the index from TimerTopic and the stored state: every
// record below stored.ingested is indexed again (delivered ones only if
// their slot is within KeepDelivered of done). It reads every timer in the
// log; it runs only when the index is missing, damaged or foreign.
func (t *timerLane) rebuild(stored timerState, why string) error {
	begin := time.Now()
	if err := t.idx.reset(); err != nil {
		return fmt.Errorf("timer index reset: %w", err)
	}
	t.place(stored)
	var keepFrom int64 = -1 << 62
	if stored.done != noneDone {
		keepFrom = slotOf(stored.done.due - KeepDelivered.Milliseconds())
	}
	src, n := t.s.src, 0
	for off := src.MinOffset(TimerTopic, 0); off < t.st.ingested; {
		msgs, err := src.Read(TimerTopic, 0, off, t.s.opts.MaxBatch)
		if errors.Is(err, store.ErrOffsetTooSmall) {
			off = src.MinOffset(TimerTopic, 0)
			continue
		}
		if err != nil {
			return fmt.Errorf("timer index rebuild at offset %d: %w", off, err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if m.QueueOffset >= t.st.ingested {
				break
			}
			if k, ok := timerOf(m, t.s.opts.MaxTimerDelay); ok && (stored.done.less(k) || slotOf(k.due) >= keepFrom) {
				t.idx.add(entry{key: k, hash: keyHash(m.Properties[PropUniqKey])})
				n++
			}
			off = m.QueueOffset + 1
		}
		if t.idx.nbuf >= flushEvery {
			if err := t.idx.flush(); err != nil {
				return fmt.Errorf("timer index rebuild: %w", err)
			}
		}
	}
	if err := t.idx.flush(); err != nil {
		return fmt.Errorf("timer index rebuild: %w", err)
	}
	t.base = stored
	t.rebuilds.Add(1)
	t.publish()
	lvl := slog.LevelInfo
	if n == 0 {
		lvl = slog.LevelDebug
	}
	t.s.log.Log(context.Background(), lvl, "schedule: timer index rebuilt", "topic", TimerTopic, "queue", 0, "reason", why, "offset", t.st.ingested, "entries", n, "took", time.Since(begin).String())
	return nil
}

// flush makes the index durable up to the ingest cursor.
func (t *timerLane) flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.flushLocked()
}

func (t *timerLane) flushLocked() error {
	if t.durable == t.st.ingested && t.idx.nbuf == 0 {
		return nil
	}
	if err := t.idx.flush(); err != nil {
		return fmt.Errorf("timer index: %w", err)
	}
	t.durable = t.st.ingested
	t.publish()
	return nil
}

// step is the timers' deterministic core at time now: repair, then one
// ingest batch, then one delivery batch.
func (t *timerLane) step(g *generation, now time.Time) stepResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	if !s.isCurrent(g) {
		return stepResult{stale: true}
	}
	if err := t.repair(); err != nil {
		return stepResult{failed: true}
	}
	if t.unsaved {
		if err := s.persist(); err != nil {
			s.log.Error("schedule: timer progress still not saved, delivery held back", "topic", TimerTopic, "queue", 0, "err", err)
			return stepResult{failed: true}
		}
		t.unsaved = false
	}
	full, late, err := t.ingest()
	if err != nil {
		return t.fail(err, "ingest")
	}
	if late {
		return t.deliverLate(g)
	}
	r := t.deliverDue(g, now)
	r.more = r.more || full
	return r
}

// repair rebuilds a damaged index from the state last stored.
func (t *timerLane) repair() error {
	if t.broken == nil {
		return nil
	}
	t.s.log.Warn("schedule: timer index damaged, rebuilding", "topic", TimerTopic, "queue", 0, "err", t.broken)
	if err := t.rebuild(t.persisted(), t.broken.Error()); err != nil {
		t.s.log.Error("schedule: timer index rebuild failed", "topic", TimerTopic, "queue", 0, "err", err)
		return err
	}
	return nil
}

func (t *timerLane) fail(err error, what string) stepResult {
	if errors.Is(err, errIndexDamaged) {
		t.broken = err
	}
	t.s.log.Warn("schedule: timer "+what+" failed, will retry", "topic", TimerTopic, "queue", 0, "offset", t.st.ingested, "err", err)
	return stepResult{failed: true}
}

// ingest indexes one batch of TimerTopic from the cursor. It stops before
// a late record (one whose key is not above done: its time was passed
// while it was not indexed yet), which deliverLate then delivers. full
// reports a full batch.
func (t *timerLane) ingest() (full, late bool, err error) {
	s := t.s
	if lo := s.src.MinOffset(TimerTopic, 0); t.st.ingested < lo {
		s.log.Warn("schedule: retention removed timers before they were indexed", "topic", TimerTopic, "queue", 0, "offset", t.st.ingested, "to", lo, "lost", lo-t.st.ingested)
		t.skipped.Add(uint64(lo - t.st.ingested))
		if err := t.flushLocked(); err != nil {
			return false, false, err
		}
		t.st.ingested, t.durable = lo, lo
		t.publish()
	}
	msgs, err := s.src.Read(TimerTopic, 0, t.st.ingested, max(s.opts.MaxBatch, 4096))
	if err != nil {
		return false, false, err
	}
	grew := false
	for _, m := range msgs {
		k, ok := timerOf(m, s.opts.MaxTimerDelay)
		switch {
		case !ok:
			t.malformed.Add(1)
			s.log.Warn("schedule: timer record without a valid time or real topic skipped", "topic", TimerTopic, "queue", 0, "offset", m.QueueOffset)
		case !t.st.done.less(k):
			return false, true, t.flushLocked()
		default:
			e := entry{key: k, hash: keyHash(m.Properties[PropUniqKey])}
			t.idx.add(e)
			if slotOf(k.due) <= t.wslot {
				t.win = append(t.win, e)
				grew = true
			}
		}
		t.st.ingested = m.QueueOffset + 1
	}
	if grew {
		slices.SortFunc(t.win, compareEntries)
	}
	if t.idx.nbuf >= flushEvery {
		if err := t.flushLocked(); err != nil {
			return false, false, err
		}
	}
	t.inWindow.Store(int64(len(t.win)))
	return len(msgs) > 0, false, nil // the log may clamp a read: go on until one is empty
}

func compareEntries(a, b entry) int {
	if c := cmp.Compare(a.key.due, b.key.due); c != 0 {
		return c
	}
	return cmp.Compare(a.key.off, b.key.off)
}

// deliverLate delivers the late records at the ingest cursor in offset
// order, with the progress that moves the cursor past them.
func (t *timerLane) deliverLate(g *generation) stepResult {
	s := t.s
	msgs, err := s.src.Read(TimerTopic, 0, t.st.ingested, t.batchMax())
	if err != nil {
		return t.fail(err, "read")
	}
	var out []*store.Message
	var origins []origin
	next := t.st.ingested
	for _, m := range msgs {
		k, ok := timerOf(m, s.opts.MaxTimerDelay)
		if ok && t.st.done.less(k) {
			break // not late: ingest takes it
		}
		next = m.QueueOffset + 1
		if !ok {
			t.malformed.Add(1)
			continue
		}
		t.idx.add(entry{key: k, hash: keyHash(m.Properties[PropUniqKey])}) // so Cancel can answer ErrDelivered
		if _, gone := t.cancelled[k.off]; !gone {
			origins = append(origins, timerOrigin(m))
			restoreTimer(m)
			out = append(out, m)
		}
	}
	if err := t.idx.flush(); err != nil {
		return t.fail(err, "index write")
	}
	t.durable = t.st.ingested
	ts := t.persisted()
	ts.ingested = next
	ts.cancels = pruneCancels(ts.cancels, ts.done, next)
	return t.commit(g, out, origins, &ts, func() {
		t.st.ingested, t.durable = next, next
		t.st.cancels = ts.cancels
		t.syncCancelled()
		t.publish()
	})
}

// pruneCancels drops the cancels that can no longer matter: indexed, passed
// by done, and more than KeepDelivered old (until then Cancel still answers
// ErrCancelled for them rather than ErrDelivered).
func pruneCancels(cs []timerKey, done timerKey, ingested int64) []timerKey {
	keep := KeepDelivered.Milliseconds()
	return slices.DeleteFunc(cs, func(c timerKey) bool {
		return c.off < ingested && !done.less(c) && done.due-c.due > keep
	})
}

func (t *timerLane) syncCancelled() {
	clear(t.cancelled)
	for _, c := range t.st.cancels {
		t.cancelled[c.off] = c
	}
}

func (t *timerLane) afterCommit(g *generation, appended bool, err error, n int) stepResult {
	if !appended {
		t.retried.Add(1)
		t.s.log.Warn("schedule: timer append failed, will retry", "topic", TimerTopic, "queue", 0, "messages", n, "generation", g.n, "err", err)
		return stepResult{failed: true}
	}
	if err != nil {
		t.unsaved = true
		t.s.log.Error("schedule: timer progress not saved", "topic", TimerTopic, "queue", 0, "err", err)
		return stepResult{failed: true}
	}
	return stepResult{more: n >= t.s.opts.MaxBatch || t.single > 0}
}

// ensureWindow loads the next slot with pending timers once the window is
// empty, and drops slot files delivered more than KeepDelivered ago.
func (t *timerLane) ensureWindow() error {
	for len(t.win) == 0 {
		slot, ok := t.idx.after(t.wslot)
		if !ok {
			break
		}
		es, err := t.idx.load(slot)
		if err != nil {
			return err
		}
		es = slices.DeleteFunc(es, func(e entry) bool {
			// An entry at or beyond the ingest cursor was written ahead
			// of the progress (a crash, or a late batch whose append
			// failed): ingest indexes that record again, so here it
			// would be a second copy.
			_, gone := t.cancelled[e.key.off]
			return gone || !t.st.done.less(e.key) || e.key.off >= t.st.ingested
		})
		slices.SortFunc(es, compareEntries)
		t.win = slices.CompactFunc(es, func(a, b entry) bool { return a.key == b.key })
		t.wslot = slot
	}
	if t.st.done != noneDone {
		if err := t.idx.drop(min(t.wslot, slotOf(t.st.done.due-KeepDelivered.Milliseconds()))); err != nil {
			t.s.log.Warn("schedule: old timer slot not removed", "topic", TimerTopic, "queue", 0, "err", err)
		}
	}
	t.publish()
	return nil
}

// deliverDue delivers one batch of the window's due timers, in key order.
func (t *timerLane) deliverDue(g *generation, now time.Time) stepResult {
	s := t.s
	if err := t.ensureWindow(); err != nil {
		return t.fail(err, "window load")
	}
	nowMs := now.UnixMilli()
	var batch []entry
	i := 0
	for ; i < len(t.win) && len(batch) < t.batchMax() && t.win[i].key.due <= nowMs; i++ {
		if _, gone := t.cancelled[t.win[i].key.off]; !gone {
			batch = append(batch, t.win[i])
		}
	}
	if i == 0 {
		if len(t.win) > 0 {
			t.oldestDue.Store(t.win[0].key.due * 1e6)
		} else {
			t.oldestDue.Store(0)
		}
		return stepResult{}
	}
	t.oldestDue.Store(t.win[0].key.due * 1e6)
	if batch != nil && slices.MaxFunc(batch, func(a, b entry) int { return cmp.Compare(a.key.off, b.key.off) }).key.off >= t.durable {
		if err := t.flushLocked(); err != nil {
			return t.fail(err, "index write")
		}
	}
	out, origins, lost, err := t.read(batch)
	if err != nil {
		return t.fail(err, "read")
	}
	ts := t.persisted()
	ts.done = t.win[i-1].key
	ts.cancels = pruneCancels(ts.cancels, ts.done, ts.ingested)
	r := t.commit(g, out, origins, &ts, func() {
		t.st.done = ts.done
		t.st.cancels = ts.cancels
		t.syncCancelled()
		t.win = t.win[i:]
		if len(t.win) == 0 {
			t.win = nil
		}
		if lost > 0 {
			t.skipped.Add(uint64(lost))
			s.log.Warn("schedule: retention removed timers before they were due", "topic", TimerTopic, "queue", 0, "lost", lost)
		}
		t.publish()
	})
	if !r.failed && !r.more {
		r.more = len(t.win) == 0 || t.win[0].key.due <= nowMs // an emptied window loads the next slot
	}
	return r
}

// read fetches the records of batch from TimerTopic, reading runs of
// consecutive offsets together, and returns them restored, in batch order.
// lost counts records retention already removed.
func (t *timerLane) read(batch []entry) (out []*store.Message, origins []origin, lost int, err error) {
	if len(batch) == 0 {
		return nil, nil, 0, nil
	}
	offs := make([]int64, len(batch))
	for i, e := range batch {
		offs[i] = e.key.off
	}
	slices.Sort(offs)
	got := make(map[int64]*store.Message, len(batch))
	src := t.s.src
	for i := 0; i < len(offs); {
		j := i + 1
		for j < len(offs) && offs[j] == offs[j-1]+1 {
			j++
		}
		for start := offs[i]; start <= offs[j-1]; {
			msgs, err := src.Read(TimerTopic, 0, start, int(offs[j-1]-start+1))
			if errors.Is(err, store.ErrOffsetTooSmall) {
				if lo := src.MinOffset(TimerTopic, 0); lo > start {
					start = lo
					continue
				}
			}
			if err != nil {
				return nil, nil, 0, err
			}
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				got[m.QueueOffset] = m
			}
			start = msgs[len(msgs)-1].QueueOffset + 1
		}
		i = j
	}
	out = make([]*store.Message, 0, len(batch))
	for _, e := range batch {
		m := got[e.key.off]
		if m == nil {
			lost++
			continue
		}
		origins = append(origins, timerOrigin(m))
		restoreTimer(m)
		out = append(out, m)
	}
	return out, origins, lost, nil
}

// timerOrigin is where a timer record waits, before restoreTimer.
func timerOrigin(m *store.Message) origin {
	props := map[string]string{}
	for _, p := range []string{PropTimerDeliverMS, PropStartDeliverTime} {
		if v, ok := m.Properties[p]; ok {
			props[p] = v
		}
	}
	return origin{topic: TimerTopic, queue: 0, offset: m.QueueOffset, props: props}
}

// batchMax is how many timers a step delivers at most: one at a time
// while single says so (after a batch the log refused for good).
func (t *timerLane) batchMax() int {
	if t.single > 0 {
		return 1
	}
	return t.s.opts.MaxBatch
}

// commit appends out with the timers' state ts (apply makes it true in
// memory), and handles a refusal for good as the levels do (see
// Scheduler.refused): a batch of several goes again one at a time; a
// single refused timer goes to DeadLetterTopic with the state past it, or,
// its dead letter refused too, is dropped (logged at ERROR).
func (t *timerLane) commit(g *generation, out []*store.Message, origins []origin, ts *timerState, apply func()) stepResult {
	s := t.s
	appended, err := s.commit(out, nil, 0, ts, apply)
	if appended {
		t.delivered.Add(uint64(len(out)))
		t.single = max(t.single-1, 0)
		return t.afterCommit(g, true, err, len(out))
	}
	if !permanent(err) || len(out) == 0 {
		return t.afterCommit(g, false, err, len(out))
	}
	if len(out) > 1 {
		t.single = len(out)
		s.log.Warn("schedule: timer batch refused for good, delivering it one timer at a time", "topic", TimerTopic, "queue", 0, "messages", len(out), "err", err)
		return stepResult{more: true}
	}
	m, o := out[0], origins[0]
	dl := deadLetter(m, o, err)
	appended, serr := s.commit([]*store.Message{dl}, nil, 0, ts, apply)
	counter := &t.deadLettered
	if !appended && permanent(serr) {
		counter = &t.dropped
		appended, serr = s.commit(nil, nil, 0, ts, apply)
	}
	if !appended {
		return t.afterCommit(g, false, serr, 1)
	}
	counter.Add(1)
	t.single = max(t.single-1, 0)
	if counter == &t.deadLettered {
		s.log.Error("schedule: timer refused by the log for good, moved to the dead-letter topic", "topic", TimerTopic, "queue", 0, "offset", o.offset, "real_topic", m.Topic, "real_queue", m.QueueID, "uniq_key", m.Properties[PropUniqKey], "dlq_topic", DeadLetterTopic, "dlq_offset", dl.QueueOffset, "err", err)
	} else {
		s.log.Error("schedule: timer and its dead letter refused by the log for good, dropped", "topic", TimerTopic, "queue", 0, "offset", o.offset, "real_topic", m.Topic, "real_queue", m.QueueID, "uniq_key", m.Properties[PropUniqKey], "err", err)
	}
	return t.afterCommit(g, true, serr, 1)
}
