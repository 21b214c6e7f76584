package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crashImage copies dir while the store in it is still open: what a crash
// at this moment leaves on disk (the page cache included).
func crashImage(t *testing.T, dir string) string {
	t.Helper()
	img := t.TempDir()
	require.NoError(t, testkit.CopyCrashImage(dir, img))
	return img
}

// frames returns the wal entries of a segment file.
func framesOf(t *testing.T, path string) ([]byte, []frame) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	fr, end := parseFrames(data, 0)
	require.Equal(t, len(data), end)
	return data, fr
}

func appendN(t *testing.T, s *Store, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		require.NoError(t, s.Append(msg(topic, 0, strings.Repeat("b", 20)+string(rune('a'+i%26)))))
	}
}

// Finding 1: ten acknowledged appends, a crash image, one bit flipped in the
// body of record 3 of the tail segment. Open cut 7 acknowledged records as
// an "unsynced" torn tail; it must refuse with ErrCorrupt naming where.
func TestFlippedBitInACrashImageTailIsCorruptionNotATornTail(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{}) // SyncGroup: every Append returned after its fsync
	appendN(t, s, "t", 10)
	img := crashImage(t, dir)
	require.NoError(t, s.Close())

	seg := tailSegment(t, img)
	data, frames := framesOf(t, seg)
	require.Len(t, frames, 10)
	data[frames[3].pos+int64(frames[3].size)-1] ^= 0x10 // the body of record 3
	require.NoError(t, os.WriteFile(seg, data, 0o640))

	_, err := Open(img, Options{})
	require.ErrorIs(t, err, ErrCorrupt)
	var ce *CorruptError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, seg, ce.Segment)
	assert.Equal(t, frames[3].pos-1, ce.Position, "the first bad byte: record 3's wal entry")
	assert.Equal(t, int64(3), ce.From)
	assert.Equal(t, int64(10), ce.To, "records 3 to 9 are affected by a cut there")
	assert.Contains(t, ce.Reason, "Repair replaces only this record")
	assert.Contains(t, err.Error(), filepath.Base(seg))
	assert.Contains(t, err.Error(), "position")

	// Nothing was cut: Open refuses again, the same way.
	_, err2 := Open(img, Options{})
	require.ErrorIs(t, err2, ErrCorrupt)
	assert.Equal(t, err.Error(), err2.Error())
}

func TestRepairReplacesADamagedRecordInsideIntactFramingWithATombstone(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	appendN(t, s, "t", 10)
	img := crashImage(t, dir)
	require.NoError(t, s.Close())
	seg := tailSegment(t, img)
	data, frames := framesOf(t, seg)
	data[frames[3].pos+int64(frames[3].size)-1] ^= 0x10
	require.NoError(t, os.WriteFile(seg, data, 0o640))
	at := frames[3].pos - 1

	var logs logBuffer
	rep, err := Repair(img, RepairOptions{Logger: logs.logger()})
	require.NoError(t, err)
	require.Len(t, rep.Cuts, 1)
	c := rep.Cuts[0]
	assert.Equal(t, seg, c.Segment)
	assert.Equal(t, at, c.Position)
	assert.Equal(t, int64(3), c.From)
	assert.Equal(t, int64(4), c.To)
	assert.Equal(t, int64(1), rep.Lost)
	q, err := os.ReadFile(c.Quarantine)
	require.NoError(t, err)
	assert.Equal(t, data[at:frames[4].pos-1], q, "the quarantine file holds exactly the damaged entry")
	after, err := os.ReadFile(seg)
	require.NoError(t, err)
	assert.Len(t, after, len(data), "the tombstone takes the damaged entry's place")

	s = openT(t, img, Options{})
	defer s.Close()
	assert.Equal(t, int64(10), s.MaxOffset("t", 0))
	got := readAll(t, s, "t", 0)
	assert.Len(t, got, 9, "every record but the damaged one")
	_, err = s.ReadAt(3)
	assert.ErrorIs(t, err, ErrCorrupt)
	m := msg("t", 0, "after")
	require.NoError(t, s.Append(m))
	assert.Equal(t, int64(10), m.LogOffset)
	assert.Equal(t, int64(10), m.QueueOffset)
}

