package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
)

// Index persistence costs O(1) writes per checkpoint, whatever the number
// of queues that changed. New index entries wait in their file's buffer
// (indexFile.buf); a checkpoint writes the buffers that reached flushBytes
// to their files (their number is bounded by the bytes appended, not by the
// queues) and appends every other new entry to the index journal in one
// write. The checkpoint records how far each index file and the journal
// were written; Open reads the journal back into the buffers. Once the
// journal passes journalMax, and twice what its generation started with, a
// checkpoint starts a new generation holding only the entries still
// buffered: with many queues the buffered entries alone can pass
// journalMax, and a generation that starts past it must not be compacted
// again at every checkpoint (each compaction copies every buffered entry:
// at 100,000 queues that made appends 4× slower). The journal is derived
// state like every index file: damaged or short, the index is rebuilt from
// the log.
//
// A journal generation is the file index/journal.<gen>, a sequence of
// blocks: uvarint payload length, CRC-32C of the payload (4 bytes, little
// endian), payload. A payload is records: string topic ("" for the log-wide
// index), uvarint queue id, uvarint first entry, uvarint count, count
// entries of entrySize bytes.
const journalPrefix = "journal."

// journalMax is the size past which a checkpoint compacts the journal (a
// variable for tests).
var journalMax int64 = 16 << 20

func journalPath(dir string, gen uint64) string {
	return filepath.Join(dir, "index", journalPrefix+strconv.FormatUint(gen, 10))
}

// journal is the open generation.
type journal struct {
	f    fsx.File
	gen  uint64
	size int64 // bytes written (what the next checkpoint vouches for)
	base int64 // bytes a compaction started it with (0 when opened)
	buf  []byte
}

// openJournal opens generation gen, its valid part being size bytes long.
func openJournal(fsys fsx.FS, dir string, gen uint64, size int64) (*journal, error) {
	f, err := fsys.OpenFile(journalPath(dir, gen), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	return &journal{f: f, gen: gen, size: size}, nil
}

func (j *journal) close() {
	if j != nil && j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// addRecord appends the entries [from, x.next()) of x to the block being
// built.
func (j *journal) addRecord(topic string, id int, x *indexFile, from int64) {
	i := (from - x.flushed) * entrySize
	j.buf = appendString(j.buf, topic)
	j.buf = binary.AppendUvarint(j.buf, uint64(id))
	j.buf = binary.AppendUvarint(j.buf, uint64(from))
	j.buf = binary.AppendUvarint(j.buf, uint64((int64(len(x.buf))-i)/entrySize))
	j.buf = append(j.buf, x.buf[i:]...)
}

// writeBlock writes the block built since the last one, in one write.
func (j *journal) writeBlock() error {
	if len(j.buf) == 0 {
		return nil
	}
	hdr := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+4+len(j.buf)), uint64(len(j.buf)))
	hdr = binary.LittleEndian.AppendUint32(hdr, crc.Checksum(j.buf))
	b := append(hdr, j.buf...)
	if _, err := j.f.WriteAt(b, j.size); err != nil {
		return fmt.Errorf("write index journal %s: %w", j.f.Name(), err)
	}
	j.size += int64(len(b))
	if cap(j.buf) > 1<<20 {
		j.buf = nil
	} else {
		j.buf = j.buf[:0]
	}
	return nil
}

// journalRecord is one record read back.
type journalRecord struct {
	topic   string
	id      int
	first   int64
	entries []byte
}

// readJournal reads the first size bytes of generation gen; anything that
// does not decode is ErrCorrupt.
func readJournal(fsys fsx.FS, dir string, gen uint64, size int64) ([]journalRecord, error) {
	if size == 0 {
		return nil, nil
	}
	b, err := fsx.ReadFile(fsys, journalPath(dir, gen))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < size {
		return nil, fmt.Errorf("%w: index journal holds %d bytes, the checkpoint says %d", ErrCorrupt, len(b), size)
	}
	b = b[:size]
	var out []journalRecord
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || len(b) < k+4 || n > uint64(len(b)-k-4) {
			return nil, fmt.Errorf("%w: index journal block does not parse", ErrCorrupt)
		}
		sum := binary.LittleEndian.Uint32(b[k:])
		payload := b[k+4 : k+4+int(n)]
		if crc.Checksum(payload) != sum {
			return nil, fmt.Errorf("%w: index journal block checksum", ErrCorrupt)
		}
		d := decoder{buf: payload}
		for len(d.buf) > 0 && d.err == nil {
			r := journalRecord{topic: d.string(), id: int(d.offset())}
			r.first = d.offset()
			cnt := d.uvarint()
			if cnt > uint64(len(d.buf))/entrySize {
				d.fail("entry count exceeds block")
				break
			}
			r.entries = d.buf[:cnt*entrySize]
			d.buf = d.buf[cnt*entrySize:]
			out = append(out, r)
		}
		if d.err != nil {
			return nil, fmt.Errorf("%w: index journal: %v", ErrCorrupt, d.err)
		}
		b = b[k+4+int(n):]
	}
	return out, nil
}

