package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/brokercore/brokercore/internal/fsx"
)

// RepairOptions configure Repair. The zero value is a working default.
type RepairOptions struct {
	// Logger receives one line per cut (nil = discard).
	Logger *slog.Logger
	// fs is where the quarantine files and the checkpoint are written (nil =
	// the operating system); tests set it (export_test.go).
	fs fsx.FS
}

// RepairReport says exactly what Repair removed from the log.
type RepairReport struct {
	Cuts []RepairCut
	// Lost is the number of log offsets lost over all cuts.
	Lost int64
}

// RepairCut is one place Repair cut the log.
type RepairCut struct {
	Segment  string // log segment cut (for a missing one, the path it had)
	Position int64  // byte position of the cut in Segment
	Reason   string
	// From and To are the log offsets lost: [From, To).
	From, To int64
	// Quarantine holds the bytes cut, Bytes long: the tail of Segment from
	// Position, followed by every later segment whole, as wal entries. It is
	// "" when nothing was left on disk to keep (a missing segment).
	Quarantine string
	Bytes      int64
	// Records are the records decodable from the quarantined bytes.
	Records []LostRecord
}

// LostRecord names one record Repair cut.
type LostRecord struct {
	LogOffset   int64
	Topic       string
	QueueID     int
	QueueOffset int64
}

// Repair is the explicit way out of a log Open refuses with a
// *CorruptError: a damaged record whose framing is intact (its length
// prefix, and an intact record of the next log offset after it) is
// replaced by a tombstone of the same log offset, so exactly that record
// is lost; where the framing itself is gone (a bad record followed by
// intact ones, a segment cut short, a missing segment) it cuts the log
// there. It keeps every byte it removes in a file under dir/quarantine and
// reports exactly which log offsets and records were lost. The offsets lost
// are never handed out again: the next Open writes tombstones up to what
// the checkpoint recorded as issued. A torn tail is cut (and reported) too. The
// index is rebuilt by the next Open. It takes the directory lock, so it
// never runs beside an open Store; on a log Open accepts it changes
// nothing but the torn tail.
func Repair(dir string, opts RepairOptions) (RepairReport, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.fs == nil {
		opts.fs = fsx.OS
	}
	var rep RepairReport
	lockF, err := lockDir(dir)
	if err != nil {
		return rep, err
	}
	defer lockF.Close()
	walDir := filepath.Join(dir, "log")
	for range 1 << 16 { // each round removes at least one segment's damage
		ck, err := readCheckpoint(opts.fs, dir)
		if err != nil {
			ck = nil // derived: the next Open rebuilds
		}
		segs, err := listSegments(walDir)
		if err != nil {
			return rep, err
		}
		// No log-wide index hints: Open proves a closed segment by its last
		// record only (reopening must not re-read the log), Repair decodes
		// every record of every segment, so a damaged record inside a
		// closed segment (which Read refuses with ErrCorrupt) is found too.
		ins, err := inspectLog(walDir, segs, factsOf(ck), nil)
		var ce *CorruptError
		switch {
		case err == nil && ins.cut.seg < 0:
			return rep, nil
		case err == nil:
			c := ins.cut
			ce = &CorruptError{Segment: segs[c.seg].path, Position: c.pos, From: ins.next, To: -1,
				Reason: "torn tail: " + c.reason}
		case errors.As(err, &ce):
		default:
			return rep, err
		}
		cut, err := repairOne(dir, opts.fs, segs, ck, ce)
		if err != nil {
			return rep, err
		}
		opts.Logger.Warn("store: repair cut the log", "dir", dir, "segment", cut.Segment, "position", cut.Position,
			"from", cut.From, "to", cut.To, "bytes", cut.Bytes, "quarantine", cut.Quarantine, "reason", cut.Reason)
		rep.Cuts = append(rep.Cuts, cut)
		rep.Lost += cut.To - cut.From
	}
	return rep, fmt.Errorf("%w: repair did not converge", ErrCorrupt)
}

