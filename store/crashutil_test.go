package store

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// crash stops s the way a killed process stops: no final fsync by the store,
// no checkpoint. It returns the durable point: the log bytes before
// (segment path, position) hold every record acknowledged as synced.
func crash(t helperT, s *Store) (string, int64) {
	t.Helper()
	// Wait out an fsync or checkpoint in flight: what it made durable is
	// durable (a crash after it cannot lose it).
	s.ckptMu.Lock()
	s.ioMu.Lock()
	s.mu.Lock()
	s.closed, s.filesClosed = true, true
	var seg *segment
	pos := s.tailSize
	seg = s.segs[len(s.segs)-1]
	if s.durable < s.written {
		e, err := s.lidx.get(s.durable)
		require.NoError(t, err)
		idx := uint64(e.logOffset) + 1
		i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].start > idx }) - 1
		seg, pos = s.segs[i], e.pos-int64(uvarintLen(uint64(e.size)))
	}
	path := seg.path
	s.mu.Unlock()
	s.ioMu.Unlock()
	s.ckptMu.Unlock()
	close(s.stop)
	s.wg.Wait()
	s.mu.Lock()
	s.closeFiles()
	s.mu.Unlock()
	return path, pos
}

// chop cuts the log at a point at or after (durSeg, durPos) chosen by pick,
// which gets the number of candidate bytes and returns how many to keep.
func chop(t helperT, dir, durSeg string, durPos int64, pick func(n int64) int64) int64 {
	t.Helper()
	segs, err := listSegments(filepath.Join(dir, "log"))
	require.NoError(t, err)
	var after []*segment
	for _, sg := range segs {
		if sg.path >= durSeg {
			after = append(after, sg)
		}
	}
	require.NotEmpty(t, after)
	total := after[0].size - durPos
	for _, sg := range after[1:] {
		total += sg.size
	}
	keep := pick(total)
	// Walk to the segment the cut falls in.
	rest := keep
	for i, sg := range after {
		start := int64(0)
		if i == 0 {
			start = durPos
		}
		if rest <= sg.size-start || i == len(after)-1 {
			require.NoError(t, os.Truncate(sg.path, start+min(rest, sg.size-start)))
			for _, later := range after[i+1:] {
				require.NoError(t, os.Remove(later.path))
			}
			break
		}
		rest -= sg.size - start
	}
	return total - keep
}

// helperT is what the helpers need from *testing.T and *rapid.T alike.
type helperT interface {
	require.TestingT
	Helper()
}

// tailSegment returns the path of the last segment file.
func tailSegment(t testing.TB, dir string) string {
	t.Helper()
	segs, err := listSegments(filepath.Join(dir, "log"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	return segs[len(segs)-1].path
}
