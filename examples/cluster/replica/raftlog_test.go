package replica

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
	"github.com/brokercore/brokercore/examples/cluster/internal/fsx/fsxtest"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

func openTestLog(t testing.TB, dir string, o logStoreOptions) *logStore {
	t.Helper()
	s, err := openLogStore(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func reopenLog(t testing.TB, s *logStore, o logStoreOptions) *logStore {
	t.Helper()
	require.NoError(t, s.Close())
	return openTestLog(t, s.dir, o)
}

// testEntry is entry i of term term, with data and extensions that vary
// in length (empty ones included).
func testEntry(i, term uint64) *raft.Log {
	l := &raft.Log{Index: i, Term: term, Type: raft.LogType(i % 4),
		AppendedAt: time.Unix(1_700_000_000, int64(i*1000))}
	if i%5 != 0 {
		l.Data = bytes.Repeat([]byte{byte(i)}, int(i%37)*3)
	}
	if i%3 == 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d", i))
	}
	return l
}

func entries(from, to, term uint64) []*raft.Log {
	var ls []*raft.Log
	for i := from; i <= to; i++ {
		ls = append(ls, testEntry(i, term))
	}
	return ls
}

// checker is what the assertions need of a *testing.T or a *rapid.T.
type checker interface {
	require.TestingT
	Helper()
}

func requireEntry(t checker, s raft.LogStore, want *raft.Log) {
	t.Helper()
	var got raft.Log
	require.NoError(t, s.GetLog(want.Index, &got), "entry %d", want.Index)
	require.Equal(t, want.Index, got.Index)
	require.Equal(t, want.Term, got.Term, "entry %d", want.Index)
	require.Equal(t, want.Type, got.Type)
	require.Equal(t, len(want.Data), len(got.Data))
	require.True(t, bytes.Equal(want.Data, got.Data))
	require.True(t, bytes.Equal(want.Extensions, got.Extensions))
	require.True(t, want.AppendedAt.Equal(got.AppendedAt))
}

func requireRange(t testing.TB, s raft.LogStore, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	require.NoError(t, err)
	l, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, first, f, "first index")
	require.Equal(t, last, l, "last index")
	var e raft.Log
	if first > 0 {
		require.ErrorIs(t, s.GetLog(first-1, &e), raft.ErrLogNotFound)
	}
	require.ErrorIs(t, s.GetLog(last+1, &e), raft.ErrLogNotFound)
}

func TestLogStoreStoresAndReadsEntries(t *testing.T) {
	cases := []struct {
		name    string
		batches [][2]uint64
		segment int64
	}{
		{"one entry", [][2]uint64{{1, 1}}, 0},
		{"batches in one segment", [][2]uint64{{1, 1}, {2, 10}, {11, 11}, {12, 40}}, 0},
		{"batches over many segments", [][2]uint64{{1, 1}, {2, 10}, {11, 11}, {12, 40}, {41, 41}, {42, 42}}, 300},
		{"a log that starts late (after a snapshot)", [][2]uint64{{500, 510}, {511, 600}}, 1000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := logStoreOptions{SegmentBytes: c.segment}
			s := openTestLog(t, t.TempDir(), o)
			requireRange(t, s, 0, 0)
			var e raft.Log
			require.ErrorIs(t, s.GetLog(1, &e), raft.ErrLogNotFound)
			for _, b := range c.batches {
				if b[0] == b[1] {
					require.NoError(t, s.StoreLog(testEntry(b[0], 1)))
				} else {
					require.NoError(t, s.StoreLogs(entries(b[0], b[1], 1)))
				}
			}
			first, last := c.batches[0][0], c.batches[len(c.batches)-1][1]
			check := func(s *logStore) {
				requireRange(t, s, first, last)
				for i := first; i <= last; i++ {
					requireEntry(t, s, testEntry(i, 1))
				}
			}
			check(s)
			check(reopenLog(t, s, o))
		})
	}
}