// repairOne deals with one damage: it quarantines and cuts, or accepts a
// missing range, and then rewrites the checkpoint so that it vouches for no
// index file and matches the log as it now is.
func repairOne(dir string, fsys fsx.FS, segs []*segment, ck *checkpoint, ce *CorruptError) (RepairCut, error) {
	cut := RepairCut{Segment: ce.Segment, Position: ce.Position, Reason: ce.Reason, From: ce.From, To: ce.To}
	c := checkpoint{retained: 1}
	if ck != nil {
		c = *ck
	}
	c.indexValid = false
	switch ce.kind {
	case damageRecord:
		if err := replaceRecord(dir, fsys, ce, &cut); err != nil {
			return cut, err
		}
	case damageFront:
		c.retained = segs[0].start // what was below is gone: the log starts here
	case damageMissing:
		tail := uint64(1)
		if len(segs) > 0 {
			tail = segs[len(segs)-1].start
		} else {
			c.retained = 1
		}
		// The checkpoint keeps what it knew was durable: Open writes
		// tombstones for the lost offsets, so none is handed out again.
		c.segment = tail
	default:
		k := -1
		for i, sg := range segs {
			if sg.path == ce.Segment {
				k = i
			}
		}
		if k < 0 {
			return cut, fmt.Errorf("%w: repair: segment %s not found", ErrCorrupt, ce.Segment)
		}
		if err := quarantine(dir, fsys, segs[k:], ce.Position, &cut); err != nil {
			return cut, err
		}
		for j := len(segs) - 1; j > k; j-- {
			if err := os.Remove(segs[j].path); err != nil {
				return cut, err
			}
		}
		if err := truncateSync(segs[k].path, ce.Position); err != nil {
			return cut, err
		}
		if err := syncDir(filepath.Join(dir, "log")); err != nil {
			return cut, err
		}
		c.segment = min(c.segment, segs[k].start) // durable stays: see damageMissing
	}
	if cut.To < cut.From {
		cut.To = cut.From
	}
	raiseFloors(&c, &cut)
	return cut, writeCheckpoint(fsys, dir, &c)
}

// raiseFloors makes the checkpoint Repair writes know every offset the cut
// records had, and count them durable, so the next Open writes tombstones
// for them (lost.go) and never hands one out again.
func raiseFloors(c *checkpoint, cut *RepairCut) {
	c.next = max(c.next, cut.To)
	c.durable = max(c.durable, cut.To)
	for _, r := range cut.Records {
		i := slices.IndexFunc(c.queues, func(q ckptQueue) bool { return q.topic == r.Topic && q.id == r.QueueID })
		if i < 0 {
			c.queues = append(c.queues, ckptQueue{topic: r.Topic, id: r.QueueID, min: r.QueueOffset, next: r.QueueOffset + 1, lastLog: r.LogOffset})
			continue
		}
		if q := &c.queues[i]; r.QueueOffset >= q.next {
			q.next, q.lastLog = r.QueueOffset+1, r.LogOffset
		}
	}
}

// quarantine writes the bytes of segs[0] from pos and of every later
// segment to a new file under dir/quarantine, and lists the records in
// them.
func quarantine(dir string, fsys fsx.FS, segs []*segment, pos int64, cut *RepairCut) error {
	var all []byte
	for i, sg := range segs {
		data, err := os.ReadFile(sg.path)
		if err != nil {
			return err
		}
		if i == 0 {
			data = data[min(pos, int64(len(data))):]
		}
		for _, m := range intactRecords(data) {
			if m.Topic == "" {
				continue // a tombstone of no queue
			}
			cut.Records = append(cut.Records, LostRecord{LogOffset: m.LogOffset, Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset})
			cut.To = max(cut.To, m.LogOffset+1)
		}
		all = append(all, data...)
	}
	cut.Bytes = int64(len(all))
	if len(all) == 0 {
		return nil
	}
	return writeQuarantine(dir, fsys, segs[0].path, pos, all, cut)
}

