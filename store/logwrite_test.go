package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/wal"
)

// The store writes its segments itself; raw tidwall/wal must read them as
// its own: every record, in order, across many rolls, under every policy.
func TestLogFilesAreWhatTidwallWalReads(t *testing.T) {
	for _, pol := range []SyncPolicy{SyncGroup, SyncInterval, SyncNone} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openT(t, dir, Options{Sync: pol, SegmentSize: 4096})
			var want []*Message
			for i := range 300 {
				batch := []*Message{msg("t", i%3, strings.Repeat("b", i%200))}
				if i%7 == 0 {
					batch = append(batch, msg("u", 0, fmt.Sprint(i)))
				}
				require.NoError(t, s.Append(batch...))
			}
			n := s.Stats().LogNext
			for off := range n {
				m, err := s.ReadAt(off)
				require.NoError(t, err)
				want = append(want, m)
			}
			require.NoError(t, s.Close())
			segs, err := listSegments(filepath.Join(dir, "log"))
			require.NoError(t, err)
			require.Greater(t, len(segs), 5, "the log rolled")

			l, err := wal.Open(filepath.Join(dir, "log"), &wal.Options{NoSync: true, AllowEmpty: true})
			require.NoError(t, err)
			defer l.Close()
			first, err := l.FirstIndex()
			require.NoError(t, err)
			last, err := l.LastIndex()
			require.NoError(t, err)
			require.Equal(t, uint64(1), first)
			require.Equal(t, uint64(n), last)
			for i := first; i <= last; i++ {
				data, err := l.Read(i)
				require.NoError(t, err)
				got, _, err := decodeRecord(data)
				require.NoError(t, err, "wal index %d", i)
				require.Equal(t, want[i-1], got, "wal index %d", i)
			}
		})
	}
}

// A segment roll that cannot create the next segment fails the store:
// the append is refused, nothing of it becomes visible, and everything
// acknowledged before reads back after a reopen.
func TestLogRollThatCannotCreateTheSegmentFailsTheStore(t *testing.T) {
	for _, pol := range []SyncPolicy{SyncGroup, SyncNone} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openT(t, dir, Options{Sync: pol, SegmentSize: 4096})
			var acked int64
			for s.Stats().Segments == 1 || acked < 10 {
				require.NoError(t, s.Append(msg("t", 0, strings.Repeat("a", 100))))
				acked++
			}
			require.NoError(t, s.Sync())
			s.mu.Lock()
			inner := s.logWrite
			s.logWrite = func(fr *frames) error {
				for _, r := range fr.rolls {
					// The name the roll creates is taken by a directory.
					require.NoError(t, os.Mkdir(filepath.Join(s.walDir, segmentName(r.start)), 0o750))
				}
				return inner(fr)
			}
			s.mu.Unlock()
			var err error
			for i := 0; err == nil && i < 10000; i++ {
				if err = s.Append(msg("t", 0, strings.Repeat("x", 100))); err == nil {
					acked++
				}
			}
			require.ErrorIs(t, err, ErrFailed)
			assert.Contains(t, err.Error(), "create segment")
			assert.True(t, s.Stats().Failed)
			require.ErrorIs(t, s.Close(), ErrFailed)

			// The directory a real failure would not leave behind.
			segs, _ := os.ReadDir(filepath.Join(dir, "log"))
			for _, e := range segs {
				if e.IsDir() {
					require.NoError(t, os.Remove(filepath.Join(dir, "log", e.Name())))
				}
			}
			s2 := openT(t, dir, Options{Sync: pol, SegmentSize: 4096})
			defer s2.Close()
			require.GreaterOrEqual(t, s2.MaxOffset("t", 0), acked, "every acknowledged append is there")
			got, err := s2.Read("t", 0, 0, int(acked))
			require.NoError(t, err)
			require.Len(t, got, int(acked))
		})
	}
}

// The writer itself: a roll whose segment cannot be created leaves no tail
// open, and every later write says so instead of writing anywhere.
func TestLogWriterWithoutATailRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	tail := &segment{start: 1, path: filepath.Join(dir, segmentName(1))}
	require.NoError(t, os.WriteFile(tail.path, nil, 0o640))
	w, err := openLogWriter(dir, tail)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(dir, segmentName(2)), 0o750))
	fr := &frames{buf: appendFrame(appendFrame(nil, []byte("one")), []byte("two"))}
	fr.rolls = []roll{{start: 2, at: 4}}
	err = w.write(fr)
	require.Error(t, err)
	var errno syscall.Errno
	assert.ErrorAs(t, err, &errno)
	require.ErrorContains(t, w.write(&frames{buf: appendFrame(nil, []byte("three"))}), "no tail segment open")
	data, err := os.ReadFile(tail.path)
	require.NoError(t, err)
	assert.Equal(t, appendFrame(nil, []byte("one")), data, "the finished segment holds what came before the roll")
	require.NoError(t, w.close())
}

// Retention removes the dropped segments' files and leaves the kept ones
// as they are: the first kept segment is not rewritten.
func TestRetentionRemovesSegmentsWithoutRewritingTheFirstKept(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 4096, MaxBytes: 3 * 4096, RetainEvery: -1})
	defer s.Close()
	for s.Stats().Segments < 8 {
		require.NoError(t, s.Append(msg("t", 0, strings.Repeat("r", 200))))
	}
	s.mu.RLock()
	before := map[string]os.FileInfo{}
	for _, sg := range s.segs {
		fi, err := os.Stat(sg.path)
		require.NoError(t, err)
		before[sg.path] = fi
	}
	s.mu.RUnlock()
	n, err := s.Retain()
	require.NoError(t, err)
	require.Positive(t, n)
	s.mu.RLock()
	kept := s.segs
	s.mu.RUnlock()
	for _, sg := range kept {
		fi, err := os.Stat(sg.path)
		require.NoError(t, err)
		assert.True(t, os.SameFile(before[sg.path], fi), "%s is the same file", sg.path)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "log"))
	require.NoError(t, err)
	assert.Len(t, ents, len(kept), "no dropped segment's file is left")
	got, err := s.Read("t", 0, s.MinOffset("t", 0), 1000)
	require.NoError(t, err)
	assert.Equal(t, s.MaxOffset("t", 0)-s.MinOffset("t", 0), int64(len(got)))
}
