package atomicfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/internal/atomicfile"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWriteFileReplacesAndLeavesNoTempFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	require.NoError(t, atomicfile.WriteFile(p, []byte("one"), 0o600))
	require.NoError(t, atomicfile.WriteFile(p, []byte("two"), 0o600))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	_, err = os.Stat(p + atomicfile.TmpSuffix)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestWriteFileFailsWithoutChangingTheTarget(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, atomicfile.WriteFile(p, []byte("kept"), 0o644))
	// The target is a directory now: the rename fails, the temp file goes.
	d := filepath.Join(dir, "d")
	require.NoError(t, os.Mkdir(d, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d, "x"), nil, 0o644))
	require.Error(t, atomicfile.WriteFile(d, []byte("new"), 0o644))
	_, err := os.Stat(d + atomicfile.TmpSuffix)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Error(t, atomicfile.WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "kept", string(b))
}
