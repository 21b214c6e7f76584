package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// Read returns up to max messages of (topic, queueID) starting at queue
// offset offset, in order. At MaxOffset, or for a queue never written, it
// returns an empty slice and no error; below MinOffset an *OffsetError
// (ErrOffsetTooSmall). max is clamped to MaxReadBatch. The messages are
// fresh copies owned by the caller. A damaged index entry is repaired from
// the log (Stats.IndexRepairs) and the read goes on.
func (s *Store) Read(topic string, queueID int, offset int64, max int) ([]*Message, error) {
	if topic == "" || queueID < 0 || max < 1 {
		if err := s.usableShared(); err != nil {
			return nil, err // after Close (or a failure) every call says so, bad input or not
		}
		s.stats.rejected.Add(1)
		err := fmt.Errorf("%w: read %q/%d max %d", ErrInvalid, topic, queueID, max)
		s.log.Debug("store: read rejected", "topic", topic, "queue", queueID, "max", max, "err", err)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		// A retry reads what is verified: appends that came after the tail
		// was verified for it must not send it round again.
		out, res := s.read(topic, queueID, offset, max, attempt > 0)
		if res.err == nil || attempt > maxReadAttempts || (res.bad < 0 && !res.verify) {
			if res.err != nil {
				s.log.Debug("store: read failed", "topic", topic, "queue", queueID, "offset", offset, "err", res.err)
			}
			return out, res.err
		}
		if err := s.fixRead(res, func() error {
			q := s.queues[topic][queueID]
			if q == nil || res.bad < 0 {
				return nil
			}
			if res.damaged && s.judgeDamaged(res.entry, res.err, fmt.Sprintf("%s/%d offset %d", topic, queueID, res.bad)) {
				return nil // the next try steps past it
			}
			return s.healQueue(q, res.bad)
		}); err != nil {
			return nil, err
		}
		if s.opts.afterFixedRead != nil {
			s.opts.afterFixedRead()
		}
	}
}

// maxReadAttempts bounds the tries of one Read or ReadAt: each one after
// the first follows a verification of the tail, a repaired index entry or
// a record judged damaged (which the next try steps past).
const maxReadAttempts = 64

// readResult says why a read failed: an error, the index entry at fault
// (bad, -1 if none) or that the records it would read must be verified
// against the wal first (verify.go). With damaged the record entry names
// did not decode: it is judged (judgeDamaged) before the index is healed.
type readResult struct {
	err     error
	bad     int64
	verify  bool
	damaged bool
	entry   entry
}

// fixRead verifies the tail or repairs an index entry (heal) under the
// exclusive lock, so the read can be tried again.
func (s *Store) fixRead(res readResult, heal func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if res.verify {
		return s.verifyTail()
	}
	return heal()
}

// read reads under the shared lock. Records not verified yet send the read
// to verify the tail (verify.go); with verifiedOnly it reads the verified
// ones among them instead, as long as there is one. Holes, tombstones and
// records judged damaged are stepped past: an empty answer means nothing
// readable is left below MaxOffset.
func (s *Store) read(topic string, queueID int, offset int64, max int, verifiedOnly bool) ([]*Message, readResult) {
	rb := getReadBuf()
	defer putReadBuf(rb)
	for {
		out, next, res := s.readOnce(rb, topic, queueID, offset, max, verifiedOnly)
		if res.err != nil || len(out) > 0 || next <= offset {
			return out, res
		}
		offset = next // everything read was skipped: go on
	}
}

