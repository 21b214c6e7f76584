package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The checkpoint copies again only the queues whose index took an entry
// (snapshotQueues). Whatever happens between checkpoints — appends to old
// and new queues, a topic deleted, retention, a reopen — the copy it
// writes equals one taken of every queue afresh, and a reopen reads back
// exactly those offsets.
func TestCheckpointCopyOfTheQueuesIsAFreshCopy(t *testing.T) {
	dropped := 0
	defer func() { t.Logf("retention dropped %d segments in all", dropped) }()
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		opts := Options{Sync: SyncNone, SegmentSize: 2048, MaxBytes: 3 * 2048, RetainEvery: -1}
		s, err := Open(dir, opts)
		require.NoError(rt, err)
		defer func() { s.Close() }()
		topics := []string{"a", "b", "c"}
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0:
				_ = s.DeleteTopic(rapid.SampledFrom(topics).Draw(rt, "deleted"))
			case 1:
				n, err := s.Retain()
				require.NoError(rt, err)
				dropped += n
			case 2:
				require.NoError(rt, s.Close())
				s, err = Open(dir, opts)
				require.NoError(rt, err)
			case 3, 4:
				require.NoError(rt, s.checkpoint(false))
				requireFreshSnapshot(rt, s)
			default:
				n := rapid.IntRange(1, 5).Draw(rt, "batch")
				var batch []*Message
				for range n {
					topic := rapid.SampledFrom(topics).Draw(rt, "topic")
					q := rapid.IntRange(0, 20).Draw(rt, "queue")
					batch = append(batch, msg(topic, q, strings.Repeat("m", rapid.IntRange(0, 600).Draw(rt, "size"))))
				}
				require.NoError(rt, s.Append(batch...))
			}
		}
		require.NoError(rt, s.checkpoint(false))
		requireFreshSnapshot(rt, s)
		want := offsetsOf(s)
		require.NoError(rt, s.Close())
		s, err = Open(dir, opts)
		require.NoError(rt, err)
		require.Equal(rt, want, offsetsOf(s), "a reopen reads back the offsets")
	})
}

func requireFreshSnapshot(t require.TestingT, s *Store) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var fresh []ckptQueue
	for _, q := range s.order {
		fresh = append(fresh, snapOf(q))
	}
	require.Len(t, s.ckptSnap, len(fresh))
	for i := range fresh {
		require.Equal(t, fresh[i], s.ckptSnap[i], "the checkpoint's copy of queue %d of %d", i, len(fresh))
	}
}

func offsetsOf(s *Store) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, topic := range []string{"a", "b", "c"} {
		for q := range 21 {
			out[fmt.Sprint(topic, q)] = [2]int64{s.MinOffset(topic, q), s.MaxOffset(topic, q)}
		}
	}
	return out
}
