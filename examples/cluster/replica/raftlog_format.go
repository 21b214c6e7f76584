package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/crc"
	"github.com/hashicorp/raft"
)

// The raft log's segment format. A segment file holds frames, one raft
// entry each, back to back; the file's name is the index of its first
// entry. One StoreLogs call writes one batch: its frames in one write,
// then one fsync. Each frame names the file offset where its batch starts,
// so that on open damage before an intact frame of a later batch (written
// only after the damaged one was fsynced) is told apart from a torn last
// write. A torn last batch is cut at its first damaged frame: raft never
// had that StoreLogs acknowledged, so keeping a prefix of it is as good as
// keeping none (and a suffix deletion may cut a batch in the middle too).
//
//	0  magic      uint16  0xB7C1
//	2  reserved   uint16  0
//	4  body len   uint32
//	8  batch      uint64  file offset of the batch's first frame
//	16 crc        uint32  CRC-32C of bytes 0..16 and the body
//	20 body: index uint64, term uint64, type uint8, appended_at int64 (Unix ns, 0 = zero time),
//	   data len uint32, data, extensions (the rest)
//
// Integers are little endian.
const (
	frameMagic    = 0xB7C1
	frameHeader   = 20
	frameBodyMin  = 8 + 8 + 1 + 8 + 4
	segmentSuffix = ".seg"
)

// maxFrameBody is the largest frame body (an entry's data and extensions
// plus frameBodyMin) the format reads back, and so the largest StoreLogs
// writes (a variable for tests).
var maxFrameBody = 256 << 20

// ErrLogCorrupt: raft's log (or its stable store) holds damage that is not
// a torn last write; the node refuses to start on it rather than drop
// entries it may have acknowledged.
var ErrLogCorrupt = errors.New("raft log corrupt")

var magicBytes = []byte{frameMagic & 0xff, frameMagic >> 8}

// appendFrame appends l's frame to b.
func appendFrame(b []byte, l *raft.Log, batch int64) []byte {
	start := len(b)
	n := frameBodyMin + len(l.Data) + len(l.Extensions)
	b = binary.LittleEndian.AppendUint16(b, frameMagic)
	b = append(b, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint64(b, uint64(batch))
	b = append(b, 0, 0, 0, 0) // crc, filled below
	b = binary.LittleEndian.AppendUint64(b, l.Index)
	b = binary.LittleEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(at))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(l.Data)))
	b = append(b, l.Data...)
	b = append(b, l.Extensions...)
	f := b[start:]
	binary.LittleEndian.PutUint32(f[16:], frameCRC(f))
	return b
}

func frameCRC(f []byte) uint32 {
	return crc.Update(crc.Checksum(f[:16]), f[frameHeader:])
}

// frameInfo is what a scan learns of one intact frame.
type frameInfo struct {
	off   int64
	n     int64 // header and body
	batch int64
	index uint64
}

// parseFrame checks the frame at data[p:]; ok is false unless it is whole
// and its checksum matches.
func parseFrame(data []byte, p int64) (frameInfo, bool) {
	if p < 0 || p+frameHeader > int64(len(data)) {
		return frameInfo{}, false
	}
	h := data[p:]
	if binary.LittleEndian.Uint16(h) != frameMagic || h[2] != 0 || h[3] != 0 {
		return frameInfo{}, false
	}
	n := int64(binary.LittleEndian.Uint32(h[4:]))
	if n < frameBodyMin || n > int64(maxFrameBody) || p+frameHeader+n > int64(len(data)) {
		return frameInfo{}, false
	}
	f := h[:frameHeader+n]
	if binary.LittleEndian.Uint32(f[16:]) != frameCRC(f) {
		return frameInfo{}, false
	}
	if frameHeader+frameBodyMin+int64(binary.LittleEndian.Uint32(f[frameHeader+25:])) > int64(len(f)) {
		return frameInfo{}, false // data length past the body: only a writer bug makes this
	}
	return frameInfo{off: p, n: int64(len(f)), batch: int64(binary.LittleEndian.Uint64(f[8:])),
		index: binary.LittleEndian.Uint64(f[frameHeader:])}, true
}

// decodeFrame decodes one whole frame read back from a segment into l,
// checking it is intact and holds index.
func decodeFrame(f []byte, index uint64, l *raft.Log) error {
	fi, ok := parseFrame(f, 0)
	if !ok || fi.n != int64(len(f)) || fi.index != index {
		return fmt.Errorf("entry %d: frame damaged on read: %w", index, ErrLogCorrupt)
	}
	b := f[frameHeader:]
	l.Index = index
	l.Term = binary.LittleEndian.Uint64(b[8:])
	l.Type = raft.LogType(b[16])
	l.AppendedAt = time.Time{}
	if at := int64(binary.LittleEndian.Uint64(b[17:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	dl := int(binary.LittleEndian.Uint32(b[25:]))
	rest := b[frameBodyMin:]
	l.Data, l.Extensions = nil, nil
	if dl > 0 {
		l.Data = rest[:dl:dl]
	}
	if len(rest) > dl {
		l.Extensions = rest[dl:]
	}
	return nil
}

// scanSegment finds the intact frames of one segment's bytes: each either
// continues the batch of the frame before it or starts a batch where it
// lies. It returns them and the offset where they end. Zeros past that end
// are preallocated space. Other bytes past it are a torn last batch (torn
// is set: the caller cuts them) only when tail is set and no intact frame
// of another batch follows them; otherwise the segment is corrupt.
func scanSegment(data []byte, tail bool) (frames []frameInfo, end int64, torn bool, err error) {
	var p int64
	cur := int64(-1) // the batch of the last intact frame
	for p < int64(len(data)) {
		fi, ok := parseFrame(data, p)
		if !ok || (fi.batch != cur && fi.batch != p) {
			break
		}
		frames = append(frames, fi)
		cur = fi.batch
		p += fi.n
	}
	if allZero(data[p:]) {
		return frames, p, false, nil
	}
	if !tail {
		return nil, 0, false, fmt.Errorf("damaged frame at offset %d of a segment that is not the last: %w", p, ErrLogCorrupt)
	}
	for q := p + 1; q < int64(len(data)); q++ {
		i := bytes.Index(data[q:], magicBytes)
		if i < 0 {
			break
		}
		q += int64(i)
		if fi, ok := parseFrame(data, q); ok && fi.batch != cur && fi.batch != p {
			return nil, 0, false, fmt.Errorf("damaged frame at offset %d is followed by an intact batch at offset %d: %w", p, fi.batch, ErrLogCorrupt)
		}
	}
	return frames, p, true, nil
}

func allZero(b []byte) bool {
	for len(b) >= len(zeros) {
		if !bytes.Equal(b[:len(zeros)], zeros[:]) {
			return false
		}
		b = b[len(zeros):]
	}
	return bytes.Equal(b, zeros[:len(b)])
}

// zeros is what preallocated segment space is written with.
var zeros [256 << 10]byte
