package store

import (
	"testing"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A read that reaches the tail verifies it first (verify.go). With appends
// arriving all the time, the tail it verified has grown again by the time
// the read retries: the read must still succeed with what was verified,
// never hand the caller the internal errVerify ("records not verified
// yet"), as it did after two such rounds (seen as a rare failure of
// TestRetentionRacingAppendsAndReadsNeverReturnsCorruptData).
func TestReadsAtTheTailUnderConstantAppendsNeverFailToVerify(t *testing.T) {
	for _, mode := range []SyncPolicy{SyncNone, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			s := openT(t, t.TempDir(), Options{Sync: mode})
			require.NoError(t, s.Append(msg("t", 0, "v")))
			stop := testkit.Repeat(func() { assert.NoError(t, s.Append(msg("t", 0, "v"))) })
			t.Cleanup(func() { stop(); s.Close() })
			for i := 0; i < 3000; i++ {
				from := max(0, s.MaxOffset("t", 0)-1)
				got, err := s.Read("t", 0, from, MaxReadBatch)
				require.NoError(t, err, "read %d at %d", i, from)
				require.NotEmpty(t, got, "read %d at %d", i, from)
				for j, m := range got {
					require.Equal(t, from+int64(j), m.QueueOffset)
				}
				last := int64(s.Stats().Messages) - 1
				m, err := s.ReadAt(last)
				require.NoError(t, err, "read at log offset %d", last)
				require.Equal(t, last, m.LogOffset)
			}
		})
	}
}

// The interleaving behind it, made certain: an append lands after every
// verification the read asks for, before the read tries again.
func TestReadAtTheTailAfterAppendsThatFollowEachVerificationSucceeds(t *testing.T) {
	for _, mode := range []SyncPolicy{SyncNone, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			var s *Store
			fixes := 0
			s = openT(t, t.TempDir(), Options{Sync: mode, afterFixedRead: func() {
				fixes++
				require.NoError(t, s.Append(msg("t", 0, "late")))
			}})
			defer s.Close()
			require.NoError(t, s.Append(msg("t", 0, "a"), msg("t", 0, "b")))
			got, err := s.Read("t", 0, 0, MaxReadBatch)
			require.NoError(t, err)
			require.Equal(t, 1, fixes, "one verification, then the verified records are read")
			require.GreaterOrEqual(t, len(got), 2, "what was verified for the read is all returned")
			for i, m := range got {
				require.Equal(t, int64(i), m.QueueOffset)
			}
		})
	}
}
