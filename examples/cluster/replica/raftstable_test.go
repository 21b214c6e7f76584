package replica

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
	"github.com/brokercore/brokercore/examples/cluster/internal/fsx/fsxtest"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

func TestStableStoreKeepsTermAndVoteAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stable")
	s, err := openStableStore(fsx.OS, path)
	require.NoError(t, err)
	_, err = s.Get([]byte("LastVoteCand"))
	require.EqualError(t, err, "not found", "raft tells a missing key by this text")
	_, err = s.GetUint64([]byte("CurrentTerm"))
	require.EqualError(t, err, "not found")

	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 7))
	require.NoError(t, s.Set([]byte("LastVoteCand"), []byte("n2")))
	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 8))
	require.NoError(t, s.Set([]byte("empty"), nil))

	s, err = openStableStore(fsx.OS, path)
	require.NoError(t, err)
	v, err := s.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.Equal(t, uint64(8), v)
	b, err := s.Get([]byte("LastVoteCand"))
	require.NoError(t, err)
	require.Equal(t, "n2", string(b))
	b, err = s.Get([]byte("empty"))
	require.NoError(t, err)
	require.Empty(t, b)
	_, err = s.GetUint64([]byte("LastVoteCand"))
	require.Error(t, err, "not a uint64")
}

func TestStableStoreFailedWriteChangesNothing(t *testing.T) {
	for _, op := range []fsxtest.Op{fsxtest.OpOpen, fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpRename} {
		path := filepath.Join(t.TempDir(), "stable")
		ff := &fsxtest.Faulty{}
		s, err := openStableStore(ff, path)
		require.NoError(t, err)
		require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 3))
		ff.Fail(op, 1, fsxtest.ENOSPC)
		require.ErrorIs(t, s.SetUint64([]byte("CurrentTerm"), 4), fsxtest.ENOSPC)
		v, err := s.GetUint64([]byte("CurrentTerm"))
		require.NoError(t, err)
		if op == fsxtest.OpSync {
			// The rename may have happened before the directory fsync
			// failed: the file holds the old or the new term.
			require.Equal(t, uint64(3), v, "memory keeps the last acknowledged term")
			continue
		}
		require.Equal(t, uint64(3), v)
		ff.Heal()
		s, err = openStableStore(fsx.OS, path)
		require.NoError(t, err)
		v, err = s.GetUint64([]byte("CurrentTerm"))
		require.NoError(t, err)
		require.Equal(t, uint64(3), v)
	}
}

func TestStableStoreRefusesADamagedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stable")
	s, err := openStableStore(fsx.OS, path)
	require.NoError(t, err)
	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 3))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for i := range b {
		d := append([]byte(nil), b...)
		d[i] ^= 0x10
		require.NoError(t, os.WriteFile(path, d, 0o644))
		_, err := openStableStore(fsx.OS, path)
		require.ErrorIs(t, err, ErrLogCorrupt, "byte %d", i)
	}
}

func TestRaftStoresChoice(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	ls, ss, cl, err := openRaftStores(dir, "", log)
	require.NoError(t, err)
	require.IsType(t, &logStore{}, ls, "a new directory gets the segment log")
	require.IsType(t, &stableStore{}, ss)
	require.NoError(t, ls.StoreLog(&raft.Log{Index: 1, Term: 1}))
	for _, c := range cl {
		require.NoError(t, c.Close())
	}
	_, _, _, err = openRaftStores(dir, LogStoreBolt, log)
	require.ErrorIs(t, err, ErrInvalid, "bolt asked for on a segment log's directory")
	_, _, _, err = openRaftStores(t.TempDir(), "wal", log)
	require.ErrorIs(t, err, ErrInvalid)

	bdir := t.TempDir()
	ls, _, cl, err = openRaftStores(bdir, LogStoreBolt, log)
	require.NoError(t, err)
	require.NoError(t, ls.StoreLog(&raft.Log{Index: 1, Term: 1}))
	for _, c := range cl {
		require.NoError(t, c.Close())
	}
	_, _, _, err = openRaftStores(bdir, LogStoreSegment, log)
	require.ErrorIs(t, err, ErrInvalid, "the segment log asked for on a bolt directory")
	ls, _, cl, err = openRaftStores(bdir, "", log)
	require.NoError(t, err)
	_, isSegment := ls.(*logStore)
	require.False(t, isSegment, "an existing bolt directory stays on bolt")
	last, err := ls.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(1), last)
	for _, c := range cl {
		require.NoError(t, c.Close())
	}
}
