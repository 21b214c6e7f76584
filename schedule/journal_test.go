package schedule

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// journalOf is a journal file holding recs in order.
func journalOf(recs ...[]byte) []byte {
	b := newJournal(recs[0])
	for _, r := range recs[1:] {
		b = appendRecord(b, r)
	}
	return b
}

func TestJournalTornTailReadsTheRecordBeforeIt(t *testing.T) {
	r1 := encodeLevels(map[int]int64{1: 1})
	r2 := encodeLevels(map[int]int64{1: 2, 2: 7})
	whole := journalOf(r1, r2)
	second := len(newJournal(r1)) // where r2's record begins

	last, intact, legacy, err := decodeJournal(whole)
	require.NoError(t, err)
	assert.False(t, legacy)
	assert.Equal(t, r2, last)
	assert.Equal(t, len(whole), intact)

	for cut := second + 1; cut < len(whole); cut++ {
		last, intact, _, err := decodeJournal(whole[:cut])
		require.NoError(t, err, "cut at %d", cut)
		assert.Equal(t, r1, last, "cut at %d", cut)
		assert.Equal(t, second, intact, "cut at %d", cut)
	}
	// The last append reached its full length but not all its data (the
	// unwritten part reads as zeros, or as anything): still torn.
	for name, b := range map[string][]byte{
		"zeroed payload": append(bytes.Clone(whole[:len(whole)-4]), 0, 0, 0, 0),
		"flipped last":   append(bytes.Clone(whole[:len(whole)-1]), whole[len(whole)-1]^1),
		"zeros after":    append(bytes.Clone(whole[:second]), make([]byte, 40)...),
	} {
		last, intact, _, err := decodeJournal(b)
		require.NoError(t, err, name)
		assert.Equal(t, r1, last, name)
		assert.Equal(t, second, intact, name)
	}
	// Zeros after an intact last record (a size extended before a crash).
	last, intact, _, err = decodeJournal(append(bytes.Clone(whole), make([]byte, 100)...))
	require.NoError(t, err)
	assert.Equal(t, r2, last)
	assert.Equal(t, len(whole), intact)
}

func TestJournalCorruptMiddleOrNoIntactRecordIsErrCorrupt(t *testing.T) {
	r1 := encodeLevels(map[int]int64{1: 1})
	r2 := encodeLevels(map[int]int64{1: 2})
	r3 := encodeLevels(map[int]int64{1: 3})
	whole := journalOf(r1, r2, r3)
	second := len(newJournal(r1))
	flip := func(at int) []byte { b := bytes.Clone(whole); b[at] ^= 0x10; return b }
	for name, b := range map[string][]byte{
		"middle payload flipped":  flip(second + recordHeader + 2),
		"middle length flipped":   flip(second),
		"middle header crc":       flip(second + 9),
		"first record torn":       whole[:second-1],
		"header only":             whole[:journalHeader],
		"first record flipped":    flip(journalHeader + recordHeader + 1),
		"bad magic":               append([]byte("XXXX"), whole[4:]...),
		"unknown version":         append([]byte(journalMagic+"\x09"), whole[journalHeader:]...),
		"garbage after a record":  append(bytes.Clone(whole[:second]), []byte("not a record at all, and long")...),
		"short garbage":           []byte("BC"),
		"zero length record":      append(bytes.Clone(whole[:second]), appendRecordHeader(0)...),
		"length beyond the limit": append(bytes.Clone(whole[:second]), appendRecordHeader(maxJournalRecord+1)...),
	} {
		_, _, _, err := decodeJournal(b)
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
}

// appendRecordHeader is a record header with a valid header checksum that
// declares n payload bytes.
func appendRecordHeader(n uint32) []byte {
	h := binary.LittleEndian.AppendUint32(nil, n)
	h = binary.LittleEndian.AppendUint32(h, 0)
	return binary.LittleEndian.AppendUint32(h, crc.Checksum(h))
}

func FuzzDecodeJournal(f *testing.F) {
	r1 := encodeLevels(map[int]int64{1: 1})
	r2 := encodeProgress(progress{levels: map[int]int64{1: 2}, timer: timerState{ingested: 9, done: timerKey{due: 1700000000000, off: 3}, index: 77, cancels: []timerKey{{1700000000001, 5}}}})
	f.Add(journalOf(r1))
	f.Add(journalOf(r1, r2))
	f.Add(journalOf(r1, r2)[:40])
	f.Add(append(journalOf(r1), make([]byte, 30)...))
	f.Add(r1)
	f.Add([]byte(journalMagic + "\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		last, intact, legacy, err := decodeJournal(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		if legacy {
			require.Equal(t, b, last)
			return
		}
		require.NotEmpty(t, last)
		require.LessOrEqual(t, intact, len(b))
		// The intact prefix reads the same, with nothing torn; so does a
		// journal compacted to its newest record.
		again, n, _, err := decodeJournal(b[:intact])
		require.NoError(t, err)
		require.Equal(t, last, again)
		require.Equal(t, intact, n)
		compacted, _, _, err := decodeJournal(newJournal(last))
		require.NoError(t, err)
		require.Equal(t, last, compacted)
	})
}