// loadJournal puts the journaled entries back into the buffers of the
// index files (after openFromCheckpoint set each one's flushed). why says
// what is wrong when the journal and the checkpoint disagree.
func (s *Store) loadJournal(ck *checkpoint) (why string, err error) {
	recs, err := readJournal(s.fs, s.dir, ck.journalGen, ck.journalSize)
	if err != nil {
		return "index journal: " + err.Error(), nil
	}
	for _, r := range recs {
		x := s.lidx
		if r.topic != "" {
			q := s.queues[r.topic][r.id]
			if q == nil {
				continue // a queue the checkpoint no longer lists
			}
			x = q.idx
		}
		end := r.first + int64(len(r.entries)/entrySize)
		if end <= x.flushed {
			continue // flushed to its file since
		}
		if r.first > x.next() {
			return fmt.Sprintf("index journal skips entries of %s (%d to %d)", x.Name(), x.next(), r.first), nil
		}
		from := max(x.flushed, r.first)
		// Entries from next() on are new; earlier ones (rewritten by a
		// later block) are replaced.
		at := (from - x.flushed) * entrySize
		x.buf = append(x.buf[:at], r.entries[(from-r.first)*entrySize:]...)
	}
	for _, x := range s.allIndexFiles() {
		x.journaled = x.next() // all of it is in the journal or the file
	}
	if s.jr, err = openJournal(s.fs, s.dir, ck.journalGen, ck.journalSize); err != nil {
		return "", err
	}
	s.jgen = ck.journalGen
	return "", nil
}

// persistIndex writes the index for a checkpoint: every buffer of at least
// flushBytes to its file, every other new entry to the journal in one
// block (or all buffered entries to a new journal generation once the
// journal passed journalMax and doubled since its generation began).
// Callers hold mu exclusively.
func (s *Store) persistIndex() error {
	if s.jr == nil {
		j, err := openJournal(s.fs, s.dir, s.jgen+1, 0)
		if err != nil {
			return err
		}
		s.jr = j
	}
	if s.jr.size >= max(journalMax, 2*s.jr.base) {
		return s.compactJournal()
	}
	k := 0 // s.dirty[:k]: buffers kept on the list for the next checkpoint
	for i, x := range s.dirty {
		took := x.next() - x.journaled // entries since the last checkpoint
		if len(x.buf) >= flushBytes {
			if err := x.flush(); err != nil {
				s.dirty = append(s.dirty[:k], s.dirty[i:]...)
				return err
			}
		} else if x.journaled < x.next() {
			topic, id := "", 0
			if x.q != nil {
				topic, id = x.q.topic, x.q.id
			}
			s.jr.addRecord(topic, id, x, max(x.journaled, x.flushed))
		}
		x.journaled = x.next()
		x.queued = false
		if cap(x.buf) > flushBytes {
			if took*entrySize >= flushBytes {
				// Busy: it keeps its buffer, and stays on the list so
				// the first checkpoint it is quiet for releases it.
				x.queued = true
				s.dirty[k] = x
				k++
			} else {
				x.buf = shrunk(x.buf)
			}
		}
	}
	clear(s.dirty[k:])
	s.dirty = s.dirty[:k]
	return s.jr.writeBlock()
}

// shrunk is buf (under flushBytes once a checkpoint has passed) without the
// capacity a busy period left it: a queue that once took maxBuffered of
// entries between two checkpoints does not keep that memory for good.
func shrunk(buf []byte) []byte {
	if len(buf) == 0 {
		return nil
	}
	return append([]byte(nil), buf...)
}

// compactJournal starts a new journal generation holding every entry still
// buffered (one write), flushing full buffers first. Callers hold mu
// exclusively.
func (s *Store) compactJournal() error {
	s.snapStale = true // queues' offsets change outside the append path (snapshotQueues)
	next, err := openJournal(s.fs, s.dir, s.jr.gen+1, 0)
	if err != nil {
		return err
	}
	add := func(topic string, id int, x *indexFile) error {
		if len(x.buf) >= flushBytes {
			if err := x.flush(); err != nil {
				return err
			}
		} else if len(x.buf) > 0 {
			next.addRecord(topic, id, x, x.flushed)
		}
		x.journaled, x.queued = x.next(), false
		if cap(x.buf) > flushBytes {
			x.buf = shrunk(x.buf)
		}
		return nil
	}
	err = add("", 0, s.lidx)
	for _, qs := range s.queues {
		for _, q := range qs {
			if err == nil {
				err = add(q.topic, q.id, q.idx)
			}
		}
	}
	clear(s.dirty)
	s.dirty = s.dirty[:0]
	if err == nil {
		err = next.writeBlock()
	}
	if err != nil {
		next.close()
		return err
	}
	next.base = next.size
	s.oldJournal.close()
	s.oldJournal = s.jr // removed once a checkpoint names the new one
	s.jr = next
	s.jgen = next.gen
	return nil
}

// allIndexFiles lists the log-wide index and every queue's.
func (s *Store) allIndexFiles() []*indexFile {
	out := make([]*indexFile, 0, s.nq+1)
	out = append(out, s.lidx)
	for _, qs := range s.queues {
		for _, q := range qs {
			out = append(out, q.idx)
		}
	}
	return out
}

// closeJournal closes the journal files (before a rebuild, at Close).
func (s *Store) closeJournal() {
	if s.jr != nil {
		s.jgen = max(s.jgen, s.jr.gen)
	}
	s.jr.close()
	s.oldJournal.close()
	s.jr, s.oldJournal = nil, nil
}

// journalWritten removes the journal generation a checkpoint no longer
// names, once one names the new one.
func (s *Store) journalWritten(gen uint64) {
	s.mu.Lock()
	old := s.oldJournal
	if old == nil || old.gen >= gen {
		s.mu.Unlock()
		return
	}
	s.oldJournal = nil
	s.mu.Unlock()
	old.close()
	if err := s.fs.Remove(journalPath(s.dir, old.gen)); err != nil && !os.IsNotExist(err) {
		s.log.Warn("store: could not remove an old index journal", "dir", s.dir, "gen", old.gen, "err", err)
	}
}
