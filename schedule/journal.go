package schedule

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
)

// The progress file is a journal: a header, then records that each hold one
// whole encoded progress (see encodeProgress); the newest intact record is
// the progress. A delivered batch appends one record and syncs once, where
// an atomic replace costs a file fsync, a rename and a directory fsync. The
// journal is compacted (atomically replaced by a file holding only the
// newest record) once it grows past journalCompactAt, on the first write
// after a load, and after any failed write, so what follows a failure is
// never appended behind a partial record.
//
// Header: "BCSJ" and a version byte (1). Record: payload length (uint32),
// CRC-32C of the payload (uint32), CRC-32C of those 8 bytes (uint32), all
// little endian, then the payload. A crash can tear only the last append, so
// reading tolerates a torn tail (a partial record, zeros, or a complete last
// record whose payload fails its checksum) and reads the record before it;
// a damaged record header, or a bad payload with records after it, is
// ErrCorrupt, as is a journal without one intact record (its first record is
// written by an atomic replace, so it cannot be torn).
//
// A file that starts with the progress record's own magic ("BCSP") is the
// format before the journal (one record, atomically replaced): it is read
// as before and migrated to a journal by New.
const (
	journalMagic   = "BCSJ"
	journalVersion = 1
	journalHeader  = len(journalMagic) + 1
	recordHeader   = 12
	// journalCompactAt is the size past which the next write compacts the
	// journal (or eight times the newest record, if that is more).
	journalCompactAt = 1 << 20
	// maxJournalRecord bounds a record's declared length.
	maxJournalRecord = 1 << 30
)

// appendRecord appends the framed payload to b.
func appendRecord(b, payload []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, crc.Checksum(payload))
	b = binary.LittleEndian.AppendUint32(b, crc.Checksum(b[start:]))
	return append(b, payload...)
}

// newJournal is a whole journal file holding one record.
func newJournal(payload []byte) []byte {
	b := make([]byte, 0, journalHeader+recordHeader+len(payload))
	b = append(b, journalMagic...)
	b = append(b, journalVersion)
	return appendRecord(b, payload)
}