// TestJournalAppendsOneSyncPerWriteAndCompactsByReplace counts the file
// system calls: after the first write (an atomic replace), a write is one
// write and one sync, no rename; past the compaction size the journal is
// replaced by one holding only the newest record.
func TestJournalAppendsOneSyncPerWriteAndCompactsByReplace(t *testing.T) {
	ffs := &fsxtest.Faulty{}
	path := filepath.Join(t.TempDir(), "progress")
	j := &progressJournal{fs: ffs, path: path, compactAt: 2000}
	rec := func(i int) []byte { return encodeLevels(map[int]int64{1: int64(i)}) }
	require.NoError(t, j.write(rec(0)))
	assert.Equal(t, 1, ffs.Calls(fsxtest.OpRename), "the first write replaces")
	assert.Equal(t, 2, ffs.Calls(fsxtest.OpSync), "file and directory")

	syncs, renames := ffs.Calls(fsxtest.OpSync), ffs.Calls(fsxtest.OpRename)
	require.NoError(t, j.write(rec(1)))
	require.NoError(t, j.write(rec(1)), "the same record again writes nothing")
	require.NoError(t, j.write(rec(2)))
	assert.Equal(t, syncs+2, ffs.Calls(fsxtest.OpSync))
	assert.Equal(t, renames, ffs.Calls(fsxtest.OpRename))

	for i := 3; i < 200; i++ {
		require.NoError(t, j.write(rec(i)))
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.LessOrEqual(t, fi.Size(), int64(2000))
	}
	assert.Greater(t, ffs.Calls(fsxtest.OpRename), renames+2, "compacted")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	last, intact, _, err := decodeJournal(b)
	require.NoError(t, err)
	assert.Equal(t, rec(199), last)
	assert.Equal(t, len(b), intact)
	require.NoError(t, j.close())
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temp file left")
}

// TestOldFormatProgressFileIsReadAndMigratedByNew: a progress file written
// before the journal (one atomically replaced record) is loaded as it was
// and rewritten as a journal; deliveries then append to it.
func TestOldFormatProgressFileIsReadAndMigratedByNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress")
	clk := newClock()
	l := newFakeLog(clk.Now)
	s0, err := New(l, Options{Levels: "1s", Now: clk.Now})
	require.NoError(t, err)
	keys := produce(t, s0, l, "t", 1, 6)
	require.NoError(t, saveProgress(path, map[int]int64{1: 4})) // 4 delivered before the upgrade
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(old, []byte(progressMagic)))

	s, err := New(l, Options{Levels: "1s", Now: clk.Now, ProgressPath: path})
	require.NoError(t, err)
	assert.Equal(t, int64(4), s.Progress()[1])
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte(journalMagic)), "migrated")
	last, _, _, err := decodeJournal(b)
	require.NoError(t, err)
	assert.Equal(t, old, last, "the same progress record, now framed")

	d := drive(s)
	lv := s.lv[0]
	s.step(d.g, lv, &cursor{next: lv.next.Load()}, clk.Now().Add(time.Hour))
	d.end(t)
	got, err := loadProgress(path)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 6}, got)
	c := countByKey(l, "t")
	for i, k := range keys {
		assert.Equal(t, map[bool]int{true: 0, false: 1}[i < 4], c[k], "message %d", i)
	}
}

// TestATornJournalTailIsCutByNewAndTheBatchBeforeItStands: a crash in the
// middle of an append leaves a partial record; New reads the record before
// it (only the batch in flight is delivered again), cuts the tail, and the
// next writes follow an intact record.
func TestATornJournalTailIsCutByNewAndTheBatchBeforeItStands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress")
	s, l, clk := newTestScheduler(t, Options{Levels: "1s", MaxBatch: 2, ProgressPath: path})
	keys := produce(t, s, l, "t", 1, 4)
	d := drive(s)
	lv := s.lv[0]
	c := &cursor{next: 0}
	now := clk.Now().Add(time.Hour)
	s.step(d.g, lv, c, now) // batch 1: progress 2
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	s.step(d.g, lv, c, now) // batch 2: progress 4, its record appended
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(after), len(before))
	d.end(t)

	// The crash image: batch 2's record only half written.
	torn := after[:len(before)+(len(after)-len(before))/2]
	require.NoError(t, os.WriteFile(path, torn, 0o644))
	s2, err := New(l, Options{Levels: "1s", MaxBatch: 2, Now: clk.Now, ProgressPath: path})
	require.NoError(t, err)
	assert.Equal(t, int64(2), s2.Progress()[1], "the record before the torn one")
	cut, err := os.ReadFile(path)
	require.NoError(t, err)
	_, intact, _, err := decodeJournal(cut)
	require.NoError(t, err)
	assert.Equal(t, len(cut), intact, "New cut the torn tail")

	d2 := drive(s2)
	s2.step(d2.g, s2.lv[0], &cursor{next: s2.lv[0].next.Load()}, now)
	d2.end(t)
	got, err := loadProgress(path)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 4}, got)
	counts := countByKey(l, "t")
	assert.Equal(t, []int{1, 1, 2, 2}, []int{counts[keys[0]], counts[keys[1]], counts[keys[2]], counts[keys[3]]}, "only the batch in flight again")
}

