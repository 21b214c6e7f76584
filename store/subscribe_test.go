package store

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSubscribeAfterOpenSeesArrivalsAndCancelStopsThem(t *testing.T) {
	for _, pol := range []SyncPolicy{SyncGroup, SyncNone} {
		s, err := Open(t.TempDir(), Options{Sync: pol})
		require.NoError(t, err)
		var calls, last atomic.Int64
		cancel := s.Subscribe(func(topic string, q int, next int64) {
			require.Equal(t, "t", topic)
			calls.Add(1)
			last.Store(next)
			got, err := s.Read(topic, q, next-1, 1) // readable when called
			require.NoError(t, err)
			require.Len(t, got, 1)
		})
		require.NoError(t, s.Append(&Message{Topic: "t", Body: []byte("a")}, &Message{Topic: "t", Body: []byte("b")}))
		require.EqualValues(t, 1, calls.Load(), "once per queue of a batch")
		require.EqualValues(t, 2, last.Load())
		cancel()
		cancel() // idempotent
		require.NoError(t, s.Append(&Message{Topic: "t", Body: []byte("c")}))
		require.EqualValues(t, 1, calls.Load())
		select {
		case <-s.Done():
			t.Fatal("Done closed before Close")
		default:
		}
		require.NoError(t, s.Close())
		<-s.Done()
	}
}