// readOnce reads one page from offset; next is the offset after the
// entries it covered (skipped ones included).
func (s *Store) readOnce(rb *readBuf, topic string, queueID int, offset int64, max int, verifiedOnly bool) ([]*Message, int64, readResult) {
	s.mu.RLock()
	if err := s.usable(); err != nil {
		s.mu.RUnlock()
		return nil, offset, readResult{err: err, bad: -1}
	}
	s.stats.reads.Add(1)
	q := s.queues[topic][queueID]
	if q == nil {
		s.mu.RUnlock()
		if offset < 0 {
			return nil, offset, readResult{err: &OffsetError{Topic: topic, QueueID: queueID, Offset: offset, Min: 0}, bad: -1}
		}
		return []*Message{}, offset, readResult{bad: -1}
	}
	if offset < q.min {
		qmin := q.min
		s.mu.RUnlock()
		return nil, offset, readResult{err: &OffsetError{Topic: topic, QueueID: queueID, Offset: offset, Min: qmin}, bad: -1}
	}
	if offset >= q.visible {
		s.mu.RUnlock()
		return []*Message{}, offset, readResult{bad: -1}
	}
	n := int(min(int64(min(max, MaxReadBatch)), q.visible-offset))
	entries, scratch, at, err := q.idx.read(rb.entries[:0], rb.idx, offset, n)
	rb.idx = scratch
	if err != nil {
		s.mu.RUnlock()
		return nil, offset, readResult{err: fmt.Errorf("read %s/%d at %d: %w", topic, queueID, at, err), bad: at}
	}
	if entries[len(entries)-1].logOffset >= s.verified {
		if !verifiedOnly || entries[0].logOffset >= s.verified {
			s.mu.RUnlock()
			return nil, offset, readResult{err: errVerify, bad: -1, verify: true}
		}
		// A queue's entries run in log order: the verified ones are a prefix.
		entries = entries[:sort.Search(len(entries), func(i int) bool { return entries[i].logOffset >= s.verified })]
	}
	next := offset + int64(len(entries))
	// Step past holes and records judged damaged; qoffs keeps the queue
	// offset of each entry kept.
	qoffs := rb.qoffs[:0]
	k := 0
	for i, e := range entries {
		if e.isHole() {
			continue
		}
		if _, bad := s.damaged[e.logOffset]; bad {
			continue
		}
		entries[k] = e
		qoffs = append(qoffs, offset+int64(i))
		k++
	}
	entries = entries[:k]
	rb.entries, rb.qoffs = entries, qoffs
	if k == 0 {
		s.mu.RUnlock()
		return []*Message{}, next, readResult{bad: -1}
	}
	spans, err := s.planSpans(rb, entries)
	s.mu.RUnlock() // the spans' segments stay open until read
	if err != nil {
		return nil, offset, readResult{err: fmt.Errorf("read %s/%d at %d: %w", topic, queueID, offset, err), bad: -1}
	}
	out, i, err := readSpans(rb, spans, entries, topic)
	if err != nil {
		res := readResult{err: fmt.Errorf("read %s/%d at %d: %w", topic, queueID, qoffs[i], err), bad: qoffs[i]}
		res.damaged, res.entry = errors.Is(err, errUndecodable), entries[i]
		return nil, offset, res
	}
	kept := out[:0]
	for i, m := range out {
		if m == nil {
			continue // a tombstone
		}
		if m.Topic != topic || m.QueueID != queueID || m.QueueOffset != qoffs[i] {
			return nil, offset, readResult{err: fmt.Errorf("read %s/%d at %d: %w: index points at %s/%d offset %d",
				topic, queueID, qoffs[i], ErrCorrupt, m.Topic, m.QueueID, m.QueueOffset), bad: qoffs[i]}
		}
		kept = append(kept, m)
	}
	s.stats.readMsgs.Add(uint64(len(kept)))
	return kept, next, readResult{bad: -1}
}

// errUndecodable marks a record readSpans could read but not decode.
var errUndecodable = errors.New("record does not decode")

