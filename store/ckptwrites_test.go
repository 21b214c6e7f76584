package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

// A checkpoint costs O(1) writes whatever the number of queues that
// changed: 2,000 queues with one new entry each are persisted by a handful
// of writes (the index journal, the checkpoint file), not one per queue.
func TestCheckpointWritesDoNotGrowWithTheQueuesThatChanged(t *testing.T) {
	f := &fsxtest.Faulty{}
	s := openT(t, t.TempDir(), Options{Sync: SyncNone, fs: f})
	defer s.Close()
	const queues = 2000
	for round := 0; round < 2; round++ {
		for q := 0; q < queues; q++ {
			require.NoError(t, s.Append(msg(fmt.Sprintf("t%d", q%50), q/50, "x")))
		}
		before := f.Calls(fsxtest.OpWrite)
		require.NoError(t, s.checkpoint())
		writes := f.Calls(fsxtest.OpWrite) - before
		assert.LessOrEqual(t, writes, 4, "round %d: %d writes for %d changed queues", round, writes, queues)
	}
}
