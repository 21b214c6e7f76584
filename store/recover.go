package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Recovery reads the log's segment files before tidwall/wal opens them
// (wal.Open fails on a torn last entry), relying only on wal's segment
// format: files named by the wal index of their first entry, each entry a
// uvarint length and the data. The log is the only truth; what the
// checkpoint says about it (logFacts) is used to find what is missing,
// never to decide that a record may be dropped.
//
// The rules:
//   - A tail is torn only when no intact record follows the first bad byte
//     of the last segment. Then it is cut back to the end of the last whole
//     batch (which may lie in an earlier segment when a batch spans them).
//   - A bad record with an intact one after it is corruption: a
//     *CorruptError naming segment, position and the log offsets affected.
//     A closed segment is decoded whole only when its last record cannot be
//     proven from the log-wide index hint (Repair always decodes it whole).
//   - Segments cover the log without gaps from the retained minimum to the
//     end: a missing segment, or an older one cut short, is a *CorruptError
//     naming the missing range. Segments retention removed are not gaps.

// logFacts is what a readable checkpoint says about the log.
type logFacts struct {
	known    bool
	retained uint64 // retention removed every wal index below it
	segment  uint64 // first wal index of the segment the checkpoint's position is in
	durable  int64  // log offsets below it were fsynced
}

func factsOf(ck *checkpoint) logFacts {
	if ck == nil {
		return logFacts{}
	}
	return logFacts{known: true, retained: max(ck.retained, 1), segment: ck.segment, durable: ck.durable}
}

// recItem is one intact record of a segment.
type recItem struct {
	start, end int64 // the wal entry: its length prefix, and just past it
	batchEnd   bool
	logOffset  int64
}

// scanSegment decodes the wal entries of data from byte 0; the first must
// be log offset first, and each the next. It stops at the first byte that
// does not begin an intact record of the expected log offset: bad is its
// position (len(data) for a clean segment) and why says what is wrong.
func scanSegment(data []byte, first int64) (items []recItem, bad int64, why string) {
	at := 0
	var m Message
	for at < len(data) {
		n, k := binary.Uvarint(data[at:])
		if k <= 0 || n > uint64(len(data)-at-k) {
			return items, int64(at), fmt.Sprintf("%d bytes do not parse as a wal entry", len(data)-at)
		}
		rec := data[at+k : at+k+int(n)]
		batchEnd, err := decodeRecordTo(&m, rec, "")
		want := first + int64(len(items))
		if err == nil && m.LogOffset != want {
			err = fmt.Errorf("record has log offset %d, expected %d", m.LogOffset, want)
		}
		if err != nil {
			return items, int64(at), strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": ")
		}
		end := at + k + int(n)
		items = append(items, recItem{start: int64(at), end: int64(end), batchEnd: batchEnd, logOffset: want})
		at = end
	}
	return items, int64(len(data)), ""
}

// intactAfter looks for an intact record of log offset min or later that
// begins after byte from, at any byte position (a damaged length prefix
// hides where the next entry starts). It returns the log offset of the last
// intact record of the run that follows.
func intactAfter(data []byte, from int64, min int64) (last int64, found bool) {
	var m Message
	for p := int(from) + 1; p < len(data); p++ {
		n, k := binary.Uvarint(data[p:])
		if k <= 0 || n < recordHeader || n > uint64(len(data)-p-k) {
			continue
		}
		rec := data[p+k : p+k+int(n)]
		if rec[0] != recordVersion || rec[1]&^knownFlags != 0 {
			continue
		}
		if _, err := decodeRecordTo(&m, rec, ""); err != nil || m.LogOffset < min {
			continue
		}
		items, _, _ := scanSegment(data[p:], m.LogOffset)
		return items[len(items)-1].logOffset, true
	}
	return 0, false
}

// framedDamage reports whether the bad wal entry at byte at of a segment
// (which should hold log offset want) is a damaged record inside intact
// framing: its length prefix parses and the next entry is an intact record
// of log offset want+1, or it ends the segment and the next segment starts
// at want+1 (nextFirst, the next segment's first log offset; -1 for the
// last segment, whose last record is a torn tail instead). end is just past
// the entry.
func framedDamage(data []byte, at int64, want int64, nextFirst int64) (end int64, ok bool) {
	n, k := binary.Uvarint(data[at:])
	if k <= 0 || n > uint64(int64(len(data))-at-int64(k)) {
		return 0, false
	}
	end = at + int64(k) + int64(n)
	if end == int64(len(data)) {
		return end, nextFirst == want+1
	}
	n2, k2 := binary.Uvarint(data[end:])
	if k2 <= 0 || n2 > uint64(int64(len(data))-end-int64(k2)) {
		return 0, false
	}
	var m Message
	rec := data[end+int64(k2) : end+int64(k2)+int64(n2)]
	if _, err := decodeRecordTo(&m, rec, ""); err != nil || m.LogOffset != want+1 {
		return 0, false
	}
	return end, true
}