// ReadAt returns the message at a log offset. A log offset that was never
// written (or not yet made visible) is ErrInvalid; one dropped by retention
// is ErrOffsetTooSmall.
func (s *Store) ReadAt(logOffset int64) (*Message, error) {
	for attempt := 0; ; attempt++ {
		m, res := s.readAt(logOffset)
		if res.err == nil || attempt > 1 || (res.bad < 0 && !res.verify) {
			if res.err != nil {
				s.log.Debug("store: read failed", "offset", logOffset, "err", res.err)
			}
			return m, res.err
		}
		if err := s.fixRead(res, func() error {
			if res.damaged && s.judgeDamaged(res.entry, res.err, "") {
				return nil // the next try answers it is damaged
			}
			return s.healLog(logOffset)
		}); err != nil {
			return nil, err
		}
	}
}

func (s *Store) readAt(logOffset int64) (*Message, readResult) {
	rb := getReadBuf()
	defer putReadBuf(rb)
	s.mu.RLock()
	if err := s.usable(); err != nil {
		s.mu.RUnlock()
		return nil, readResult{err: err, bad: -1}
	}
	s.stats.reads.Add(1)
	if logOffset < s.logMin {
		err := fmt.Errorf("%w: log offset %d, oldest is %d", ErrOffsetTooSmall, logOffset, s.logMin)
		s.mu.RUnlock()
		return nil, readResult{err: err, bad: -1}
	}
	if end := s.readableEnd(); logOffset >= end {
		s.mu.RUnlock()
		s.stats.rejected.Add(1)
		return nil, readResult{err: fmt.Errorf("%w: log offset %d not written (next is %d)", ErrInvalid, logOffset, end), bad: -1}
	}
	if logOffset >= s.verified {
		s.mu.RUnlock()
		return nil, readResult{err: errVerify, bad: -1, verify: true}
	}
	e, err := s.lidx.get(logOffset)
	if err == nil && e.logOffset != logOffset {
		err = fmt.Errorf("%w: log index entry %d names log offset %d", ErrCorrupt, logOffset, e.logOffset)
	}
	if err != nil {
		s.mu.RUnlock()
		return nil, readResult{err: fmt.Errorf("read log offset %d: %w", logOffset, err), bad: logOffset}
	}
	if _, bad := s.damaged[logOffset]; bad {
		err := errDamaged(s.segs[max(s.segmentOf(logOffset), 0)].path, e)
		s.mu.RUnlock()
		return nil, readResult{err: err, bad: -1}
	}
	entries := append(rb.entries[:0], e)
	rb.entries = entries
	spans, err := s.planSpans(rb, entries)
	s.mu.RUnlock()
	if err != nil {
		return nil, readResult{err: fmt.Errorf("read log offset %d: %w", logOffset, err), bad: -1}
	}
	out, _, err := readSpans(rb, spans, entries, "")
	if err != nil {
		return nil, readResult{err: fmt.Errorf("read log offset %d: %w", logOffset, err), bad: logOffset,
			damaged: errors.Is(err, errUndecodable), entry: e}
	}
	if out[0] == nil {
		return nil, readResult{err: fmt.Errorf("%w: log offset %d was lost (its record is a tombstone)", ErrCorrupt, logOffset), bad: -1}
	}
	s.stats.readMsgs.Add(1)
	return out[0], readResult{bad: -1}
}

// readableEnd is the first log offset readers may not see yet.
func (s *Store) readableEnd() int64 {
	if s.opts.Sync == SyncGroup {
		return s.durable
	}
	return s.written
}

// Records are read in spans: entries whose records lie in the same segment
// at most maxReadGap bytes apart (a queue's records are often adjacent in
// the log) are read with one pread of at most maxReadSpan bytes into the
// read's scratch buffer (readBuf), and decoded from there; the messages'
// bodies are then copied into blocks of at most maxReadSpan bytes (a
// larger body gets its own), so a read allocates only what it hands out.
const (
	maxReadGap  = 1 << 10
	maxReadSpan = 1 << 20
)

// span is one pread: bytes [from, to) of a segment, holding the records of
// entries [first, first+n), read into readBuf.recs at at.
type span struct {
	sg       *segment
	from, to int64
	at       int64
	first, n int
}