// faultRun delivers 8 delayed messages and 8 timers (MaxBatch 2) with the
// nth call of op failing with ENOSPC (n 0: nothing fails), stepping the
// lanes by hand. Then either the disk is healed and the scheduler stopped
// cleanly (crash false), or the process dies with the fault still there
// (crash true); a new Scheduler over the same log and files delivers the
// rest. It returns deliveries per key, the keys, and the calls of each op.
func faultRun(t *testing.T, op fsxtest.Op, n int, crash bool) (map[string]int, []string, [4]int) {
	clk := newClock()
	l := newFakeLog(clk.Now)
	ffs := &fsxtest.Faulty{}
	path := filepath.Join(t.TempDir(), "progress")
	opts := Options{Levels: "1s", MaxBatch: 2, Now: clk.Now, ProgressPath: path, fs: ffs}
	s, err := New(l, opts)
	require.NoError(t, err)
	keys := produce(t, s, l, "t", 1, 8)
	for i := 0; i < 8; i++ {
		keys = append(keys, at(t, s, l, "t", clk.Now().Add(time.Duration(i)*time.Second)))
	}
	if n > 0 {
		ffs.Fail(op, n, fsxtest.ENOSPC)
	}
	d := drive(s)
	lv := s.lv[0]
	c := &cursor{next: lv.next.Load()}
	for i := 0; i < 12; i++ {
		now := clk.Now().Add(time.Duration(i) * time.Second)
		for j := 0; j < 3; j++ {
			s.step(d.g, lv, c, now)
		}
		d.timers(now)
	}
	calls := [4]int{ffs.Calls(fsxtest.OpOpen), ffs.Calls(fsxtest.OpWrite), ffs.Calls(fsxtest.OpSync), ffs.Calls(fsxtest.OpRename)}
	if crash {
		opts.fs = fsx.OS // the machine restarted with room on the disk
	} else {
		ffs.Heal()
		for j := 0; j < 6; j++ {
			s.step(d.g, lv, c, clk.Now().Add(time.Hour))
		}
		d.timers(clk.Now().Add(time.Hour))
		d.end(t)
		require.NoError(t, s.Close())
	}
	s2, err := New(l, opts)
	require.NoError(t, err)
	d2 := drive(s2)
	for j := 0; j < 6; j++ {
		s2.step(d2.g, s2.lv[0], &cursor{next: s2.lv[0].next.Load()}, clk.Now().Add(time.Hour))
	}
	d2.timers(clk.Now().Add(time.Hour))
	d2.end(t)
	require.NoError(t, s2.Close())
	return countByKey(l, "t"), keys, calls
}

// TestProgressJournalUnderENOSPCOnEachWriteSyncRenameAndOpen fails, in turn,
// each open, write, sync and rename a clean run makes (and every one after
// it), as a full disk does. Healed and restarted, every message and timer
// is delivered exactly once; killed with the disk still full, a restart
// repeats at most the batch in flight of each lane (MaxBatch 2 each).
func TestProgressJournalUnderENOSPCOnEachWriteSyncRenameAndOpen(t *testing.T) {
	_, _, clean := faultRun(t, 0, 0, false)
	for i, op := range []fsxtest.Op{fsxtest.OpOpen, fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpRename} {
		require.Positive(t, clean[i])
		for n := 1; n <= clean[i]; n++ {
			for _, crash := range []bool{false, true} {
				name := fmt.Sprintf("op %d call %d crash %v", op, n, crash)
				counts, keys, calls := faultRun(t, op, n, crash)
				require.GreaterOrEqual(t, calls[i], n, "%s: the fault was hit", name)
				again := 0
				for _, k := range keys {
					require.GreaterOrEqual(t, counts[k], 1, name)
					require.LessOrEqual(t, counts[k], 2, name)
					again += counts[k] - 1
				}
				if !crash {
					require.Zero(t, again, "%s: healed and stopped, then restarted: exactly once", name)
				} else {
					require.LessOrEqual(t, again, 4, "%s: at most one batch per lane again", name)
				}
			}
		}
	}
}

