package store

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under SyncGroup the records of one group-commit round reach the log in
// one write: every log write is followed by the round's fsync (or made by
// a checkpoint), never one write per Append.
func TestSyncGroupWritesEachRoundInOneLogWrite(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	var writes, records atomic.Int64
	s.mu.Lock()
	inner := s.logWrite
	s.logWrite = func(fr *frames) error {
		writes.Add(1)
		return inner(fr)
	}
	s.mu.Unlock()
	const appenders, per = 64, 40
	var wg sync.WaitGroup
	for w := 0; w < appenders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if err := s.Append(msg("t", w%4, "x")); err != nil {
					t.Error(err)
					return
				}
				records.Add(1)
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	require.Equal(t, int64(appenders*per), records.Load())
	assert.LessOrEqual(t, uint64(writes.Load()), st.Syncs+st.Checkpoints, "one write per round: %d writes, %d fsyncs", writes.Load(), st.Syncs)
	assert.Less(t, writes.Load(), int64(appenders*per), "not one write per Append")
	t.Logf("%d appends, %d log writes, %d fsyncs, %.1f records per fsync", appenders*per, writes.Load(), st.Syncs, float64(st.SyncedRecords)/float64(st.Syncs))
}
