package schedule

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
)

// The timer index: one append-only file per slot (SlotWidth of due times),
// each a sequence of fixed-size entries, plus a meta file holding the index
// ID that the progress names. Entries are appended in ingest order, not
// sorted; a slot is sorted when it is loaded into the window. The index is
// derived state: everything in it can be rebuilt from TimerTopic and the
// progress, and is (see timerLane.rebuild) when the meta file is missing,
// its ID is not the progress's, or any entry fails its checksum.
//
// An entry is 24 bytes, little endian: due (int64, Unix ms), offset in
// TimerTopic (int64), FNV-1a of the UNIQ_KEY (uint32), CRC-32C of the 20
// bytes before it (uint32). A file whose size is not a multiple of 24 has a
// torn tail, which is ignored (and cut before the next append). The meta
// file is "BCTI", the ID (uint64) and a CRC-32C of both.

const (
	entrySize = 24
	metaName  = "index.meta"
	metaMagic = "BCTI"
	slotExt   = ".slot"
)

var errIndexDamaged = errors.New("timer index damaged")

// entry is one indexed timer.
type entry struct {
	key  timerKey
	hash uint32
}

func appendEntry(b []byte, e entry) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.key.due))
	b = binary.LittleEndian.AppendUint64(b, uint64(e.key.off))
	b = binary.LittleEndian.AppendUint32(b, e.hash)
	return binary.LittleEndian.AppendUint32(b, crc.Checksum(b[start:]))
}

// decodeEntries decodes a slot file; a torn tail (a partial last entry) is
// ignored, a checksum mismatch or a negative offset is errIndexDamaged.
func decodeEntries(b []byte, out []entry) ([]entry, error) {
	err := scanEntries(b, func(e entry) { out = append(out, e) })
	return out, err
}

// scanEntries calls fn for each entry of b, checked as decodeEntries
// checks them, without collecting them.
func scanEntries(b []byte, fn func(entry)) error {
	for len(b) >= entrySize {
		if crc.Checksum(b[:20]) != binary.LittleEndian.Uint32(b[20:24]) {
			return fmt.Errorf("entry checksum mismatch: %w", errIndexDamaged)
		}
		e := entry{
			key:  timerKey{due: int64(binary.LittleEndian.Uint64(b)), off: int64(binary.LittleEndian.Uint64(b[8:]))},
			hash: binary.LittleEndian.Uint32(b[16:]),
		}
		if e.key.off < 0 {
			return fmt.Errorf("negative offset: %w", errIndexDamaged)
		}
		fn(e)
		b = b[entrySize:]
	}
	return nil
}

func encodeMeta(id uint64) []byte {
	b := append([]byte(metaMagic), binary.LittleEndian.AppendUint64(nil, id)...)
	return binary.LittleEndian.AppendUint32(b, crc.Checksum(b))
}

func decodeMeta(b []byte) (uint64, error) {
	if len(b) != 16 || string(b[:4]) != metaMagic || crc.Checksum(b[:12]) != binary.LittleEndian.Uint32(b[12:]) {
		return 0, fmt.Errorf("meta file: %w", errIndexDamaged)
	}
	return binary.LittleEndian.Uint64(b[4:]), nil
}

// slotOf is the slot of a due time (floor division: negative times too).
func slotOf(due int64) int64 {
	w := SlotWidth.Milliseconds()
	s := due / w
	if due%w < 0 {
		s--
	}
	return s
}

// slotFiles is where slot contents live: a directory, or memory.
type slotFiles interface {
	meta() (id uint64, ok bool, err error) // ok false: no meta (a fresh or wiped index)
	reset(id uint64) error                 // remove every slot, then record id
	list() ([]int64, error)
	read(slot int64) ([]byte, error)
	write(slot int64, b []byte) error // append; durable after sync
	sync() error                      // every write so far is durable
	remove(slot int64) error
}

// memSlots keeps the index in memory: used without a ProgressPath, where the
// index is rebuilt from the log by every New.
type memSlots struct {
	id    uint64
	has   bool
	slots map[int64][]byte
}

