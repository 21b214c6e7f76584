package schedule

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/store"
)

// ProgressLog is an optional capability of a Log: it appends the delivered
// messages and the scheduler's encoded progress as one atomic step, and
// returns the last progress so stored. When the Log implements it, the
// scheduler keeps levels' and timers' progress (and cancels) through it
// instead of its own progress file, so a replicated host (a raft FSM)
// replicates messages and progress together.
type ProgressLog interface {
	AppendWithProgress(progress []byte, msgs ...*store.Message) error
	LoadProgress() ([]byte, error) // nil, nil when none was stored yet
}

// progress is everything a restart needs: each level's next offset and the
// timers' state. It is encoded whole into one record.
type progress struct {
	levels map[int]int64
	timer  timerState
}

// timerState is the timers' part of the progress.
//
// Invariant (what makes the index rebuildable): every timer record of
// TimerTopic below ingested is in the index named by index, and a timer
// with key <= done was delivered (or cancelled). So the pending timers are
// exactly the records below ingested with a key above done that are not in
// cancels, plus everything from ingested on.
type timerState struct {
	ingested int64      // next TimerTopic queue offset to index
	done     timerKey   // every indexed timer with a key <= done is delivered
	index    uint64     // ID of the index this state was written against
	cancels  []timerKey // cancelled timers not yet passed by done and ingested, sorted
}

// noneDone is the done key before any timer was delivered.
var noneDone = timerKey{due: math.MinInt64, off: -1}

// The progress record: magic "BCSP", version, a uvarint level count, then
// (uvarint level, uvarint next offset) pairs in increasing level order; in
// version 2 the timer section follows (uvarint ingested, zigzag-varint done
// due, varint done offset, uvarint index ID, uvarint cancel count, then
// (zigzag-varint due, uvarint offset) pairs in increasing key order); then a
// CRC-32C (little endian) of everything before it. Version 1 files (levels
// only) are still read.
const (
	progressMagic   = "BCSP"
	progressVersion = 2
	// maxProgressLevels bounds what a decoder allocates for a hostile file.
	maxProgressLevels = 1 << 16
	// maxProgressCancels bounds the cancels a decoder accepts.
	maxProgressCancels = 1 << 26
)

func encodeProgress(p progress) []byte {
	levels := make([]int, 0, len(p.levels))
	for l := range p.levels {
		levels = append(levels, l)
	}
	slices.Sort(levels)
	t := p.timer
	b := make([]byte, 0, 40+len(levels)*12+len(t.cancels)*12)
	b = append(b, progressMagic...)
	b = append(b, progressVersion)
	b = binary.AppendUvarint(b, uint64(len(levels)))
	for _, l := range levels {
		b = binary.AppendUvarint(b, uint64(l))
		b = binary.AppendUvarint(b, uint64(p.levels[l]))
	}
	b = binary.AppendUvarint(b, uint64(t.ingested))
	b = binary.AppendVarint(b, t.done.due)
	b = binary.AppendVarint(b, t.done.off)
	b = binary.AppendUvarint(b, t.index)
	b = binary.AppendUvarint(b, uint64(len(t.cancels)))
	for _, c := range t.cancels {
		b = binary.AppendVarint(b, c.due)
		b = binary.AppendUvarint(b, uint64(c.off))
	}
	return binary.LittleEndian.AppendUint32(b, crc.Checksum(b))
}

// decodeProgress is the inverse of encodeProgress. Every deviation (short,
// trailing bytes, bad checksum, unknown version, level 0, levels or cancels
// out of order, offsets beyond int64) is ErrCorrupt.
func decodeProgress(b []byte) (progress, error) {
	corrupt := func(why string) (progress, error) {
		return progress{}, fmt.Errorf("progress: %s: %w", why, ErrCorrupt)
	}
	if len(b) < len(progressMagic)+1+1+4 {
		return corrupt(fmt.Sprintf("%d bytes is too short", len(b)))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if string(body[:4]) != progressMagic {
		return corrupt("bad magic")
	}
	if crc.Checksum(body) != sum {
		return corrupt("checksum mismatch")
	}
	version := body[4]
	if version != 1 && version != 2 {
		return corrupt(fmt.Sprintf("unknown version %d", version))
	}
	r := reader{b: body[5:]}
	count := r.uvarint()
	if r.bad || count > maxProgressLevels {
		return corrupt("bad level count")
	}
	p := progress{levels: make(map[int]int64, count), timer: timerState{done: noneDone}}
	prev := uint64(0)
	for i := uint64(0); i < count; i++ {
		l, off := r.uvarint(), r.uvarint()
		if r.bad {
			return corrupt("truncated level entry")
		}
		if l <= prev || l > maxProgressLevels {
			return corrupt(fmt.Sprintf("level %d out of order or range", l))
		}
		if off > 1<<62 {
			return corrupt(fmt.Sprintf("level %d offset %d out of range", l, off))
		}
		prev = l
		p.levels[int(l)] = int64(off)
	}
	if version == 2 {
		t := &p.timer
		ing := r.uvarint()
		t.done = timerKey{due: r.varint(), off: r.varint()}
		t.index = r.uvarint()
		n := r.uvarint()
		if r.bad || ing > 1<<62 || t.done.off < -1 || n > maxProgressCancels {
			return corrupt("bad timer section")
		}
		t.ingested = int64(ing)
		for i := uint64(0); i < n; i++ {
			k := timerKey{due: r.varint()}
			off := r.uvarint()
			if r.bad || off > 1<<62 {
				return corrupt("truncated cancel entry")
			}
			k.off = int64(off)
			if i > 0 && !t.cancels[i-1].less(k) {
				return corrupt("cancels out of order")
			}
			t.cancels = append(t.cancels, k)
		}
	}
	if len(r.b) != 0 {
		return corrupt(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	return p, nil
}

// reader reads varints and remembers whether any read failed.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// logProgress makes any Log a ProgressLog: the progress record is one more
// message (in ProgressTopic, queue 0) of the same all-or-nothing batch.
type logProgress struct{ Log }

func (l logProgress) AppendWithProgress(p []byte, msgs ...*store.Message) error {
	batch := make([]*store.Message, 0, len(msgs)+1)
	batch = append(batch, msgs...)
	batch = append(batch, &store.Message{Topic: ProgressTopic, Body: p})
	return l.Append(batch...)
}

func (l logProgress) LoadProgress() ([]byte, error) {
	lo, hi := l.MinOffset(ProgressTopic, 0), l.MaxOffset(ProgressTopic, 0)
	if hi <= lo {
		return nil, nil
	}
	msgs, err := l.Read(ProgressTopic, 0, hi-1, 1)
	if err != nil {
		return nil, fmt.Errorf("progress record %d: %w", hi-1, err)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("progress record %d missing: %w", hi-1, ErrCorrupt)
	}
	return msgs[0].Body, nil
}