// replaceRecord replaces the damaged wal entry [ce.Position, ce.recEnd) of
// ce.Segment by a tombstone of log offset ce.From (of the same size when it
// can), after quarantining the entry's bytes; the segment is rewritten
// through a temporary file and a rename.
func replaceRecord(dir string, fsys fsx.FS, ce *CorruptError, cut *RepairCut) error {
	data, err := os.ReadFile(ce.Segment)
	if err != nil {
		return err
	}
	old := data[ce.Position:ce.recEnd]
	frame := tombstoneFrame(old, ce.From)
	if err := writeQuarantine(dir, fsys, ce.Segment, ce.Position, old, cut); err != nil {
		return err
	}
	out := make([]byte, 0, len(data)-len(old)+len(frame))
	out = append(append(append(out, data[:ce.Position]...), frame...), data[ce.recEnd:]...)
	if err := fsx.WriteFile(nil, ce.Segment, out, 0o640); err != nil {
		return fmt.Errorf("repair: rewrite %s: %w", ce.Segment, err)
	}
	cut.Bytes = int64(len(old))
	cut.To = ce.From + 1
	return nil
}

// tombstoneFrame is the wal entry of a tombstone of no queue for log offset
// logOffset, padded to the length of old (the damaged entry it replaces)
// when that is possible. The damaged record's batch-end flag is kept when
// its flags byte is still a valid one.
func tombstoneFrame(old []byte, logOffset int64) []byte {
	flags := flagLost | flagBatchEnd
	if n, k := binary.Uvarint(old); k > 0 && int(n) >= 2 && len(old) >= k+2 {
		if f := old[k+1]; f&^knownFlags == 0 {
			flags = flagLost | f&flagBatchEnd
		}
	}
	m := &Message{LogOffset: logOffset}
	rec := appendRecordFlags(nil, m, flags)
	for pad := len(old) - len(rec); pad >= 0 && pad >= len(old)-len(rec)-12; pad-- {
		m.Body = make([]byte, pad)
		r := appendRecordFlags(nil, m, flags)
		if uvarintLen(uint64(len(r)))+len(r) == len(old) {
			rec = r
			break
		}
	}
	return append(binary.AppendUvarint(nil, uint64(len(rec))), rec...)
}

// writeQuarantine keeps bytes removed from segment at pos in a new file
// under dir/quarantine.
func writeQuarantine(dir string, fsys fsx.FS, segment string, pos int64, b []byte, cut *RepairCut) error {
	qdir := filepath.Join(dir, "quarantine")
	if err := fsys.MkdirAll(qdir, 0o750); err != nil {
		return err
	}
	base := filepath.Join(qdir, filepath.Base(segment)+"-"+strconv.FormatInt(pos, 10))
	path := base + ".bad"
	for n := 1; ; n++ {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			break
		}
		path = base + "." + strconv.Itoa(n) + ".bad"
	}
	if err := fsx.WriteFile(fsys, path, b, 0o640); err != nil {
		return fmt.Errorf("repair: write quarantine: %w", err)
	}
	cut.Quarantine = path
	return nil
}

// intactRecords finds the intact records in data: wal entries from byte 0,
// and where the framing is gone, from wherever an intact record starts
// (byte by byte), so every record Repair cuts is reported.
func intactRecords(data []byte) []*Message {
	var out []*Message
	for p := 0; p < len(data); {
		n, k := binary.Uvarint(data[p:])
		if k > 0 && n >= recordHeader && n <= uint64(len(data)-p-k) {
			rec := data[p+k : p+k+int(n)]
			if rec[0] == recordVersion && rec[1]&^knownFlags == 0 {
				if m, _, err := decodeRecord(rec); err == nil {
					out = append(out, m)
					p += k + int(n)
					continue
				}
			}
		}
		p++
	}
	return out
}
