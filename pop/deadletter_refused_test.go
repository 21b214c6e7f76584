package pop

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

// A DeadLetter that says its refusal is for good (ErrDeadLetterRefused, or
// store.ErrInvalid from a store append) is called once: the message is
// settled, counted in Stats.DeadLetterDropped, and the committed offset
// moves past it. Before, it was offered again every DeadLetterRetry,
// forever, and the queue's offset never passed it.
func TestDeadLetterRefusedForGoodIsOfferedOnceAndSettled(t *testing.T) {
	for _, refusal := range []error{
		fmt.Errorf("host: %w", ErrDeadLetterRefused),
		fmt.Errorf("append: %w", store.ErrInvalid),
	} {
		t.Run(refusal.Error(), func(t *testing.T) {
			src, clock, offs := newMemSource(), newFakeClock(), NewMemoryOffsets()
			src.append("T", 0, 1)
			var calls atomic.Int64
			s := New(src, Options{Now: clock.Now, Offsets: offs, MaxAttempts: 1, DeadLetterRetry: time.Second,
				DeadLetter: func(string, *store.Message) error { calls.Add(1); return refusal }})
			defer s.Close()
			r, err := s.Pop(bg, req0(1, 10*time.Second))
			require.NoError(t, err)
			require.Len(t, r.Messages, 1)
			for range 4 {
				clock.Advance(11 * time.Second)
				r, err = s.Pop(bg, req0(1, 10*time.Second))
				require.NoError(t, err)
				require.Empty(t, r.Messages)
			}
			assert.EqualValues(t, 1, calls.Load(), "not offered again")
			st := s.Stats()
			assert.EqualValues(t, 1, st.DeadLetterDropped)
			assert.Zero(t, st.DeadLettered)
			assert.Zero(t, st.DeadLetterFailures)
			off, ok := offs.Committed("g", "T", 0)
			require.True(t, ok)
			assert.EqualValues(t, 1, off)
		})
	}
}