func TestLogStoreRefusesGapsAndOverlapsAndStaysUsable(t *testing.T) {
	s := openTestLog(t, t.TempDir(), logStoreOptions{})
	require.NoError(t, s.StoreLogs(entries(1, 5, 1)))
	for name, batch := range map[string][]*raft.Log{
		"gap":             entries(7, 8, 1),
		"overlap":         entries(5, 6, 1),
		"not contiguous":  {testEntry(6, 1), testEntry(8, 1)},
		"going backwards": {testEntry(6, 1), testEntry(5, 1)},
	} {
		require.ErrorIs(t, s.StoreLogs(batch), ErrInvalid, name)
	}
	require.ErrorIs(t, s.DeleteRange(2, 3), ErrInvalid, "from the middle")
	requireRange(t, s, 1, 5)
	require.NoError(t, s.StoreLogs(entries(6, 7, 1)))
	requireRange(t, reopenLog(t, s, logStoreOptions{}), 1, 7)
}

func segCount(t testing.TB, dir string) int {
	t.Helper()
	f, err := segmentFiles(dir)
	require.NoError(t, err)
	return len(f)
}

func TestLogStoreDeletesAPrefix(t *testing.T) {
	o := logStoreOptions{SegmentBytes: 400}
	for _, max := range []uint64{1, 17, 50, 99} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			dir := t.TempDir()
			s := openTestLog(t, dir, o)
			for i := uint64(1); i <= 100; i += 10 {
				require.NoError(t, s.StoreLogs(entries(i, i+9, 1)))
			}
			before := segCount(t, dir)
			require.NoError(t, s.DeleteRange(1, max))
			requireRange(t, s, max+1, 100)
			require.LessOrEqual(t, segCount(t, dir), before)
			if max >= 50 {
				require.Less(t, segCount(t, dir), before, "whole segments are removed")
			}
			for range 2 {
				requireRange(t, s, max+1, 100)
				for i := max + 1; i <= 100; i++ {
					requireEntry(t, s, testEntry(i, 1))
				}
				s = reopenLog(t, s, o)
			}
		})
	}
}

func TestLogStoreDeletedSuffixStaysDeletedAfterReopen(t *testing.T) {
	cases := []struct {
		name string
		min  uint64
	}{
		{"the last entry", 100},
		{"inside the last batch", 95},
		{"at a batch boundary", 91},
		{"back across segments", 23},
		{"all but the first", 2},
	}
	o := logStoreOptions{SegmentBytes: 400}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openTestLog(t, t.TempDir(), o)
			for i := uint64(1); i <= 100; i += 10 {
				require.NoError(t, s.StoreLogs(entries(i, i+9, 1)))
			}
			require.NoError(t, s.DeleteRange(c.min, 100))
			requireRange(t, s, 1, c.min-1)
			s = reopenLog(t, s, o)
			requireRange(t, s, 1, c.min-1)
			for i := uint64(1); i < c.min; i++ {
				requireEntry(t, s, testEntry(i, 1))
			}
			// A new leader's entries replace the deleted ones.
			require.NoError(t, s.StoreLogs(entries(c.min, c.min+20, 2)))
			s = reopenLog(t, s, o)
			requireRange(t, s, 1, c.min+20)
			for i := uint64(1); i <= c.min+20; i++ {
				term := uint64(1)
				if i >= c.min {
					term = 2
				}
				requireEntry(t, s, testEntry(i, term))
			}
		})
	}
}

