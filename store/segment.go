package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/brokercore/brokercore/internal/fsx"
)

// segment is one tidwall/wal segment file, named by the wal index of its
// first entry (LogOffset+1). The store reads segments itself through a
// read-only handle at positions kept in its index, so a read costs one
// pread instead of wal loading the whole segment into memory.
type segment struct {
	start uint64 // wal index of the first entry
	path  string
	f     *os.File // read-only; nil until opened
	size  int64    // bytes; for the tail, see Store.tailSize
	// readers holds f open for readers that pread it after letting go of
	// the Store lock: they take it shared (under the Store lock), whoever
	// closes f takes it exclusively first.
	readers sync.RWMutex
}

// close closes the read handle once no reader uses it.
func (sg *segment) close() {
	sg.readers.Lock()
	defer sg.readers.Unlock()
	if sg.f != nil {
		sg.f.Close()
	}
}

func segmentName(index uint64) string { return fmt.Sprintf("%020d", index) }

// listSegments returns the segment files of a wal directory in index order.
// A .START file is what wal's TruncateFront leaves when it was interrupted
// (retention): a complete copy of the entries from its index on, which
// wal.Open renames over the segments before it; it stands for that
// segment here. A .END file (TruncateBack, which the store never calls)
// means someone else wrote here.
func listSegments(dir string) ([]*segment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var segs []*segment
	var start uint64
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || len(name) < 20 {
			continue
		}
		idx, err := strconv.ParseUint(name[:20], 10, 64)
		if err != nil || idx == 0 {
			continue
		}
		if len(name) != 20 {
			switch {
			case name[20:] == ".START":
				start = idx
			case strings.HasSuffix(name, ".END"):
				return nil, fmt.Errorf("%w: unexpected wal file %s", ErrCorrupt, name)
			default:
				continue
			}
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		segs = append(segs, &segment{start: idx, path: filepath.Join(dir, name), size: info.Size()})
	}
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].start < segs[j].start })
	if start > 0 {
		kept := segs[:0]
		for _, sg := range segs {
			if sg.start > start || (sg.start == start && strings.HasSuffix(sg.path, ".START")) {
				kept = append(kept, sg)
			}
		}
		segs = kept
	}
	return segs, nil
}

// frame is one wal entry inside a segment: its data starts at pos.
type frame struct {
	pos  int64
	size int
}

// parseFrames splits a segment's bytes into wal entries (uvarint length +
// data), starting at byte from. end is where parsing stopped: len(data) for a clean segment, less
// for a torn or garbled one.
func parseFrames(data []byte, from int) (frames []frame, end int) {
	end = from
	for end < len(data) {
		n, k := binary.Uvarint(data[end:])
		if k <= 0 || n > uint64(len(data)-end-k) {
			return frames, end
		}
		frames = append(frames, frame{pos: int64(end + k), size: int(n)})
		end += k + int(n)
	}
	return frames, end
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// syncDir makes created, renamed and removed directory entries durable.
func syncDir(dir string) error { return fsx.SyncDir(dir) }
