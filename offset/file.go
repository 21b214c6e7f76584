package offset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
)

// The offset file, version 1 (all integers little endian):
//
//	magic      8 bytes  "BCOFFSET"
//	version    uint16   1
//	reserved   uint16   0
//	payloadLen uint64   bytes between the header and the checksum
//	payload:
//	  writtenAt  int64    Unix nanoseconds (informational)
//	  floor      uint64   highest epoch of any removed entry
//	  count      uvarint  number of records
//	  count × record: uvarint len, group, uvarint len, topic,
//	                  uvarint queueID, uvarint offset, uvarint epoch
//	crc        uint32   CRC-32C of everything before it
//
// The exact length check (header + payloadLen + 4 == file size) makes every
// truncation and every appended byte detectable before the checksum is even
// computed; the checksum catches changed bytes.
const (
	fileMagic     = "BCOFFSET"
	fileVersion   = 1
	fileHeaderLen = 8 + 2 + 2 + 8
	fileTrailer   = 4
)

// record is one (group, topic, queue) entry as stored in the file.
type record struct {
	key
	offset int64
	epoch  uint64
}

// snapshot is the decoded content of an offset file.
type snapshot struct {
	writtenAt int64
	floor     uint64
	records   []record
}

// encodeFile appends the file image of s to buf.
func encodeFile(buf []byte, s snapshot) []byte {
	buf = append(buf, fileMagic...)
	buf = binary.LittleEndian.AppendUint16(buf, fileVersion)
	buf = binary.LittleEndian.AppendUint16(buf, 0)
	lenAt := len(buf)
	buf = binary.LittleEndian.AppendUint64(buf, 0) // patched below
	start := len(buf)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(s.writtenAt))
	buf = binary.LittleEndian.AppendUint64(buf, s.floor)
	buf = binary.AppendUvarint(buf, uint64(len(s.records)))
	for _, r := range s.records {
		buf = appendRecord(buf, r)
	}
	binary.LittleEndian.PutUint64(buf[lenAt:], uint64(len(buf)-start))
	return binary.LittleEndian.AppendUint32(buf, crc.Checksum(buf))
}

func appendRecord(buf []byte, r record) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(r.group)))
	buf = append(buf, r.group...)
	buf = binary.AppendUvarint(buf, uint64(len(r.topic)))
	buf = append(buf, r.topic...)
	buf = binary.AppendUvarint(buf, uint64(r.queue))
	buf = binary.AppendUvarint(buf, uint64(r.offset))
	return binary.AppendUvarint(buf, r.epoch)
}

// decodeFile parses a whole file image. Any defect returns an error wrapping
// ErrCorrupt (or ErrVersion); it never panics and never allocates more than
// the input justifies.
func decodeFile(data []byte) (snapshot, error) {
	var s snapshot
	if len(data) < fileHeaderLen+fileTrailer {
		return s, fmt.Errorf("%w: %d bytes is shorter than header and checksum", ErrCorrupt, len(data))
	}
	if string(data[:8]) != fileMagic {
		return s, fmt.Errorf("%w: bad magic %q", ErrCorrupt, data[:8])
	}
	if v := binary.LittleEndian.Uint16(data[8:]); v != fileVersion {
		if v > fileVersion {
			return s, fmt.Errorf("%w: version %d (this build reads %d)", ErrVersion, v, fileVersion)
		}
		return s, fmt.Errorf("%w: bad version %d", ErrCorrupt, v)
	}
	plen := binary.LittleEndian.Uint64(data[12:])
	body := uint64(len(data) - fileHeaderLen - fileTrailer)
	if plen != body {
		return s, fmt.Errorf("%w: header says %d payload bytes, file has %d (torn or extended file)", ErrCorrupt, plen, body)
	}
	end := len(data) - fileTrailer
	if got, want := crc.Checksum(data[:end]), binary.LittleEndian.Uint32(data[end:]); got != want {
		return s, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	d := decoder{b: data[fileHeaderLen:end]}
	s.writtenAt = int64(d.u64())
	s.floor = d.u64()
	n := d.uvarint()
	// A record takes at least 7 bytes: the bound keeps a forged count from
	// allocating more than the input justifies.
	if d.err == nil && n > uint64(len(d.b))/7 {
		return s, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, n, len(d.b))
	}
	s.records = make([]record, 0, n)
	seen := make(map[key]struct{}, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		var r record
		r.group = d.str()
		r.topic = d.str()
		q := d.uvarint()
		off := d.uvarint()
		r.epoch = d.uvarint()
		if d.err != nil {
			break
		}
		if r.group == "" || r.topic == "" || q > math.MaxInt || off > math.MaxInt64 {
			return s, fmt.Errorf("%w: record %d has an invalid key or offset", ErrCorrupt, i)
		}
		r.queue, r.offset = int(q), int64(off)
		if _, dup := seen[r.key]; dup {
			return s, fmt.Errorf("%w: record %d duplicates %s/%s/%d", ErrCorrupt, i, r.group, r.topic, r.queue)
		}
		seen[r.key] = struct{}{}
		s.records = append(s.records, r)
	}
	if d.err != nil {
		return s, fmt.Errorf("%w: %v", ErrCorrupt, d.err)
	}
	if len(d.b) != 0 {
		return s, fmt.Errorf("%w: %d stray bytes after the last record", ErrCorrupt, len(d.b))
	}
	return s, nil
}

// decoder reads from b, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("record runs past the payload")

func (d *decoder) u64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.err = errShort
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || (n > 1 && d.b[n-1] == 0) { // overflow, short, or not minimal
		d.err = errors.New("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errShort
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// writeFileAtomic replaces path with data so that a crash at any point
// leaves either the old or the new file under path, never a mix: first the
// current file is kept as path.bak (when keepBackup), then fsx.WriteFile
// writes path.tmp, fsyncs it, renames it over path and fsyncs the directory.
// A write that fails after the backup leaves path.bak equal to path, still
// "the previous good file".
func writeFileAtomic(fsys fsx.FS, path string, data []byte, keepBackup bool) error {
	if keepBackup {
		if err := backup(fsys, path); err != nil {
			return fmt.Errorf("keep backup: %w", err)
		}
	}
	return fsx.WriteFile(fsys, path, data, 0o644)
}

// backup makes path.bak a copy of path (if path exists) without ever leaving
// path missing: on the real file system a hard link renamed into place,
// otherwise (or where links fail) an atomic copy.
func backup(fsys fsx.FS, path string) error {
	bak := path + ".bak"
	if fsys == fsx.OS {
		bakTmp := bak + ".tmp"
		_ = os.Remove(bakTmp)
		err := os.Link(path, bakTmp)
		if err == nil {
			return os.Rename(bakTmp, bak)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil // first write: nothing to keep
		}
	}
	data, err := fsys.ReadFile(path)
	if fsx.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fsx.WriteFile(fsys, bak, data, 0o644)
}

// readSnapshot loads and decodes one file. A missing file is reported with
// fs.ErrNotExist unwrapped so the caller can tell "first run" from "corrupt".
func readSnapshot(fsys fsx.FS, path string) (snapshot, error) {
	data, err := fsx.ReadFile(fsys, path)
	if err != nil {
		return snapshot{}, err
	}
	s, err := decodeFile(data)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
