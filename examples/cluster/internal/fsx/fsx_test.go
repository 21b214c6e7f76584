package fsx_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
	"github.com/brokercore/brokercore/examples/cluster/internal/fsx/fsxtest"
)

func TestWriteFileReplacesAtomically(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, fsx.WriteFile(nil, path, []byte("one"), 0o644))
	require.NoError(t, fsx.WriteFile(fsx.OS, path, []byte("two"), 0o644))
	b, err := fsx.ReadFile(nil, path)
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	_, err = os.Stat(path + ".tmp")
	require.True(t, fsx.IsNotExist(err))
}

func TestWriteFileFailureAtEveryStepLeavesTheOldContent(t *testing.T) {
	for _, op := range []fsxtest.Op{fsxtest.OpOpen, fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpRename} {
		path := filepath.Join(t.TempDir(), "f")
		require.NoError(t, fsx.WriteFile(nil, path, []byte("old"), 0o644))
		f := &fsxtest.Faulty{}
		f.Fail(op, 1, fsxtest.ENOSPC)
		err := fsx.WriteFile(f, path, []byte("new"), 0o644)
		require.Error(t, err, "op %d", op)
		require.True(t, errors.Is(err, fsxtest.ENOSPC), "op %d: %v", op, err)
		b, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		require.Equal(t, "old", string(b), "op %d", op)
		_, serr := os.Stat(path + ".tmp")
		require.True(t, fsx.IsNotExist(serr), "op %d leaves no temp file", op)
		f.Heal()
		require.NoError(t, fsx.WriteFile(f, path, []byte("new"), 0o644))
	}
}

func TestFaultyFailsFromTheNthCallOn(t *testing.T) {
	f := &fsxtest.Faulty{}
	dir := t.TempDir()
	file, err := f.OpenFile(filepath.Join(dir, "x"), os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer file.Close()
	f.Fail(fsxtest.OpWrite, 2, nil)
	_, err = file.Write([]byte("a"))
	require.NoError(t, err)
	_, err = file.Write([]byte("b"))
	require.ErrorIs(t, err, fsxtest.ErrInjected)
	_, err = file.WriteAt([]byte("c"), 0)
	require.ErrorIs(t, err, fsxtest.ErrInjected)
	require.Equal(t, 3, f.Calls(fsxtest.OpWrite))
	f.Heal()
	_, err = file.Write([]byte("d"))
	require.NoError(t, err)
}
