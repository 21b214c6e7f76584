package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// When the entries the queues still buffer are more than journalMax, a
// compaction starts a generation already past it; the next checkpoints
// append to that generation until it has doubled, rather than compacting
// (copying every buffered entry) again at each one. Every entry reads back
// after a reopen.
func TestJournalIsNotCompactedAtEveryCheckpointWhenTheBuffersPassItsLimit(t *testing.T) {
	old := journalMax
	journalMax = 4 << 10
	t.Cleanup(func() { journalMax = old })
	dir := t.TempDir()
	s := openT(t, dir, Options{Sync: SyncNone})
	const queues = 400 // 400 queues × a few 32-byte entries buffered: far past 4 KiB
	appendRound := func() {
		for q := range queues {
			require.NoError(t, s.Append(msg(fmt.Sprintf("t%d", q%20), q/20, "x")))
		}
	}
	appendRound()
	appendRound()
	require.NoError(t, s.checkpoint())
	compactions := 0
	for range 12 {
		gen := s.jr.gen
		appendRound()
		require.NoError(t, s.checkpoint())
		if s.jr.gen != gen {
			compactions++
			require.GreaterOrEqual(t, s.jr.base, journalMax, "the new generation starts past journalMax")
		}
	}
	require.Positive(t, compactions, "the journal is still compacted")
	require.LessOrEqual(t, compactions, 6, "compacted at %d of 12 checkpoints", compactions)
	require.NoError(t, s.Close())

	s = openT(t, dir, Options{Sync: SyncNone})
	defer s.Close()
	for q := range queues {
		require.Equal(t, int64(14), s.MaxOffset(fmt.Sprintf("t%d", q%20), q/20), "queue %d", q)
	}
}
