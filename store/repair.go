package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/brokercore/brokercore/internal/fsx"
)

// RepairOptions configure Repair. The zero value is a working default.
type RepairOptions struct {
	// Logger receives one line per cut (nil = discard).
	Logger *slog.Logger
	// FS is where the quarantine files and the checkpoint are written (nil =
	// the operating system).
	FS fsx.FS
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
// *CorruptError: it cuts the log at the corruption (a bad record followed
// by intact ones, a segment cut short, a missing segment), keeps every byte
// it cuts in a file under dir/quarantine, and reports exactly which log
// offsets and records were lost. A torn tail is cut (and reported) too. The
// index is rebuilt by the next Open. It takes the directory lock, so it
// never runs beside an open Store; on a log Open accepts it changes
// nothing but the torn tail.
func Repair(dir string, opts RepairOptions) (RepairReport, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.FS == nil {
		opts.FS = fsx.OS
	}
	var rep RepairReport
	lockF, err := lockDir(dir)
	if err != nil {
		return rep, err
	}
	defer lockF.Close()
	walDir := filepath.Join(dir, "log")
	for range 1 << 16 { // each round removes at least one segment's damage
		ck, err := readCheckpoint(opts.FS, dir)
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
		cut, err := repairOne(dir, opts.FS, segs, ck, ce)
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
	case damageFront:
		c.retained = segs[0].start // what was below is gone: the log starts here
	case damageMissing:
		tail := uint64(1)
		if len(segs) > 0 {
			tail = segs[len(segs)-1].start
		} else {
			c.retained = 1
		}
		c.segment, c.durable = tail, min(c.durable, ce.From)
	default:
		k := -1
		for i, sg := range segs {
			if sg.path == ce.Segment {
				k = i
			}
		}
		if k < 0 {
			return cut, fmt.Errorf("repair: segment %s not found", ce.Segment)
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
		c.segment, c.durable = min(c.segment, segs[k].start), min(c.durable, ce.From)
	}
	if cut.To < cut.From {
		cut.To = cut.From
	}
	return cut, writeCheckpoint(fsys, dir, &c)
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
		frames, _ := parseFrames(data, 0)
		for _, fr := range frames {
			m, _, err := decodeRecord(data[fr.pos : fr.pos+int64(fr.size)])
			if err != nil {
				continue
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
	qdir := filepath.Join(dir, "quarantine")
	if err := fsys.MkdirAll(qdir, 0o750); err != nil {
		return err
	}
	base := filepath.Join(qdir, filepath.Base(segs[0].path)+"-"+strconv.FormatInt(pos, 10))
	path := base + ".bad"
	for n := 1; ; n++ {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			break
		}
		path = base + "." + strconv.Itoa(n) + ".bad"
	}
	if err := fsx.WriteFile(fsys, path, all, 0o640); err != nil {
		return fmt.Errorf("repair: write quarantine: %w", err)
	}
	cut.Quarantine = path
	return nil
}