func (m *memSlots) meta() (uint64, bool, error) { return m.id, m.has, nil }
func (m *memSlots) reset(id uint64) error {
	m.id, m.has, m.slots = id, true, map[int64][]byte{}
	return nil
}
func (m *memSlots) list() ([]int64, error) {
	out := make([]int64, 0, len(m.slots))
	for s := range m.slots {
		out = append(out, s)
	}
	return out, nil
}
func (m *memSlots) read(slot int64) ([]byte, error) { return m.slots[slot], nil }
func (m *memSlots) write(slot int64, b []byte) error {
	m.slots[slot] = append(m.slots[slot], b...)
	return nil
}
func (m *memSlots) sync() error { return nil }
func (m *memSlots) remove(slot int64) error {
	delete(m.slots, slot)
	return nil
}

// dirSlots keeps the index in a directory, one file per slot.
type dirSlots struct {
	fs    fsx.FS
	dir   string
	open  map[int64]fsx.File // written since the last sync
	fresh bool               // a file was created since the last sync
	id    uint64             // set by reset
	// unwritten: reset has not written the meta file yet (no entry so far)
	unwritten bool
}

func newDirSlots(fs fsx.FS, dir string) *dirSlots {
	return &dirSlots{fs: fs, dir: dir, open: map[int64]fsx.File{}}
}

func (d *dirSlots) path(slot int64) string {
	return filepath.Join(d.dir, strconv.FormatInt(slot, 10)+slotExt)
}

func (d *dirSlots) meta() (uint64, bool, error) {
	b, err := d.fs.ReadFile(filepath.Join(d.dir, metaName))
	if fsx.IsNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	id, err := decodeMeta(b)
	if err != nil {
		return 0, false, nil // a damaged meta file is no index: rebuild
	}
	return id, true, nil
}

func (d *dirSlots) reset(id uint64) error {
	d.closeAll()
	// The meta file goes first: a crash in the middle leaves no meta file
	// (or one whose ID no progress names), so the next start rebuilds.
	if err := d.fs.Remove(filepath.Join(d.dir, metaName)); err != nil && !fsx.IsNotExist(err) {
		return err
	}
	slots, err := d.list()
	if err != nil {
		return err
	}
	for _, s := range slots {
		if err := d.fs.Remove(d.path(s)); err != nil && !fsx.IsNotExist(err) {
			return err
		}
	}
	// The directory and the meta file are written with the first entry:
	// a scheduler that never sees a timer leaves nothing beside its
	// progress file.
	d.id, d.unwritten = id, true
	return nil
}

// writeMeta creates the directory and records the ID before the first
// slot file is written.
func (d *dirSlots) writeMeta() error {
	if !d.unwritten {
		return nil
	}
	if err := d.fs.MkdirAll(d.dir, 0o755); err != nil {
		return err
	}
	if err := fsx.WriteFile(d.fs, filepath.Join(d.dir, metaName), encodeMeta(d.id), 0o644); err != nil {
		return err
	}
	d.unwritten = false
	return nil
}

func (d *dirSlots) list() ([]int64, error) {
	des, err := os.ReadDir(d.dir)
	if fsx.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), slotExt)
		if !ok {
			continue
		}
		if s, err := strconv.ParseInt(name, 10, 64); err == nil {
			out = append(out, s)
		}
	}
	return out, nil
}

func (d *dirSlots) read(slot int64) ([]byte, error) {
	b, err := d.fs.ReadFile(d.path(slot))
	if fsx.IsNotExist(err) {
		return nil, nil
	}
	return b, err
}