func TestLogStoreDeletesEverythingAndStartsAgainAnywhere(t *testing.T) {
	for _, next := range []uint64{1, 31, 5000} { // a conflict at the first entry; after a snapshot
		t.Run(fmt.Sprint(next), func(t *testing.T) {
			o := logStoreOptions{SegmentBytes: 400}
			s := openTestLog(t, t.TempDir(), o)
			require.NoError(t, s.StoreLogs(entries(1, 30, 1)))
			require.NoError(t, s.DeleteRange(10, 30))
			require.NoError(t, s.DeleteRange(1, 9))
			require.NoError(t, s.StoreLogs(entries(31, 40, 1)))
			require.NoError(t, s.DeleteRange(31, 40))
			requireRange(t, s, 0, 0)
			requireRange(t, reopenLog(t, s, o), 0, 0)
			s = reopenLog(t, s, o)
			require.NoError(t, s.StoreLogs(entries(next, next+5, 3)))
			s = reopenLog(t, s, o)
			requireRange(t, s, next, next+5)
			requireEntry(t, s, testEntry(next, 3))
		})
	}
}

// lastSegment returns the path of dir's last segment.
func lastSegment(t testing.TB, dir string) string {
	t.Helper()
	f, err := segmentFiles(dir)
	require.NoError(t, err)
	require.NotEmpty(t, f)
	return filepath.Join(dir, segmentName(f[len(f)-1]))
}

func copyDir(t testing.TB, from string) string {
	t.Helper()
	to := t.TempDir()
	des, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(from, de.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, de.Name()), b, 0o644))
	}
	return to
}

// A crash during the last StoreLogs leaves any prefix of its bytes, maybe
// followed by zeros or garbage where the file grew: the log opens with the
// batches before it and at most a prefix of that one, intact, and takes
// new entries after it.
func TestLogStoreCutsATornLastBatchAtEveryByte(t *testing.T) {
	dir := t.TempDir()
	// Thousands of opens: no fsyncs (durability is not what this checks),
	// a little preallocation past the frames.
	o := logStoreOptions{FS: noSyncFS{fsx.OS}, PreallocBytes: 512}
	s := openTestLog(t, dir, o)
	require.NoError(t, s.StoreLogs(entries(1, 10, 1)))
	require.NoError(t, s.StoreLogs(entries(11, 14, 1)))
	require.NoError(t, s.Close())
	seg := lastSegment(t, dir)
	full, err := os.ReadFile(seg)
	require.NoError(t, err)
	s2 := openTestLog(t, copyDir(t, dir), o)
	start := s2.locs[10].off // where the last batch begins
	full = full[:s2.tail().size]
	require.NoError(t, s2.Close())

	for cut := start; cut < int64(len(full)); cut++ {
		for _, fill := range []string{"cut", "zeros", "garbage"} {
			d := copyDir(t, dir)
			b := slices.Clone(full[:cut])
			switch fill {
			case "zeros": // or preallocated space
				b = append(b, make([]byte, int64(len(full))-cut+1000)...)
			case "garbage": // then preallocated zeros
				for i := cut; i < int64(len(full)); i++ {
					b = append(b, byte(i*7+3))
				}
				b = append(b, make([]byte, 1000)...)
			}
			require.NoError(t, os.WriteFile(lastSegment(t, d), b, 0o644))
			s, err := openLogStore(d, o)
			require.NoError(t, err, "cut at %d (%s)", cut, fill)
			last, _ := s.LastIndex()
			require.GreaterOrEqual(t, last, uint64(10), "cut at %d", cut)
			require.Less(t, last, uint64(14), "cut at %d", cut)
			for i := uint64(1); i <= last; i++ {
				requireEntry(t, s, testEntry(i, 1))
			}
			require.NoError(t, s.StoreLogs(entries(last+1, last+2, 2)))
			require.NoError(t, s.Close())
			s, err = openLogStore(d, o)
			require.NoError(t, err)
			requireRange(t, s, 1, last+2)
			requireEntry(t, s, testEntry(last+2, 2))
			require.NoError(t, s.Close())
		}
	}
}

