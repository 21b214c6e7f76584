package store

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/brokercore/brokercore/internal/fsx"
)

// LookupKey returns up to max messages of topic stored in [begin, end]
// (both inclusive; a zero begin or end leaves that side open) that carry key
// in Keys or as the value of a property named in Options.KeyProperties,
// RocketMQ's QUERY_MESSAGE: the newest max such messages, returned in log
// order. max is clamped to MaxReadBatch. Every candidate the key index
// names is read from the log and compared (topic, key, time), so a hash
// collision never answers a wrong message; messages retention removed or a
// topic deletion released are not returned. The messages are fresh copies
// owned by the caller. With Options.NoKeyIndex it answers ErrInvalid.
func (s *Store) LookupKey(topic, key string, begin, end time.Time, max int) ([]*Message, error) {
	if err := s.usableShared(); err != nil {
		return nil, err
	}
	if topic == "" || key == "" || max < 1 || s.opts.NoKeyIndex {
		s.stats.rejected.Add(1)
		err := fmt.Errorf("%w: lookup %q key %q max %d (key index off: %v)", ErrInvalid, topic, key, max, s.opts.NoKeyIndex)
		s.log.Debug("store: lookup rejected", "topic", topic, "key", key, "max", max, "err", err)
		return nil, err
	}
	max = min(max, MaxReadBatch)
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if !begin.IsZero() {
		lo = unixNanoClamped(begin)
	}
	if !end.IsZero() {
		hi = unixNanoClamped(end)
	}
	h := s.hashKey(topic, key)
	s.mu.RLock()
	var mem []int64 // newest first
	for i := len(s.keyMem) - 1; i >= 0; i-- {
		if e := s.keyMem[i]; e.hash == h && e.storedAt >= lo && e.storedAt <= hi {
			mem = append(mem, e.logOffset)
		}
	}
	files := slices.Clone(s.keyFiles)
	s.mu.RUnlock()

	l := &lookup{s: s, topic: topic, key: key, lo: lo, hi: hi, max: max, seen: map[int64]bool{}}
	for _, off := range mem {
		if done, err := l.try(off); done || err != nil {
			return l.result(), err
		}
	}
	for i := len(files) - 1; i >= 0 && len(l.out) < max; i-- {
		k := files[i]
		if k.count == 0 || k.newest < lo || k.oldest > hi {
			continue
		}
		if err := s.searchKeyFile(l, k, h); err != nil {
			return l.result(), err
		}
	}
	return l.result(), nil
}

func unixNanoClamped(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// lookup is one LookupKey under way.
type lookup struct {
	s          *Store
	topic, key string
	lo, hi     int64
	max        int
	seen       map[int64]bool
	out        []*Message
}

// try reads the record at off and keeps it if it is what was asked for;
// done once max messages are kept. Records gone (retention), not yet
// readable, damaged or lost are skipped; a closed or failed store is an
// error.
func (l *lookup) try(off int64) (done bool, err error) {
	if l.seen[off] {
		return false, nil
	}
	l.seen[off] = true
	m, err := l.s.ReadAt(off)
	if err != nil {
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrFailed) {
			return true, err
		}
		return false, nil
	}
	at := m.StoredAt.UnixNano()
	if m.Topic != l.topic || at < l.lo || at > l.hi || !l.s.hasKey(m, l.key) || l.s.released(m) {
		return false, nil // a hash collision, or the slot of a released topic
	}
	l.out = append(l.out, m)
	return len(l.out) >= l.max, nil
}

func (l *lookup) result() []*Message {
	slices.SortFunc(l.out, func(a, b *Message) int { return int(a.LogOffset - b.LogOffset) })
	if l.out == nil {
		return []*Message{}
	}
	return l.out
}

