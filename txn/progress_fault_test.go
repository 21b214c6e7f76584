package txn

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

// The progress file is only a hint where the rebuild may start: a failed
// write of it (each file operation in turn) loses no resolution and
// invents none — after a reopen the log decides.
func TestProgressWriteFaultsLoseNoResolution(t *testing.T) {
	for _, op := range []fsxtest.Op{fsxtest.OpOpen, fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpRename} {
		faulty := &fsxtest.Faulty{}
		r := newRig(t, Options{fs: faulty})
		committed, rolledBack, open := r.prepare("orders", "c"), r.prepare("orders", "r"), r.prepare("orders", "o")
		require.NoError(t, r.m.Commit(committed))
		require.NoError(t, r.m.Rollback(rolledBack))

		faulty.Fail(op, 1, fsxtest.ENOSPC)
		require.Error(t, r.m.saveProgress(), "op %d: a failed progress write is reported", op)
		require.NoError(t, r.m.Commit(committed), "op %d: the commit repeated is still one", op)
		_ = r.m.Close() // its last progress write fails too
		faulty.Heal()
		require.NoError(t, r.log.Close())
		r.open(r.dir)

		require.Equal(t, []string{"c"}, r.delivered("orders"), "op %d", op)
		require.True(t, r.m.Pending(open), "op %d: the open transaction is still open", op)
		require.False(t, r.m.Pending(committed), "op %d", op)
		require.ErrorIs(t, r.m.Commit(rolledBack), ErrAlreadyResolved, "op %d", op)
		require.NoError(t, r.m.Commit(open), "op %d", op)
		require.Equal(t, []string{"c", "o"}, r.delivered("orders"), "op %d", op)
	}
}