// readBuf is the scratch of one read: the index bytes, the entries, the
// spans and the records' bytes. Reads take one from readBufs and put it
// back: nothing a read returns points into it.
type readBuf struct {
	idx     []byte
	entries []entry
	spans   []span
	recs    []byte
	bodies  [][]byte // ownBodies' list of the bodies it copies
	qoffs   []int64  // the queue offset of each entry read
}

// maxPooledRecs bounds the record buffer a pooled readBuf keeps.
const maxPooledRecs = 2 * maxReadSpan

var readBufs = sync.Pool{New: func() any { return new(readBuf) }}

func getReadBuf() *readBuf { return readBufs.Get().(*readBuf) }

func putReadBuf(rb *readBuf) {
	clear(rb.spans) // no segment stays reachable from the pool
	rb.spans = rb.spans[:0]
	if cap(rb.recs) > maxPooledRecs {
		rb.recs = nil
	}
	readBufs.Put(rb)
}

// planSpans groups the records of entries (in log order) into spans (in
// rb.spans) and keeps their segments open (segment.readers) until
// readSpans has read them, so the reads need no Store lock. Callers hold
// mu (shared is enough).
func (s *Store) planSpans(rb *readBuf, entries []entry) ([]span, error) {
	spans := rb.spans[:0]
	var sg *segment
	var sgEnd uint64 // wal index just past sg
	var at int64
	for i, e := range entries {
		// The segment holding wal index logOffset+1 is the last one
		// starting at or before it.
		idx := uint64(e.logOffset) + 1
		if sg == nil || idx < sg.start || idx >= sgEnd {
			k := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].start > idx }) - 1
			if k < 0 {
				rb.spans = spans
				return nil, fmt.Errorf("%w: log offset %d was retained away", ErrOffsetTooSmall, e.logOffset)
			}
			sg, sgEnd = s.segs[k], math.MaxUint64
			if k+1 < len(s.segs) {
				sgEnd = s.segs[k+1].start
			}
		}
		end := e.pos + int64(e.size)
		if l := len(spans) - 1; l >= 0 {
			sp := &spans[l]
			if sp.sg == sg && e.pos >= sp.to && e.pos-sp.to <= maxReadGap && end-sp.from <= maxReadSpan {
				at += end - sp.to
				sp.to = end
				sp.n++
				continue
			}
		}
		spans = append(spans, span{sg: sg, from: e.pos, to: end, at: at, first: i, n: 1})
		at += end - e.pos
	}
	rb.spans = spans
	for _, sp := range spans {
		// No one closing a segment can be waiting: that takes mu
		// exclusively first.
		sp.sg.readers.RLock()
	}
	return spans, nil
}

// readSpans reads and checks the records of entries through spans (from
// planSpans), releasing each span's segment once read. A Topic equal to
// topic shares that string. On error it also returns the index of the
// entry at fault.
func readSpans(rb *readBuf, spans []span, entries []entry, topic string) ([]*Message, int, error) {
	var total int64
	if l := len(spans) - 1; l >= 0 {
		total = spans[l].at + spans[l].to - spans[l].from
	}
	if int64(cap(rb.recs)) < total {
		rb.recs = make([]byte, total)
	}
	recs := rb.recs[:total]
	var err error
	at := 0
	for _, sp := range spans {
		if err == nil {
			if _, rerr := sp.sg.f.ReadAt(recs[sp.at:sp.at+sp.to-sp.from], sp.from); rerr != nil {
				err = fmt.Errorf("%w: segment %s position %d: %v", ErrCorrupt, sp.sg.path, sp.from, rerr)
				at = sp.first
			}
		}
		sp.sg.readers.RUnlock() // every span's, after an error too
	}
	if err != nil {
		return nil, at, err
	}
	ms := make([]Message, len(entries)) // one allocation for all of them
	out := make([]*Message, len(entries))
	for _, sp := range spans {
		for j := sp.first; j < sp.first+sp.n; j++ {
			e := &entries[j]
			at := sp.at + e.pos - sp.from
			m := &ms[j]
			rec := recs[at : at+int64(e.size) : at+int64(e.size)]
			if _, err := decodeRecordTo(m, rec, topic); err != nil {
				return nil, j, fmt.Errorf("segment %s position %d: %w (%w)", sp.sg.path, e.pos, err, errUndecodable)
			}
			if isTombstone(rec) {
				*m = Message{}
				continue // out[j] stays nil: never returned as data
			}
			if m.LogOffset != e.logOffset {
				return nil, j, fmt.Errorf("%w: segment %s position %d holds log offset %d, index says %d",
					ErrCorrupt, sp.sg.path, e.pos, m.LogOffset, e.logOffset)
			}
			out[j] = m
		}
	}
	ownBodies(rb, ms)
	return out, 0, nil
}