// searchKeyFile looks h up in key file k, newest entry first. A file that
// does not read back as written is rebuilt from its segment and searched
// again.
func (s *Store) searchKeyFile(l *lookup, k keyFile, h uint64) error {
	for attempt := 0; ; attempt++ {
		err := s.searchKeyFileOnce(l, k, h)
		if err == nil || !errors.Is(err, ErrCorrupt) || attempt > 0 {
			if err != nil && errors.Is(err, ErrCorrupt) {
				s.log.Error("store: key index file still unreadable after a rebuild; skipping it", "dir", s.dir, "segment", segmentName(k.start), "err", err)
				return nil
			}
			return err
		}
		s.log.Warn("store: key index file damaged, rebuilding it from its segment", "dir", s.dir, "segment", segmentName(k.start), "err", err)
		if k, err = s.rebuildKeyFile(k.start); err != nil {
			if errors.Is(err, errSegmentGone) {
				return nil
			}
			return err
		}
	}
}

// errSegmentGone: retention removed the segment a key file indexed.
var errSegmentGone = errors.New("segment removed")

func (s *Store) searchKeyFileOnce(l *lookup, k keyFile, h uint64) error {
	f, err := s.fs.OpenFile(keyFilePath(s.dir, k.start), os.O_RDONLY, 0)
	if fsx.IsNotExist(err) {
		if s.segmentGone(k.start) {
			return nil
		}
		return fmt.Errorf("%w: key file %s: %v", ErrCorrupt, segmentName(k.start), err)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var hdr [keyHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("%w: key file %s header: %v", ErrCorrupt, segmentName(k.start), err)
	}
	got, err := decodeKeyHeader(hdr[:])
	if err != nil {
		return err
	}
	if got != k {
		return fmt.Errorf("%w: key file %s header changed", ErrCorrupt, segmentName(k.start))
	}
	var b [keyEntrySize]byte
	get := func(i int64) (keyEntry, error) {
		if _, err := f.ReadAt(b[:], keyHeaderSize+i*keyEntrySize); err != nil {
			return keyEntry{}, fmt.Errorf("%w: key file %s entry %d: %v", ErrCorrupt, segmentName(k.start), i, err)
		}
		e, err := decodeKeyEntry(b[:])
		if err == nil && (e.logOffset < k.first || e.logOffset >= k.end) {
			err = fmt.Errorf("%w: key file %s entry %d out of range", ErrCorrupt, segmentName(k.start), i)
		}
		return e, err
	}
	// The end of h's run: the first entry with a larger hash.
	lo, hi := int64(0), k.count
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := get(mid)
		if err != nil {
			return err
		}
		if e.hash > h {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	for i := lo - 1; i >= 0 && len(l.out) < l.max; i-- {
		e, err := get(i)
		if err != nil {
			return err
		}
		if e.hash != h {
			break
		}
		if e.storedAt < l.lo || e.storedAt > l.hi {
			continue
		}
		if done, err := l.try(e.logOffset); done || err != nil {
			return err
		}
	}
	return nil
}

// segmentGone reports whether retention removed the segment starting at
// start.
func (s *Store) segmentGone(start uint64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.segs) == 0 || start < s.segs[0].start
}

// closedSegment returns the closed segment starting at start and the log
// offsets it holds. Callers hold mu.
func (s *Store) closedSegment(start uint64) (sg *segment, first, end int64, ok bool) {
	for i := 0; i+1 < len(s.segs); i++ {
		if s.segs[i].start == start {
			return s.segs[i], int64(start) - 1, int64(s.segs[i+1].start) - 1, true
		}
	}
	return nil, 0, 0, false
}

// rebuildKeyFile rewrites the key file of the closed segment at start from
// the segment and registers it.
func (s *Store) rebuildKeyFile(start uint64) (keyFile, error) {
	s.ckptMu.Lock() // no checkpoint writes key files meanwhile
	defer s.ckptMu.Unlock()
	s.mu.RLock()
	sg, first, end, ok := s.closedSegment(start)
	s.mu.RUnlock()
	if !ok {
		return keyFile{}, errSegmentGone
	}
	k, err := s.writeKeyFile(sg, first, end)
	if err != nil {
		return k, err
	}
	s.stats.keyRebuilds.Add(1)
	s.mu.Lock()
	s.setKeyFile(k)
	s.mu.Unlock()
	return k, nil
}

// setKeyFile registers k (replacing the one of its segment). Callers hold
// mu exclusively.
func (s *Store) setKeyFile(k keyFile) {
	i, found := slices.BinarySearchFunc(s.keyFiles, k.start, func(a keyFile, t uint64) int {
		switch {
		case a.start < t:
			return -1
		case a.start > t:
			return 1
		}
		return 0
	})
	if found {
		s.keyFiles[i] = k
		return
	}
	s.keyFiles = slices.Insert(s.keyFiles, i, k)
}

// scanKeys reads the segment sg and returns the key entries of its records
// with log offsets in [first, end). Records that do not decode are skipped
// (reads step past them too).
func (s *Store) scanKeys(sg *segment, first, end int64) ([]keyEntry, error) {
	data, err := os.ReadFile(sg.path)
	if err != nil {
		return nil, err
	}
	frames, _ := parseFrames(data, 0)
	var out []keyEntry
	var m Message
	for _, fr := range frames {
		rec := data[fr.pos : fr.pos+int64(fr.size)]
		if isTombstone(rec) {
			continue
		}
		m = Message{}
		if _, err := decodeRecordTo(&m, rec, ""); err != nil || m.LogOffset < first || m.LogOffset >= end || m.Topic == "" {
			continue
		}
		at := m.StoredAt.UnixNano()
		s.keysOf(&m, func(k string) {
			out = append(out, keyEntry{hash: s.hashKey(m.Topic, k), logOffset: m.LogOffset, storedAt: at})
		})
	}
	return out, nil
}

// writeKeyFile builds the key file of a closed segment from the segment.
func (s *Store) writeKeyFile(sg *segment, first, end int64) (keyFile, error) {
	entries, err := s.scanKeys(sg, first, end)
	if err != nil {
		return keyFile{}, err
	}
	k := keyFile{start: sg.start, first: first, end: end}
	return s.putKeyFile(k, entries)
}

// putKeyFile writes k with entries through a temporary file renamed over
// the old one. Like the index files it is not fsynced: after a power loss
// it may be short or zeroed, which Open (its size, its header) or a lookup
// (each entry's checksum) notices and rebuilds from the segment.
func (s *Store) putKeyFile(k keyFile, entries []keyEntry) (keyFile, error) {
	k.oldest, k.newest, k.count = math.MaxInt64, math.MinInt64, int64(len(entries))
	for _, e := range entries {
		k.oldest, k.newest = min(k.oldest, e.storedAt), max(k.newest, e.storedAt)
	}
	if len(entries) == 0 {
		k.oldest, k.newest = 0, 0
	}
	path := keyFilePath(s.dir, k.start)
	if err := s.replaceFile(path, encodeKeyFile(k, entries)); err != nil {
		return k, fmt.Errorf("write key index %s: %w", segmentName(k.start), err)
	}
	return k, nil
}

// replaceFile writes path+".tmp" and renames it over path, without fsync.
func (s *Store) replaceFile(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, path)
	}
	if err != nil {
		_ = s.fs.Remove(tmp)
	}
	return err
}