// Damage in a batch that an intact later batch follows is not a torn
// write (the later batch was written after the damaged one was fsynced):
// the log refuses to open rather than drop acknowledged entries.
func TestLogStoreRefusesAFlippedBitBeforeTheLastBatch(t *testing.T) {
	for _, segBytes := range []int64{0, 500} {
		t.Run(fmt.Sprintf("segment=%d", segBytes), func(t *testing.T) {
			dir := t.TempDir()
			o := logStoreOptions{SegmentBytes: segBytes, FS: noSyncFS{fsx.OS}, PreallocBytes: 512}
			s := openTestLog(t, dir, o)
			for i := uint64(1); i <= 50; i += 5 {
				require.NoError(t, s.StoreLogs(entries(i, i+4, 1)))
			}
			mid := s.locs[22] // inside the fifth batch
			rel, err := filepath.Rel(dir, mid.seg.path)
			require.NoError(t, err)
			require.NoError(t, s.Close())
			orig, err := os.ReadFile(mid.seg.path)
			require.NoError(t, err)
			for off := mid.off; off < mid.off+mid.n; off++ {
				for _, bit := range []byte{0x01, 0x80} {
					d := copyDir(t, dir)
					b := slices.Clone(orig)
					b[off] ^= bit
					require.NoError(t, os.WriteFile(filepath.Join(d, rel), b, 0o644))
					_, err := openLogStore(d, o)
					require.ErrorIs(t, err, ErrLogCorrupt, "bit %#x of byte %d", bit, off)
				}
			}
		})
	}
}

// Segments are extended with zeros ahead of their frames; the zeros are
// free space on reopen, not damage, and appends go on over them.
func TestLogStorePreallocatedSpaceIsReusedAfterReopen(t *testing.T) {
	dir := t.TempDir()
	o := logStoreOptions{PreallocBytes: 4096, SegmentBytes: 1 << 20}
	s := openTestLog(t, dir, o)
	require.NoError(t, s.StoreLogs(entries(1, 5, 1)))
	st, err := os.Stat(lastSegment(t, dir))
	require.NoError(t, err)
	require.Greater(t, st.Size(), s.tail().size, "zeros ahead of the frames")
	for i := uint64(6); i <= 60; i += 5 {
		s = reopenLog(t, s, o)
		requireRange(t, s, 1, i-1)
		require.NoError(t, s.StoreLogs(entries(i, i+4, 1)))
	}
	s = reopenLog(t, s, o)
	for i := uint64(1); i <= 60; i++ {
		requireEntry(t, s, testEntry(i, 1))
	}
	require.Equal(t, 1, segCount(t, dir))
}

func TestLogStoreRefusesAForeignSegmentName(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "12.seg"), nil, 0o644))
	_, err := openLogStore(dir, logStoreOptions{})
	require.ErrorIs(t, err, ErrLogCorrupt)
}

func TestLogStoreRefusesASegmentThatDoesNotStartAtItsName(t *testing.T) {
	dir := t.TempDir()
	s := openTestLog(t, dir, logStoreOptions{})
	require.NoError(t, s.StoreLogs(entries(1, 3, 1)))
	require.NoError(t, s.Close())
	require.NoError(t, os.Rename(filepath.Join(dir, segmentName(1)), filepath.Join(dir, segmentName(2))))
	_, err := openLogStore(dir, logStoreOptions{})
	require.ErrorIs(t, err, ErrLogCorrupt)
}

