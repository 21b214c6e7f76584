package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
)

// progress says where New may start reading: every half below half is
// closed and not remembered, and no op record below op concerns a half at
// or above it. halfNext and opNext are how far the state that wrote it had
// read: a log that no longer reaches them lost records, and then the
// progress is not trusted.
type progress struct {
	half, op         int64
	halfNext, opNext int64
}

// The progress file: magic "BCTX", version 1, four uvarints, CRC-32C (LE).
const (
	progressMagic   = "BCTX"
	progressVersion = 1
)

func encodeProgress(p progress) []byte {
	b := append([]byte(progressMagic), progressVersion)
	for _, v := range []int64{p.half, p.op, p.halfNext, p.opNext} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	return binary.LittleEndian.AppendUint32(b, crc.Checksum(b))
}

func decodeProgress(b []byte) (progress, error) {
	if len(b) < len(progressMagic)+1+4+4 {
		return progress{}, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	body := b[:len(b)-4]
	if string(body[:4]) != progressMagic || body[4] != progressVersion {
		return progress{}, fmt.Errorf("%w: bad magic or version", ErrCorrupt)
	}
	if crc.Checksum(body) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return progress{}, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	r := body[5:]
	var v [4]int64
	for i := range v {
		x, n := binary.Uvarint(r)
		if n <= 0 || x > 1<<62 {
			return progress{}, fmt.Errorf("%w: bad field %d", ErrCorrupt, i)
		}
		v[i], r = int64(x), r[n:]
	}
	if len(r) != 0 {
		return progress{}, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(r))
	}
	p := progress{half: v[0], op: v[1], halfNext: v[2], opNext: v[3]}
	if p.half > p.halfNext || p.op > p.opNext {
		return progress{}, fmt.Errorf("%w: start past end", ErrCorrupt)
	}
	return p, nil
}

// startFrom returns where the rebuild starts reading the half and op
// queues: the progress file's offsets when the log still reaches what it
// had read, else the queues' oldest records.
func (m *Manager) startFrom() (half, op int64) {
	half, op = m.log.MinOffset(HalfTopic, 0), m.log.MinOffset(OpTopic, 0)
	if m.opts.ProgressPath == "" {
		return half, op
	}
	b, err := fsx.ReadFile(m.opts.fs, m.opts.ProgressPath)
	if fsx.IsNotExist(err) {
		return half, op
	}
	var p progress
	if err == nil {
		p, err = decodeProgress(b)
	}
	if err != nil {
		m.lg.Error("progress file unreadable: reading the whole half and op queues", "path", m.opts.ProgressPath, "err", err)
		return half, op
	}
	if m.log.MaxOffset(HalfTopic, 0) < p.halfNext || m.log.MaxOffset(OpTopic, 0) < p.opNext {
		m.lg.Warn("log ends before the progress file: reading the whole half and op queues",
			"half_end", m.log.MaxOffset(HalfTopic, 0), "progress_half", p.halfNext,
			"op_end", m.log.MaxOffset(OpTopic, 0), "progress_op", p.opNext)
		return half, op
	}
	return max(half, p.half), max(op, p.op)
}

// saveProgress writes the progress file (atomically) when there is one.
func (m *Manager) saveProgress() error {
	if m.opts.ProgressPath == "" {
		return nil
	}
	m.mu.Lock()
	half, op := m.c.floors()
	p := progress{half: half, op: op, halfNext: m.c.half.next, opNext: m.c.op.next}
	same := m.saved != nil && *m.saved == p
	m.mu.Unlock()
	if same {
		return nil // nothing moved since the last write
	}
	if err := fsx.WriteFile(m.opts.fs, m.opts.ProgressPath, encodeProgress(p), 0o644); err != nil {
		m.lg.Error("progress not written", "path", m.opts.ProgressPath, "err", err)
		return fmt.Errorf("txn: progress: %w", err)
	}
	m.mu.Lock()
	m.saved = &p
	m.mu.Unlock()
	return nil
}