// keyWork is a closed segment's key file to write, with its entries.
type keyWork struct {
	k       keyFile
	entries []keyEntry
}

// persistKeys writes the key file of every segment closed since the last
// checkpoint and drops its entries from memory; it removes the key files
// of segments retention removed. Callers hold ckptMu (a checkpoint).
func (s *Store) persistKeys() error {
	if s.opts.NoKeyIndex {
		return nil
	}
	s.mu.Lock()
	if !s.keysLoaded || s.failErr != nil || len(s.segs) == 0 {
		s.mu.Unlock()
		return nil
	}
	todo, stale := s.keyWork()
	s.mu.Unlock()

	for _, st := range stale {
		if err := s.fs.Remove(keyFilePath(s.dir, st)); err != nil && !fsx.IsNotExist(err) {
			s.log.Warn("store: could not remove a retained segment's key file", "dir", s.dir, "segment", segmentName(st), "err", err)
		}
	}
	var werr error
	done := 0
	for _, w := range todo {
		kf, err := s.putKeyFile(w.k, w.entries)
		if err != nil {
			werr = err
			break
		}
		todo[done].k = kf
		done++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if done > 0 {
		end := todo[done-1].k.end
		n := 0
		for n < len(s.keyMem) && s.keyMem[n].logOffset < end {
			n++
		}
		s.keyMem = slices.Delete(s.keyMem, 0, n)
		if cap(s.keyMem) > 4096 && len(s.keyMem) < cap(s.keyMem)/4 {
			s.keyMem = slices.Clip(slices.Clone(s.keyMem)) // do not keep a busy segment's capacity
		}
		for _, w := range todo[:done] {
			s.setKeyFile(w.k)
		}
	}
	if werr != nil {
		return s.fail(werr)
	}
	return nil
}

// keyWork lists the closed segments without a key file, with their
// entries from memory, and forgets the key files of segments retention
// removed (returned to be deleted). Callers hold mu exclusively.
func (s *Store) keyWork() (todo []keyWork, stale []uint64) {
	firstSeg := s.segs[0].start
	k := 0
	for _, f := range s.keyFiles {
		if f.start < firstSeg {
			stale = append(stale, f.start)
			continue
		}
		s.keyFiles[k] = f
		k++
	}
	s.keyFiles = s.keyFiles[:k]
	at := 0
	for i := 0; i+1 < len(s.segs); i++ {
		sg := s.segs[i]
		if n := len(s.keyFiles); n > 0 && s.keyFiles[n-1].start >= sg.start {
			continue // written
		}
		first, end := int64(sg.start)-1, int64(s.segs[i+1].start)-1
		j := at
		for j < len(s.keyMem) && s.keyMem[j].logOffset < end {
			j++
		}
		var es []keyEntry
		for _, e := range s.keyMem[at:j] {
			if e.logOffset >= first { // older ones: their segment was retained unwritten
				es = append(es, e)
			}
		}
		at = j
		todo = append(todo, keyWork{k: keyFile{start: sg.start, first: first, end: end}, entries: es})
	}
	return todo, stale
}

// openKeys loads the key index at Open: it checks every closed segment's
// key file against the segment (rebuilding the ones missing or wrong),
// removes the files of segments that are gone and reads the tail
// segment's keys into memory.
func (s *Store) openKeys() error {
	if s.opts.NoKeyIndex {
		return nil
	}
	dir := filepath.Join(s.dir, keyDir)
	if err := s.fs.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	have := map[uint64]bool{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	closed := map[uint64]bool{}
	for _, sg := range s.segs { // the tail's file is the one Close wrote
		closed[sg.start] = true
	}
	for _, e := range ents {
		name := e.Name()
		var start uint64
		if n, err := fmt.Sscanf(name, "%020d"+keySuffix, &start); n == 1 && err == nil && strings.HasSuffix(name, keySuffix) && closed[start] {
			have[start] = true
			continue
		}
		if err := s.fs.Remove(filepath.Join(dir, name)); err != nil && !fsx.IsNotExist(err) {
			return err
		}
	}
	s.keyFiles = s.keyFiles[:0]
	rebuilt := 0
	for i := 0; i+1 < len(s.segs); i++ {
		sg := s.segs[i]
		first, end := int64(sg.start)-1, int64(s.segs[i+1].start)-1
		k, why := s.checkKeyFile(sg.start, first, end, have[sg.start])
		if why != "" {
			if have[sg.start] {
				s.log.Warn("store: key index file unusable, rebuilding it from its segment", "dir", s.dir, "segment", sg.path, "reason", why)
			}
			if k, err = s.writeKeyFile(sg, first, end); err != nil {
				return err
			}
			s.stats.keyRebuilds.Add(1)
			rebuilt++
		}
		s.keyFiles = append(s.keyFiles, k)
	}
	tail := s.segs[len(s.segs)-1]
	if s.keyMem = s.loadTailKeys(tail, have[tail.start]); s.keyMem == nil {
		if s.keyMem, err = s.scanKeys(tail, int64(tail.start)-1, s.written); err != nil {
			return err
		}
	}
	s.keysLoaded = true
	if rebuilt > 0 {
		s.log.Info("store: key index rebuilt", "dir", s.dir, "files", rebuilt)
	}
	return nil
}

// persistTailKeys writes the key entries of the segment being written to
// its key file at Close, so the next Open reads them back (32 bytes a key)
// instead of decoding the segment. A failure only costs that: it is logged.
func (s *Store) persistTailKeys() {
	if s.opts.NoKeyIndex {
		return
	}
	s.mu.Lock()
	if !s.keysLoaded || s.failErr != nil || len(s.segs) == 0 {
		s.mu.Unlock()
		return
	}
	tail := s.segs[len(s.segs)-1]
	k := keyFile{start: tail.start, first: int64(tail.start) - 1, end: s.written}
	var es []keyEntry
	for _, e := range s.keyMem {
		if e.logOffset >= k.first {
			es = append(es, e)
		}
	}
	s.mu.Unlock()
	if _, err := s.putKeyFile(k, es); err != nil {
		s.log.Warn("store: could not write the last segment's key file; the next Open reads the segment", "dir", s.dir, "err", err)
	}
}

// loadTailKeys reads back the key entries of the tail segment from the
// file Close wrote, in log order; nil if there is none that covers exactly
// what the log holds (the segment is read instead). A damaged one is
// counted and logged.
func (s *Store) loadTailKeys(tail *segment, exists bool) []keyEntry {
	if !exists {
		return nil
	}
	b, err := fsx.ReadFile(s.fs, keyFilePath(s.dir, tail.start))
	if err != nil {
		return nil
	}
	k, es, err := decodeKeyFile(b)
	if err == nil && (k.start != tail.start || k.first != int64(tail.start)-1 || k.end > s.written) {
		err = fmt.Errorf("%w: it covers log offsets [%d, %d) of segment %d", ErrCorrupt, k.first, k.end, k.start)
	}
	if err != nil {
		s.stats.keyRebuilds.Add(1)
		s.log.Warn("store: the last segment's key file is unusable, reading the segment", "dir", s.dir, "segment", tail.path, "err", err)
		return nil
	}
	if k.end < s.written {
		return nil // written at an earlier Close: the segment has grown since
	}
	slices.SortFunc(es, func(a, b keyEntry) int { return int(a.logOffset - b.logOffset) })
	if es == nil {
		es = []keyEntry{}
	}
	return es
}

// checkKeyFile reads the header of the key file of segment start and
// checks it names that segment and the file holds what it says; why says
// what is wrong.
func (s *Store) checkKeyFile(start uint64, first, end int64, exists bool) (keyFile, string) {
	if !exists {
		return keyFile{}, "missing"
	}
	f, err := s.fs.OpenFile(keyFilePath(s.dir, start), os.O_RDONLY, 0)
	if err != nil {
		return keyFile{}, err.Error()
	}
	defer f.Close()
	var hdr [keyHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return keyFile{}, err.Error()
	}
	k, err := decodeKeyHeader(hdr[:])
	if err != nil {
		return k, err.Error()
	}
	if k.start != start || k.first != first || k.end != end {
		return k, fmt.Sprintf("it covers log offsets [%d, %d) of segment %d, the segment holds [%d, %d)", k.first, k.end, k.start, first, end)
	}
	fi, err := f.Stat()
	if err != nil {
		return k, err.Error()
	}
	if fi.Size() != keyHeaderSize+k.count*keyEntrySize {
		return k, fmt.Sprintf("%d bytes for %d entries", fi.Size(), k.count)
	}
	return k, ""
}