// ownBodies copies the bodies of ms (which point into the read's scratch
// buffer) into fresh blocks of at most maxReadSpan bytes, consecutive
// bodies sharing one; a larger body gets a block of its own. bytes.Join
// does not zero the block it fills, as a make would.
func ownBodies(rb *readBuf, ms []Message) {
	for i := 0; i < len(ms); {
		group, size := rb.bodies[:0], 0
		for ; i < len(ms) && (len(group) == 0 || size+len(ms[i].Body) <= maxReadSpan); i++ {
			group, size = append(group, ms[i].Body), size+len(ms[i].Body)
		}
		block := bytes.Join(group, nil)
		for j := i - len(group); j < i; j++ {
			if n := len(ms[j].Body); n > 0 {
				ms[j].Body, block = block[:n:n], block[n:]
			}
		}
		clear(group) // no pointer into the scratch buffer stays in the pool
		rb.bodies = group[:0]
	}
}

// MinOffset returns the oldest readable queue offset of (topic, queueID);
// 0 for a queue never written.
func (s *Store) MinOffset(topic string, queueID int) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if q := s.queues[topic][queueID]; q != nil {
		return min(q.min, q.visible)
	}
	return 0
}

// MaxOffset returns the next queue offset to be assigned that readers can
// see: every offset below it is readable (or retained away).
func (s *Store) MaxOffset(topic string, queueID int) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if q := s.queues[topic][queueID]; q != nil {
		return q.visible
	}
	return 0
}

// OffsetAt returns the first readable queue offset whose StoredAt is at or
// after t: MinOffset for a t before everything, MaxOffset for a t after
// everything (and 0 for a queue never written). StoredAt never decreases
// along the log, so this is a binary search over the index.
func (s *Store) OffsetAt(topic string, queueID int, t time.Time) int64 {
	want := t.UnixNano()
	s.mu.RLock()
	q := s.queues[topic][queueID]
	if q == nil {
		s.mu.RUnlock()
		return 0
	}
	lo := min(q.min, q.visible)
	off, err := q.search(lo, q.visible, func(e entry) bool { return e.storedAt >= want })
	s.mu.RUnlock()
	if err == nil {
		return off
	}
	// A damaged entry on the way: search again, repairing what it meets.
	s.mu.Lock()
	defer s.mu.Unlock()
	lo = min(q.min, q.visible)
	off, err = q.searchWith(lo, q.visible, func(n int64) (entry, error) { return s.entryOf(q, n) },
		func(e entry) bool { return e.storedAt >= want })
	if err != nil {
		s.log.Error("store: time lookup failed; answering the oldest offset", "topic", topic, "queue", queueID, "err", err)
		return lo
	}
	return off
}

// Topics returns the topics that have readable queues, sorted.
func (s *Store) Topics() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.queues))
	for t, qs := range s.queues {
		for _, q := range qs {
			if q.visible > 0 && !s.releasedQueue(q) {
				out = append(out, t)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// Queues returns the queue ids of topic that are readable, sorted.
func (s *Store) Queues(topic string) []int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []int{}
	for id, q := range s.queues[topic] {
		if q.visible > 0 && !s.releasedQueue(q) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
