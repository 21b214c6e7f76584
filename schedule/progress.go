package schedule

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// The progress file: magic "BCSP", version 1, a uvarint count, then count
// pairs (uvarint level, uvarint next offset) in increasing level order, then
// a CRC-32C (little endian) of everything before it. It is always replaced
// whole (temp file, fsync, rename, directory fsync), so a reader sees either
// the old or the new file; anything else is ErrCorrupt.

const (
	progressMagic   = "BCSP"
	progressVersion = 1
	// maxProgressLevels bounds what a decoder allocates for a hostile file.
	maxProgressLevels = 1 << 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeProgress renders level -> next offset.
func encodeProgress(p map[int]int64) []byte {
	levels := make([]int, 0, len(p))
	for l := range p {
		levels = append(levels, l)
	}
	sort.Ints(levels)
	b := make([]byte, 0, 8+len(levels)*12)
	b = append(b, progressMagic...)
	b = append(b, progressVersion)
	b = binary.AppendUvarint(b, uint64(len(levels)))
	for _, l := range levels {
		b = binary.AppendUvarint(b, uint64(l))
		b = binary.AppendUvarint(b, uint64(p[l]))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeProgress is the inverse of encodeProgress. Every deviation (short,
// trailing bytes, bad checksum, unknown version, level 0, levels out of
// order, offsets beyond int64) is ErrCorrupt.
func decodeProgress(b []byte) (map[int]int64, error) {
	corrupt := func(why string) error { return fmt.Errorf("progress file: %s: %w", why, ErrCorrupt) }
	if len(b) < len(progressMagic)+1+1+4 {
		return nil, corrupt(fmt.Sprintf("%d bytes is too short", len(b)))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if string(body[:4]) != progressMagic {
		return nil, corrupt("bad magic")
	}
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, corrupt("checksum mismatch")
	}
	if body[4] != progressVersion {
		return nil, corrupt(fmt.Sprintf("unknown version %d", body[4]))
	}
	rest := body[5:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, false
		}
		rest = rest[n:]
		return v, true
	}
	count, ok := next()
	if !ok || count > maxProgressLevels {
		return nil, corrupt("bad level count")
	}
	p := make(map[int]int64, count)
	prev := uint64(0)
	for i := uint64(0); i < count; i++ {
		l, ok1 := next()
		off, ok2 := next()
		if !ok1 || !ok2 {
			return nil, corrupt("truncated entry")
		}
		if l <= prev || l > maxProgressLevels {
			return nil, corrupt(fmt.Sprintf("level %d out of order or range", l))
		}
		if off > 1<<62 {
			return nil, corrupt(fmt.Sprintf("level %d offset %d out of range", l, off))
		}
		prev = l
		p[int(l)] = int64(off)
	}
	if len(rest) != 0 {
		return nil, corrupt(fmt.Sprintf("%d trailing bytes", len(rest)))
	}
	return p, nil
}

// loadProgress reads the file at path. A missing file is (nil, nil): a first
// start. An empty, torn or corrupt file is ErrCorrupt.
func loadProgress(path string) (map[int]int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("progress file %s: %w", path, err)
	}
	p, err := decodeProgress(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// saveProgress replaces the file at path atomically: write a temp file in the
// same directory, fsync it, rename it over path, fsync the directory.
func saveProgress(path string, p map[int]int64) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("progress file %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(encodeProgress(p)); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("progress file %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("progress file %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("progress dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("progress dir %s: %w", dir, err)
	}
	return nil
}
