package replica

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The log against a model (a first index and a slice of terms) across
// appends, compactions, suffix replacements, deleting everything and
// reopening, with segments small enough that every operation crosses
// segment boundaries; appends are made as a leader (sync deferred) or a
// follower, and waiting for the last entry to be durable always ends.
func TestLogStoreMatchesAModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(t.TempDir(), "model")
		require.NoError(rt, err)
		o := logStoreOptions{SegmentBytes: rapid.Int64Range(64, 2048).Draw(rt, "segment"),
			PreallocBytes: rapid.Int64Range(-1, 1024).Draw(rt, "prealloc")}
		var leading atomic.Bool
		s, err := openLogStore(dir, o)
		require.NoError(rt, err)
		s.deferSyncWhile(leading.Load)
		defer func() { _ = s.Close() }()
		var first uint64 // model: entries first..first+len(terms)-1
		var terms []uint64
		term := uint64(1)
		last := func() uint64 { return first + uint64(len(terms)) - 1 }

		check := func() {
			f, err := s.FirstIndex()
			require.NoError(rt, err)
			l, err := s.LastIndex()
			require.NoError(rt, err)
			if len(terms) == 0 {
				require.Zero(rt, f)
				require.Zero(rt, l)
				return
			}
			require.Equal(rt, first, f)
			require.Equal(rt, last(), l)
			require.LessOrEqual(rt, s.durableIndex(), last(), "durable only what was written")
			for i, tm := range terms {
				requireEntry(rt, s, testEntry(first+uint64(i), tm))
			}
			var e raft.Log
			require.ErrorIs(rt, s.GetLog(first-1, &e), raft.ErrLogNotFound)
			require.ErrorIs(rt, s.GetLog(last()+1, &e), raft.ErrLogNotFound)
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 12).Draw(rt, "n")
				next := last() + 1
				if len(terms) == 0 {
					next = rapid.Uint64Range(1, 50).Draw(rt, "start")
					first = next
				}
				require.NoError(rt, s.StoreLogs(entries(next, next+uint64(n)-1, term)))
				for range n {
					terms = append(terms, term)
				}
			},
			"compact": func(rt *rapid.T) {
				if len(terms) < 2 {
					rt.Skip("short")
				}
				k := rapid.IntRange(1, len(terms)-1).Draw(rt, "k")
				require.NoError(rt, s.DeleteRange(first, first+uint64(k)-1))
				first += uint64(k)
				terms = terms[k:]
			},
			"replace suffix": func(rt *rapid.T) {
				if len(terms) < 2 {
					rt.Skip("short")
				}
				k := rapid.IntRange(1, len(terms)-1).Draw(rt, "keep")
				require.NoError(rt, s.DeleteRange(first+uint64(k), last()))
				terms = terms[:k]
				term++
			},
			"delete all": func(rt *rapid.T) {
				if len(terms) == 0 {
					rt.Skip("empty")
				}
				require.NoError(rt, s.DeleteRange(first, last()))
				terms = nil
				term++
			},
			"reopen": func(rt *rapid.T) {
				require.NoError(rt, s.Close())
				s, err = openLogStore(dir, o)
				require.NoError(rt, err)
				s.deferSyncWhile(leading.Load)
			},
			"lead or follow": func(rt *rapid.T) {
				leading.Store(rapid.Bool().Draw(rt, "leading"))
			},
			"wait durable": func(rt *rapid.T) {
				if len(terms) == 0 {
					rt.Skip("empty")
				}
				require.NoError(rt, s.waitDurable(last()))
				require.Equal(rt, last(), s.durableIndex())
			},
			"": func(rt *rapid.T) { check() },
		})
		check()
	})
}

// Whatever bytes a segment holds, opening the log refuses them with
// ErrLogCorrupt or opens a log whose every entry reads back; it never
// panics.
func FuzzLogSegment(f *testing.F) {
	var seed []byte
	var batch int64
	for i, l := range entries(1, 6, 1) {
		if i%2 == 0 {
			batch = int64(len(seed)) // batches of two entries
		}
		seed = appendFrame(seed, l, batch)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte{})
	f.Add(append(seed, make([]byte, 40)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, segmentName(1)), b, 0o644))
		s, err := openLogStore(dir, logStoreOptions{FS: noSyncFS{fsx.OS}})
		if err != nil {
			require.ErrorIs(t, err, ErrLogCorrupt)
			return
		}
		defer s.Close()
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		for i := first; i <= last && last > 0; i++ {
			var e raft.Log
			require.NoError(t, s.GetLog(i, &e))
		}
		require.NoError(t, s.StoreLogs(entries(last+1, last+2, 9)))
	})
}

// noSyncFS skips fsyncs: the fuzz target runs thousands of opens, and
// durability is not what it checks.
type noSyncFS struct{ fsx.FS }

type noSyncFile struct{ fsx.File }

func (f noSyncFile) Sync() error { return nil }

func (fs noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (fsx.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }

// The stable store's file: decoding never panics, and what it accepts
// survives encoding again.
func FuzzStableFile(f *testing.F) {
	f.Add(encodeKV(map[string][]byte{"CurrentTerm": {1, 0, 0, 0, 0, 0, 0, 0}, "LastVoteCand": []byte("n1")}))
	f.Add(encodeKV(map[string][]byte{}))
	f.Add([]byte("BCKV"))
	f.Fuzz(func(t *testing.T, b []byte) {
		kv, err := decodeKV(b)
		if err != nil {
			require.ErrorIs(t, err, ErrLogCorrupt)
			return
		}
		again, err := decodeKV(encodeKV(kv))
		require.NoError(t, err)
		require.Equal(t, kv, again)
	})
}
