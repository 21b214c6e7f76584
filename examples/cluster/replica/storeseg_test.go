package replica

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// A node's store was written with the segment size of the version that
// created it (16 MiB before StoreSegmentSize existed); reopened with
// another one, smaller or larger than the segment it left half written,
// it reads everything back and keeps appending after it.
func TestStoreSegmentSizeMayChangeAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	body := make([]byte, 1000)
	var want int64
	for round, size := range []int{64 << 10, 16 << 10, 1 << 20, 4 << 10} {
		st, err := store.Open(dir, store.Options{Sync: store.SyncNone, SegmentSize: size})
		require.NoError(t, err, "round %d", round)
		require.Equal(t, want, st.Stats().LogNext, "round %d: everything written before", round)
		for i := 0; i < 100; i++ {
			m := &store.Message{Topic: "t", QueueID: i % 3, Body: body, Tags: fmt.Sprintf("r%d", round)}
			require.NoError(t, st.Append(m))
			require.Equal(t, want, m.LogOffset)
			want++
		}
		var n int64
		for q := range 3 {
			for off := int64(0); ; {
				ms, err := st.Read("t", q, off, 64)
				require.NoError(t, err)
				if len(ms) == 0 {
					break
				}
				for _, m := range ms {
					require.Equal(t, off, m.QueueOffset)
					off++
					n++
				}
			}
		}
		require.Equal(t, want, n, "round %d: every message reads back", round)
		require.NoError(t, st.Close())
	}
}

// Config.StoreSegmentSize reaches every node's store: with 16 KiB
// segments, 100 KiB of produce leaves several segment files on each node
// (the default, DefaultStoreSegmentSize, leaves one).
func TestStoreSegmentSizeReachesEveryNodesStore(t *testing.T) {
	cfg, err := Config{ID: "n", Dir: t.TempDir(), RaftAddr: "127.0.0.1:1"}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultStoreSegmentSize, cfg.StoreSegmentSize)

	c := newCluster(t, 3, func(c *Config) { c.StoreSegmentSize = 16 << 10 })
	l := c.leader()
	for range 100 {
		_, err := l.Produce(&store.Message{Topic: "t", Body: make([]byte, 1024)})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for _, n := range c.nodes {
			if n.Store().Stats().LogNext != 100 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	for id, n := range c.nodes {
		segs, err := filepath.Glob(filepath.Join(n.cfg.Dir, "store", "log", "0*"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(segs), 5, "node %s: %v", id, segs)
	}
}