// shortFS makes the next Write of a file it opened write only half of its
// bytes and fail, as a disk that fills up in the middle of an append does
// (fsxtest.Faulty fails a write without writing).
type shortFS struct {
	fsx.FS
	armed bool
}

func (s *shortFS) OpenFile(name string, flag int, perm os.FileMode) (fsx.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &shortFile{File: f, fs: s}, nil
}

type shortFile struct {
	fsx.File
	fs *shortFS
}

func (f *shortFile) Write(p []byte) (int, error) {
	if !f.fs.armed {
		return f.File.Write(p)
	}
	f.fs.armed = false
	n, _ := f.File.Write(p[:len(p)/2])
	return n, fsxtest.ENOSPC
}

// TestAShortJournalWriteIsNeverFollowedByAnAppend: after an append that
// wrote part of its record and failed, the next write replaces the file
// rather than appending behind the partial record (which would read as a
// corrupt middle); a crash right after the short write reads the record
// before it.
func TestAShortJournalWriteIsNeverFollowedByAnAppend(t *testing.T) {
	sfs := &shortFS{FS: fsx.OS}
	path := filepath.Join(t.TempDir(), "progress")
	j := &progressJournal{fs: sfs, path: path}
	r := func(i int) []byte { return encodeLevels(map[int]int64{1: int64(i)}) }
	require.NoError(t, j.write(r(1)))
	require.NoError(t, j.write(r(2)))
	sfs.armed = true
	require.ErrorIs(t, j.write(r(3)), fsxtest.ENOSPC)

	crashed := &progressJournal{fs: fsx.OS, path: path}
	got, migrate, err := crashed.load()
	require.NoError(t, err)
	assert.Equal(t, r(2), got, "a crash now: the record before the partial one")
	assert.True(t, migrate, "the torn tail is cut by New")

	require.NoError(t, j.write(r(4)))
	require.NoError(t, j.write(r(5)))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	last, intact, _, err := decodeJournal(b)
	require.NoError(t, err)
	assert.Equal(t, r(5), last)
	assert.Equal(t, len(b), intact)
}

// TestAProgressFileRemovedWhileOpenIsNotWrittenIntoTheVoid: the journal is
// open for appending when its directory is removed; appends to the
// unlinked file would be lost, so the next write fails (and delivery waits)
// until the directory is back and the file is written anew.
func TestAProgressFileRemovedWhileOpenIsNotWrittenIntoTheVoid(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	require.NoError(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "progress")
	s, l, clk := newTestScheduler(t, Options{Levels: "1s", MaxBatch: 2, ProgressPath: path})
	produce(t, s, l, "t", 1, 6)
	d := drive(s)
	lv := s.lv[0]
	c := &cursor{next: 0}
	now := clk.Now().Add(time.Hour)
	s.step(d.g, lv, c, now) // the journal is open now
	require.NoError(t, os.RemoveAll(dir))
	s.step(d.g, lv, c, now) // delivered, its progress cannot be stored
	assert.Positive(t, s.Stats().SaveFailed)
	s.step(d.g, lv, c, now)
	assert.EqualValues(t, 4, s.Stats().Delivered, "nothing after the batch whose progress is not stored")
	require.NoError(t, os.Mkdir(dir, 0o755))
	for i := 0; i < 3; i++ {
		s.step(d.g, lv, c, now)
	}
	d.end(t)
	assert.EqualValues(t, 6, s.Stats().Delivered)
	got, err := loadProgress(path)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 6}, got)
}

// TestAStartAfterAStopAppendsToTheSameJournal: a Stop and a Start in the
// same process do not replace the file (a flap costs no rename); a file
// changed under the scheduler in between is replaced, not appended to.
func TestAStartAfterAStopAppendsToTheSameJournal(t *testing.T) {
	ffs := &fsxtest.Faulty{}
	path := filepath.Join(t.TempDir(), "progress")
	s, l, clk := newTestScheduler(t, Options{Levels: "1s", ProgressPath: path, fs: ffs})
	deliver := func(n int) {
		produce(t, s, l, "t", 1, n)
		require.NoError(t, s.Start())
		clk.Advance(time.Second)
		want := uint64(len(l.delivered("t")) + n)
		waitUntil(t, "delivery", func() bool { return uint64(len(l.delivered("t"))) == want })
		require.NoError(t, s.Stop())
	}
	deliver(1)
	renames := ffs.Calls(fsxtest.OpRename)
	for i := 0; i < 3; i++ {
		deliver(1)
	}
	assert.Equal(t, renames, ffs.Calls(fsxtest.OpRename), "flaps appended to the open journal")

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(b, 0xff), 0o644)) // changed under it
	deliver(1)
	assert.Equal(t, renames+1, ffs.Calls(fsxtest.OpRename), "a changed file is replaced")
	got, err := loadProgress(path)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 5}, got)
}