// segEnd is what proveEnd learned about a closed segment's last record.
type segEnd struct {
	batchEnd bool
}

// proveEnd checks that a closed segment holds exactly the wal indexes up to
// next-1: cheaply, when the log-wide index names the position of its last
// record and that record is there, intact, ending the file; otherwise by
// decoding the whole segment. Closed segments are never torn (wal fsyncs a
// segment before starting the next), so anything wrong is corruption.
func proveEnd(sg *segment, next uint64, readEntry func(int64) (entry, error)) (segEnd, error) {
	first := int64(sg.start) - 1
	last := int64(next) - 2
	if last < first {
		if sg.size == 0 {
			return segEnd{batchEnd: true}, nil
		}
		return segEnd{}, &CorruptError{Segment: sg.path, Position: 0, From: first, To: -1,
			Reason: fmt.Sprintf("segment holds bytes but the next segment starts at the same wal index %d", next)}
	}
	if readEntry != nil {
		if e, err := readEntry(last); err == nil && e.logOffset == last && e.pos+int64(e.size) == sg.size {
			if be, ok := recordAt(sg.path, e.pos, int(e.size), last); ok {
				return segEnd{batchEnd: be}, nil
			}
		}
	}
	data, err := os.ReadFile(sg.path)
	if err != nil {
		return segEnd{}, err
	}
	items, bad, why := scanSegment(data, first)
	if bad < int64(len(data)) {
		want := first + int64(len(items))
		if end, ok := framedDamage(data, bad, want, int64(next)-1); ok {
			return segEnd{}, &CorruptError{Segment: sg.path, Position: bad, From: want, To: -1,
				Reason: why + " (the framing around it is intact: Repair replaces only this record)", kind: damageRecord, recEnd: end}
		}
		return segEnd{}, &CorruptError{Segment: sg.path, Position: bad, From: want, To: -1, Reason: why}
	}
	if got := first + int64(len(items)); got != last+1 {
		if got < last+1 {
			return segEnd{}, &CorruptError{Segment: sg.path, Position: int64(len(data)), From: got, To: last + 1,
				Reason: fmt.Sprintf("segment is short: it ends at log offset %d, the next segment starts at %d", got-1, last+1)}
		}
		return segEnd{}, &CorruptError{Segment: sg.path, Position: items[last+1-first].start, From: last + 1, To: got,
			Reason: "segment overlaps the next one"}
	}
	if len(items) == 0 {
		return segEnd{batchEnd: true}, nil
	}
	return segEnd{batchEnd: items[len(items)-1].batchEnd}, nil
}

// recordAt reads the wal entry whose data is [pos, pos+size) of a segment
// and reports whether it is an intact record of log offset want, and its
// batch-end flag.
func recordAt(path string, pos int64, size int, want int64) (batchEnd bool, ok bool) {
	hdr := int64(uvarintLen(uint64(size)))
	if pos < hdr {
		return false, false
	}
	f, err := os.Open(path)
	if err != nil {
		return false, false
	}
	defer f.Close()
	buf := make([]byte, hdr+int64(size))
	if _, err := f.ReadAt(buf, pos-hdr); err != nil {
		return false, false
	}
	if n, k := binary.Uvarint(buf); k != int(hdr) || n != uint64(size) {
		return false, false
	}
	var m Message
	be, err := decodeRecordTo(&m, buf[hdr:], "")
	return be, err == nil && m.LogOffset == want
}

// cutPlan is where Open cuts the log: segment segs[seg] at byte pos, and
// every segment after it. seg is -1 when nothing is cut.
type cutPlan struct {
	seg        int
	pos        int64
	bytes      int64
	entries    int // wal entries (and unparseable bytes, as one) cut
	reason     string
	durableCut int64 // records the checkpoint recorded as durable that the cut takes
}

// inspection is the verdict on the log files before wal opens them.
type inspection struct {
	segs []*segment
	cut  cutPlan
	next int64 // next log offset once the cut is applied
}