func (d *dirSlots) write(slot int64, b []byte) error {
	if err := d.writeMeta(); err != nil {
		return err
	}
	f := d.open[slot]
	if f == nil {
		var err error
		f, err = d.fs.OpenFile(d.path(slot), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil && fi.Size()%entrySize != 0 {
			err = f.Truncate(fi.Size() - fi.Size()%entrySize) // cut a torn tail
		}
		if err != nil {
			_ = f.Close()
			return err
		}
		d.fresh = d.fresh || fi.Size() == 0
		d.open[slot] = f
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, fi.Size())
	return err
}

func (d *dirSlots) sync() error {
	var first error
	for s, f := range d.open {
		err := f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil && first == nil {
			first = err
		}
		delete(d.open, s)
	}
	if first != nil {
		return first
	}
	if d.fresh {
		if err := d.fs.SyncDir(d.dir); err != nil {
			return err
		}
		d.fresh = false
	}
	return nil
}

func (d *dirSlots) closeAll() {
	for s, f := range d.open {
		_ = f.Close()
		delete(d.open, s)
	}
}

func (d *dirSlots) remove(slot int64) error {
	if f := d.open[slot]; f != nil {
		_ = f.Close()
		delete(d.open, slot)
	}
	err := d.fs.Remove(d.path(slot))
	if fsx.IsNotExist(err) {
		return nil
	}
	return err
}

// index is the slot files plus what is buffered for them.
type index struct {
	files slotFiles
	id    uint64
	slots []int64          // slots that have a file or a buffer, sorted
	buf   map[int64][]byte // entries not yet written
	nbuf  int              // entries in buf
	wrote bool             // written since the last sync
}

func newIndexID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1 // never 0: 0 is "no index" in progress
}

// open reads the meta file and the slot list (not the slots).
func (x *index) open() (ok bool, err error) {
	id, ok, err := x.files.meta()
	if err != nil || !ok {
		return false, err
	}
	slots, err := x.files.list()
	if err != nil {
		return false, err
	}
	slices.Sort(slots)
	x.id, x.slots, x.buf, x.nbuf = id, slots, map[int64][]byte{}, 0
	return true, nil
}

// reset empties the index under a new ID.
func (x *index) reset() error {
	id := newIndexID()
	if err := x.files.reset(id); err != nil {
		return err
	}
	x.id, x.slots, x.buf, x.nbuf, x.wrote = id, nil, map[int64][]byte{}, 0, false
	return nil
}

func (x *index) add(e entry) {
	s := slotOf(e.key.due)
	if _, ok := x.buf[s]; !ok {
		if i, found := slices.BinarySearch(x.slots, s); !found {
			x.slots = slices.Insert(x.slots, i, s)
		}
	}
	x.buf[s] = appendEntry(x.buf[s], e)
	x.nbuf++
}

// flush makes every added entry durable.
func (x *index) flush() error {
	for s, b := range x.buf {
		if err := x.files.write(s, b); err != nil {
			return err
		}
		delete(x.buf, s)
		x.wrote = true
	}
	x.nbuf = 0
	if !x.wrote {
		return nil
	}
	if err := x.files.sync(); err != nil {
		return err
	}
	x.wrote = false
	return nil
}

// load returns the entries of slot, buffered ones included, unsorted and
// possibly with duplicates (a record indexed again after a crash).
func (x *index) load(slot int64) ([]entry, error) {
	b, err := x.files.read(slot)
	if err != nil {
		return nil, err
	}
	out, err := decodeEntries(b, nil)
	if err != nil {
		return nil, fmt.Errorf("slot %d: %w", slot, err)
	}
	return decodeEntries(x.buf[slot], out)
}

// scan calls fn for every entry of slot, buffered ones included, in no
// particular order, without collecting them (Cancel's search).
func (x *index) scan(slot int64, fn func(entry)) error {
	b, err := x.files.read(slot)
	if err != nil {
		return err
	}
	if err := scanEntries(b, fn); err != nil {
		return fmt.Errorf("slot %d: %w", slot, err)
	}
	return scanEntries(x.buf[slot], fn)
}

// after is the first slot above s, if any.
func (x *index) after(s int64) (int64, bool) {
	i, found := slices.BinarySearch(x.slots, s)
	if found {
		i++
	}
	if i == len(x.slots) {
		return 0, false
	}
	return x.slots[i], true
}

// drop removes the slots below s.
func (x *index) drop(below int64) error {
	for len(x.slots) > 0 && x.slots[0] < below {
		s := x.slots[0]
		x.nbuf -= len(x.buf[s]) / entrySize
		delete(x.buf, s)
		if err := x.files.remove(s); err != nil {
			return err
		}
		x.slots = x.slots[1:]
	}
	return nil
}
