package replica

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Both raft logs run the cluster: produce, kill and restart the leader,
// and every node converges on the same messages; a node restarted keeps
// the kind of log its directory holds.
func TestClusterRunsOnEitherRaftLog(t *testing.T) {
	for _, kind := range []string{LogStoreSegment, LogStoreBolt} {
		t.Run(kind, func(t *testing.T) {
			c := newCluster(t, 3, func(cfg *Config) { cfg.LogStore = kind })
			l := c.leader()
			for i := range 50 {
				_, err := l.Produce(msg("t", i%2, fmt.Sprint(i)))
				require.NoError(t, err)
			}
			c.kill(l.ID())
			l2 := c.leader()
			for i := range 50 {
				_, err := l2.Produce(msg("t", i%2, fmt.Sprint(50+i)))
				require.NoError(t, err)
			}
			back := c.restart(l.ID())
			_, isSegment := back.logs.(*logStore)
			require.Equal(t, kind == LogStoreSegment, isSegment)
			c.waitConverged()
			c.requireIdentical()
			require.Equal(t, int64(100), back.Store().Stats().LogNext)
		})
	}
}