// inspectLog checks the continuity of segs and finds the torn tail, if any.
// It changes nothing on disk.
func inspectLog(walDir string, segs []*segment, facts logFacts, readEntry func(int64) (entry, error)) (*inspection, error) {
	ins := &inspection{segs: segs, cut: cutPlan{seg: -1}}
	if len(segs) == 0 {
		if facts.known && (facts.durable > 0 || facts.retained > 1) {
			first := int64(facts.retained) - 1
			return nil, &CorruptError{Segment: filepath.Join(walDir, segmentName(facts.retained)), From: first, To: max(facts.durable, first),
				Reason: "every log segment is missing", kind: damageMissing}
		}
		return ins, nil
	}
	if facts.known && segs[0].start > facts.retained {
		return nil, &CorruptError{Segment: filepath.Join(walDir, segmentName(facts.retained)), From: int64(facts.retained) - 1,
			To:     int64(segs[0].start) - 1,
			Reason: fmt.Sprintf("log segment missing: the log starts at wal index %d, retention removed only below %d", segs[0].start, facts.retained),
			kind:   damageFront}
	}
	ends := make([]segEnd, len(segs))
	for i := 0; i < len(segs)-1; i++ {
		e, err := proveEnd(segs[i], segs[i+1].start, readEntry)
		if err != nil {
			return nil, err
		}
		ends[i] = e
	}
	last := len(segs) - 1
	tail := segs[last]
	data, err := os.ReadFile(tail.path)
	if err != nil {
		return nil, err
	}
	tail.size = int64(len(data))
	first := int64(tail.start) - 1
	items, bad, why := scanSegment(data, first)
	logEnd := first + int64(len(items))
	if bad < int64(len(data)) {
		if lastOK, found := intactAfter(data, bad, logEnd); found {
			if end, ok := framedDamage(data, bad, logEnd, -1); ok {
				return nil, &CorruptError{Segment: tail.path, Position: bad, From: logEnd, To: lastOK + 1,
					Reason: why + " (the framing around it is intact: Repair replaces only this record)", kind: damageRecord, recEnd: end}
			}
			return nil, &CorruptError{Segment: tail.path, Position: bad, From: logEnd, To: lastOK + 1,
				Reason: fmt.Sprintf("%s, and intact records follow (up to log offset %d)", why, lastOK)}
		}
	}
	if facts.known && facts.segment > tail.start && facts.durable > logEnd {
		return nil, &CorruptError{Segment: filepath.Join(walDir, segmentName(facts.segment)), From: logEnd, To: max(facts.durable, logEnd),
			Reason: "log segment named by the checkpoint is missing", kind: damageMissing}
	}
	why = cmpOr(why, "incomplete batch")
	cut, next, err := planCut(segs, ends, items, bad < int64(len(data)), why)
	if err != nil {
		return nil, err
	}
	ins.next = next
	if cut.bytes == 0 && cut.seg == last {
		return ins, nil
	}
	if facts.known && facts.durable > next {
		cut.durableCut = facts.durable - next
	}
	ins.cut = cut
	return ins, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// planCut finds the end of the last whole batch, going back from the
// intact records of the tail (items) into earlier segments when a batch
// spans them, and returns the cut there and the log offset it leaves next.
// torn says bytes follow the intact records.
func planCut(segs []*segment, ends []segEnd, items []recItem, torn bool, why string) (cutPlan, int64, error) {
	last := len(segs) - 1
	cut := cutPlan{seg: last, reason: why}
	first := int64(segs[last].start) - 1
	next := lastBatchEnd(items, first, &cut)
	cut.entries = len(items) - int(next-first)
	if torn {
		cut.entries++
	}
	for cut.pos == 0 && cut.seg > 0 && !ends[cut.seg-1].batchEnd {
		// The last whole batch ends in an earlier segment.
		prev := segs[cut.seg-1]
		pdata, err := os.ReadFile(prev.path)
		if err != nil {
			return cut, 0, err
		}
		pitems, _, _ := scanSegment(pdata, int64(prev.start)-1) // proveEnd found it intact
		cut.seg--
		pfirst := int64(prev.start) - 1
		next = lastBatchEnd(pitems, pfirst, &cut)
		cut.entries += len(pitems) - int(next-pfirst)
	}
	for _, sg := range segs[cut.seg:] {
		cut.bytes += sg.size
	}
	cut.bytes -= cut.pos
	return cut, next, nil
}

// lastBatchEnd sets cut.pos just past the last batch-end record of items
// (0 if none) and returns the log offset after it (first if none).
func lastBatchEnd(items []recItem, first int64, cut *cutPlan) int64 {
	cut.pos = 0
	for k := len(items) - 1; k >= 0; k-- {
		if items[k].batchEnd {
			cut.pos = items[k].end
			return items[k].logOffset + 1
		}
	}
	return first
}

// applyCut removes the segments after the cut and truncates the one it is
// in, then fsyncs the directory.
func applyCut(walDir string, ins *inspection) error {
	c := ins.cut
	if c.seg < 0 {
		return nil
	}
	for j := len(ins.segs) - 1; j > c.seg; j-- {
		if err := os.Remove(ins.segs[j].path); err != nil {
			return err
		}
	}
	if err := truncateSync(ins.segs[c.seg].path, c.pos); err != nil {
		return err
	}
	ins.segs[c.seg].size = c.pos
	ins.segs = ins.segs[:c.seg+1]
	return syncDir(walDir)
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// openEntryReader returns a reader of the log-wide index file for
// inspectLog, or nil when there is none. The entries are only hints: every
// one is checked against the record it names.
func openEntryReader(path string) (read func(int64) (entry, error), closeFn func()) {
	f, err := os.Open(path)
	if err != nil {
		return nil, func() {}
	}
	return func(n int64) (entry, error) {
		var b [entrySize]byte
		if _, err := f.ReadAt(b[:], n*entrySize); err != nil {
			return entry{}, err
		}
		return decodeEntry(b[:])
	}, func() { f.Close() }
}