// A full disk (or any failed write, fsync, create, rename or remove) fails
// the log: it answers ErrLogFailed from then on, and opened again it holds
// every entry it acknowledged, followed by at most a prefix of the batch
// that failed.
func TestLogStoreFaultsFailTheLogAndLoseNothingAcknowledged(t *testing.T) {
	ops := map[string]fsxtest.Op{"write": fsxtest.OpWrite, "fsync": fsxtest.OpSync, "open": fsxtest.OpOpen, "rename": fsxtest.OpRename, "remove": fsxtest.OpRemove}
	for name, op := range ops {
		for nth := 1; nth <= 6; nth++ {
			t.Run(fmt.Sprintf("%s/%d", name, nth), func(t *testing.T) {
				dir := t.TempDir()
				ff := &fsxtest.Faulty{}
				s, err := openLogStore(dir, logStoreOptions{FS: ff, SegmentBytes: 300})
				require.NoError(t, err)
				ff.Fail(op, nth, fsxtest.ENOSPC)
				// [first, acked] is acknowledged; a failed delete may
				// have deleted what it was asked to.
				var first, acked uint64 = 1, 0
				mustFirst, mustLast := first, acked
				var err2 error
				for step := 0; step < 60 && err2 == nil; step++ {
					switch {
					case step%6 == 5 && acked-first > 8: // compaction
						if err2 = s.DeleteRange(first, first+4); err2 == nil {
							first += 5
						}
						mustFirst = first + 5
					case step%10 == 7: // a conflicting suffix replaced
						if err2 = s.DeleteRange(acked-2, acked); err2 == nil {
							acked -= 3
						}
						mustLast = acked - 3
					default:
						err2 = s.StoreLogs(entries(acked+1, acked+4, 1))
						if err2 == nil {
							acked += 4
						}
					}
					if err2 == nil {
						mustFirst, mustLast = first, acked
					}
				}
				if err2 == nil {
					t.Skipf("%s call %d never made", name, nth)
				}
				require.ErrorIs(t, err2, ErrLogFailed)
				require.ErrorIs(t, err2, fsxtest.ENOSPC)
				require.ErrorIs(t, s.StoreLogs(entries(acked+1, acked+1, 1)), ErrLogFailed)
				require.ErrorIs(t, s.DeleteRange(acked, acked), ErrLogFailed)
				require.NoError(t, s.Close())

				s, err = openLogStore(dir, logStoreOptions{SegmentBytes: 300})
				require.NoError(t, err)
				defer s.Close()
				f, _ := s.FirstIndex()
				l, _ := s.LastIndex()
				require.LessOrEqual(t, f, mustFirst, "nothing acknowledged is lost")
				require.GreaterOrEqual(t, l, mustLast, "nothing acknowledged is lost")
				require.LessOrEqual(t, l, acked+4, "at most the failed batch more")
				for i := f; i <= l && l > 0; i++ {
					requireEntry(t, s, testEntry(i, 1))
				}
			})
		}
	}
}

// A suffix deletion is durable when it returns: it truncates and syncs
// the segment holding the new end, and removes later segments with a sync
// of the directory; a failed sync is answered, never swallowed.
func TestLogStoreSuffixDeletionSyncsBeforeItReturns(t *testing.T) {
	for _, c := range []struct {
		name       string
		min        uint64
		truncates  bool
		removesAny bool
	}{
		{"inside the last segment", 38, true, false},
		{"back across segments", 5, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ff := &fsxtest.Faulty{}
			s := openTestLog(t, t.TempDir(), logStoreOptions{FS: ff, SegmentBytes: 400, PreallocBytes: -1})
			for i := uint64(1); i <= 40; i += 5 {
				require.NoError(t, s.StoreLogs(entries(i, i+4, 1)))
			}
			syncs, truncs, removes := ff.Calls(fsxtest.OpSync), ff.Calls(fsxtest.OpTruncate), ff.Calls(fsxtest.OpRemove)
			require.NoError(t, s.DeleteRange(c.min, 40))
			require.Greater(t, ff.Calls(fsxtest.OpSync), syncs, "synced before returning")
			require.Equal(t, c.truncates, ff.Calls(fsxtest.OpTruncate) > truncs)
			require.Equal(t, c.removesAny, ff.Calls(fsxtest.OpRemove) > removes)

			require.NoError(t, s.StoreLogs(entries(c.min, 45, 2)))
			ff.Fail(fsxtest.OpSync, 1, fsxtest.ENOSPC)
			require.ErrorIs(t, s.DeleteRange(c.min, 45), ErrLogFailed)
		})
	}
}