// decodeJournal returns the newest intact record of a progress file and
// the length of its intact prefix (where a torn tail begins; len(b) when
// there is none). legacy reports a file of the format before the journal:
// last is then the whole file, for decodeProgress to check.
func decodeJournal(b []byte) (last []byte, intact int, legacy bool, err error) {
	corrupt := func(why string) ([]byte, int, bool, error) {
		return nil, 0, false, fmt.Errorf("progress journal: %s: %w", why, ErrCorrupt)
	}
	if bytes.HasPrefix(b, []byte(progressMagic)) {
		return b, len(b), true, nil
	}
	if len(b) < journalHeader || string(b[:len(journalMagic)]) != journalMagic {
		return corrupt("bad magic")
	}
	if v := b[len(journalMagic)]; v != journalVersion {
		return corrupt(fmt.Sprintf("unknown version %d", v))
	}
	p := journalHeader
	for p < len(b) {
		rest := b[p:]
		if allZero(rest) || len(rest) < recordHeader {
			break // torn tail
		}
		h := rest[:recordHeader]
		if crc.Checksum(h[:8]) != binary.LittleEndian.Uint32(h[8:]) {
			return corrupt(fmt.Sprintf("record header at %d fails its checksum", p))
		}
		n := int(binary.LittleEndian.Uint32(h))
		if n == 0 || n > maxJournalRecord {
			return corrupt(fmt.Sprintf("record at %d has length %d", p, n))
		}
		if len(rest) < recordHeader+n {
			break // torn tail
		}
		payload := rest[recordHeader : recordHeader+n]
		if crc.Checksum(payload) != binary.LittleEndian.Uint32(h[4:]) {
			if len(rest) == recordHeader+n {
				break // the last append, torn
			}
			return corrupt(fmt.Sprintf("record at %d fails its checksum and records follow", p))
		}
		last = payload
		p += recordHeader + n
	}
	if last == nil {
		return corrupt("no intact record")
	}
	return last, p, false, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// progressJournal writes the progress file. It is used under
// Scheduler.saveMu.
type progressJournal struct {
	fs   fsx.FS
	path string
	f    fsx.File // open for appending; nil: the next write replaces the file
	size int64    // bytes in f
	last []byte   // the newest record stored (written or loaded)
	// compactAt overrides journalCompactAt (tests); 0 means the constant.
	compactAt int64
}

// load reads the file: the newest intact record, nil when there is no file
// yet. migrate reports a file that is of the old format or has a torn tail
// (either is replaced by the next write; New does that at once). Unless the
// file is exactly what this journal last wrote (a Start after a Stop), the
// next write replaces it.
func (j *progressJournal) load() (rec []byte, migrate bool, err error) {
	b, err := fsx.ReadFile(j.fs, j.path)
	if fsx.IsNotExist(err) {
		j.drop()
		j.last = nil
		return nil, false, nil
	}
	if err != nil {
		j.drop()
		return nil, false, fmt.Errorf("progress file %s: %w", j.path, err)
	}
	if len(b) == 0 {
		j.drop()
		return nil, false, fmt.Errorf("progress file %s: empty: %w", j.path, ErrCorrupt)
	}
	rec, intact, legacy, err := decodeJournal(b)
	if err != nil {
		j.drop()
		return nil, false, fmt.Errorf("progress file %s: %w", j.path, err)
	}
	if j.f == nil || legacy || intact != len(b) || int64(len(b)) != j.size || !bytes.Equal(rec, j.last) || j.unlinked() {
		// Not exactly what this journal last wrote: appending to it
		// could follow a torn or foreign record.
		j.drop()
	}
	j.last = bytes.Clone(rec)
	return j.last, legacy || intact < len(b), nil
}

// write stores rec: nothing when it is the record stored last, else one
// append and one sync, or an atomic replace when the journal is due for
// compaction, was not written since it was loaded, a write failed, or the
// file was unlinked under the scheduler.
func (j *progressJournal) write(rec []byte) error {
	if j.last != nil && bytes.Equal(rec, j.last) {
		return nil
	}
	limit := int64(journalCompactAt)
	if j.compactAt > 0 {
		limit = j.compactAt
	}
	if j.f == nil || j.size+int64(recordHeader+len(rec)) > max(limit, 8*int64(len(rec))) || j.unlinked() {
		return j.replace(rec)
	}
	b := appendRecord(make([]byte, 0, recordHeader+len(rec)), rec)
	_, err := j.f.Write(b)
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		j.drop() // what was written may be partial: the next write replaces the file
		return fmt.Errorf("progress file %s: %w", j.path, err)
	}
	j.size += int64(len(b))
	j.last = bytes.Clone(rec)
	return nil
}

// replace writes a journal holding only rec beside the file, syncs it,
// renames it over the file, syncs the directory, and keeps it open for the
// appends that follow.
func (j *progressJournal) replace(rec []byte) error {
	j.drop()
	tmp := j.path + ".tmp"
	f, err := j.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("progress file %s: %w", j.path, err)
	}
	b := newJournal(rec)
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = j.fs.Rename(tmp, j.path)
	}
	if err != nil {
		_ = f.Close()
		_ = j.fs.Remove(tmp)
		return fmt.Errorf("progress file %s: %w", j.path, err)
	}
	if err := j.fs.SyncDir(filepath.Dir(j.path)); err != nil {
		_ = f.Close()
		return fmt.Errorf("progress file %s: %w", j.path, err)
	}
	j.f, j.size, j.last = f, int64(len(b)), bytes.Clone(rec)
	return nil
}

// unlinked reports whether the open journal is no longer the file at the
// path (removed with its directory, say): appends to it would be lost.
func (j *progressJournal) unlinked() bool {
	fi, err := j.f.Stat()
	return err != nil || linkCount(fi) == 0
}

// drop closes the open journal, if any; the next write replaces the file.
func (j *progressJournal) drop() {
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
}

// close releases the file. The next write, if any, replaces it.
func (j *progressJournal) close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("progress file %s: %w", j.path, err)
	}
	return nil
}