func TestRepairCutsWhereTheFramingIsGoneQuarantinesTheBytesAndReportsTheLoss(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	appendN(t, s, "t", 10)
	img := crashImage(t, dir)
	require.NoError(t, s.Close())
	seg := tailSegment(t, img)
	data, frames := framesOf(t, seg)
	cutAt := frames[3].pos - 1
	data[cutAt]++ // record 3's length prefix: the entries after it no longer line up
	require.NoError(t, os.WriteFile(seg, data, 0o640))

	var logs logBuffer
	rep, err := Repair(img, RepairOptions{Logger: logs.logger()})
	require.NoError(t, err)
	require.Len(t, rep.Cuts, 1)
	c := rep.Cuts[0]
	assert.Equal(t, seg, c.Segment)
	assert.Equal(t, cutAt, c.Position)
	assert.Equal(t, int64(3), c.From)
	assert.Equal(t, int64(10), c.To)
	assert.Equal(t, int64(7), rep.Lost)
	assert.Equal(t, int64(len(data))-cutAt, c.Bytes)
	q, err := os.ReadFile(c.Quarantine)
	require.NoError(t, err)
	assert.Equal(t, data[cutAt:], q, "the quarantine file holds exactly the bytes cut")
	assert.Contains(t, logs.String(), "repair cut the log")

	s = openT(t, img, Options{})
	defer s.Close()
	assert.Len(t, readAll(t, s, "t", 0), 3)
	m := msg("t", 0, "after")
	require.NoError(t, s.Append(m))
	assert.Equal(t, int64(10), m.LogOffset, "the cut offsets are never handed out again")
	assert.Equal(t, int64(10), m.QueueOffset)

	again, err := Repair(t.TempDir(), RepairOptions{})
	require.NoError(t, err)
	assert.Empty(t, again.Cuts, "a healthy (here: empty) store needs no repair")
}

// Finding 3: gaps were found only by readers.
func TestMissingOrShortSegmentsAreCorruptionAtOpen(t *testing.T) {
	build := func(t *testing.T) (string, []*segment) {
		dir := t.TempDir()
		s := openT(t, dir, Options{SegmentSize: 400})
		appendN(t, s, "t", 40)
		require.NoError(t, s.Close())
		segs, err := listSegments(filepath.Join(dir, "log"))
		require.NoError(t, err)
		require.Greater(t, len(segs), 4)
		return dir, segs
	}
	for name, damage := range map[string]func(segs []*segment){
		"missing first segment":  func(segs []*segment) { os.Remove(segs[0].path) },
		"missing middle segment": func(segs []*segment) { os.Remove(segs[2].path) },
		"short older segment":    func(segs []*segment) { os.Truncate(segs[1].path, segs[1].size-10) },
		"older segment emptied":  func(segs []*segment) { os.Truncate(segs[1].path, 0) },
		"tail deleted after a clean Close": func(segs []*segment) {
			i := len(segs) - 1
			for segs[i].size == 0 {
				i--
			}
			for _, sg := range segs[i:] {
				os.Remove(sg.path)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, segs := build(t)
			damage(segs)
			_, err := Open(dir, Options{})
			require.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Less(t, ce.From, int64(40))
			t.Log(err)

			rep, err := Repair(dir, RepairOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Cuts)
			assert.Positive(t, rep.Lost)
			s := openT(t, dir, Options{})
			defer s.Close()
			got, err := s.Read("t", 0, s.MinOffset("t", 0), MaxReadBatch)
			require.NoError(t, err)
			assert.Equal(t, int(40-rep.Lost), len(got), "what is left reads back")
			m := msg("t", 0, "after")
			require.NoError(t, s.Append(m))
			assert.Equal(t, int64(40), m.QueueOffset, "lost offsets are never handed out again")
			assert.Equal(t, int64(40), m.LogOffset)
		})
	}
}

func TestRetentionRemovedFrontSegmentsAreNotGaps(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentSize: 400, MaxBytes: 1200, RetainEvery: -1}
	s := openT(t, dir, o)
	appendN(t, s, "t", 40)
	n, err := s.Retain()
	require.NoError(t, err)
	require.Positive(t, n)
	min := s.MinOffset("t", 0)
	require.NoError(t, s.Close())
	s = openT(t, dir, o)
	defer s.Close()
	assert.Equal(t, min, s.MinOffset("t", 0))
	assert.Equal(t, int64(40), s.MaxOffset("t", 0))
}
