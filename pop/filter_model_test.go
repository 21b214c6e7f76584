package pop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestFilterRandomOpsDeliverOnlyMatchesAndLoseNone: random appends of
// tagged messages, FIFO and plain pops with one filter, acks, dropped
// deliveries and clock moves. Every delivery matches the filter; in the
// end every matching message was acked exactly once, none of the others
// was ever delivered, and the committed offset is the end of the queue.
func TestFilterRandomOpsDeliverOnlyMatchesAndLoseNone(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src, clock, offs := newMemSource(), newFakeClock(), NewMemoryOffsets()
		s := New(src, Options{Now: clock.Now, Offsets: offs, Tick: time.Hour})
		defer s.Close()
		filter := rapid.SampledFrom([]string{"", "*", "A", "A || B", "C||A"}).Draw(rt, "filter")
		f, err := ParseFilter(filter)
		require.NoError(rt, err)
		fifo := rapid.Bool().Draw(rt, "fifo")
		var tags []string
		acked := map[int64]int{}
		live := map[string]int64{} // handle → offset
		pop := func(t *rapid.T, max int) {
			r, err := s.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", Max: max, Invisible: 5 * time.Second,
				Filter: filter, FIFO: fifo, AttemptID: rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "attempt")})
			require.NoError(t, err)
			for _, d := range r.Messages {
				require.True(t, f.Match(d.Message.Tags), "delivered %q through filter %q", d.Message.Tags, filter)
				live[d.Handle] = d.Message.QueueOffset
			}
		}
		ack := func(t *rapid.T, h string) {
			if err := s.Ack(h); err == nil {
				acked[live[h]]++
			} else {
				require.ErrorIs(t, err, ErrStaleHandle)
			}
			delete(live, h)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(t *rapid.T) {
				tag := rapid.SampledFrom([]string{"A", "B", "C", ""}).Draw(t, "tag")
				tags = append(tags, tag)
				src.appendTags("T", 0, tag)
			},
			"pop": func(t *rapid.T) { pop(t, rapid.IntRange(1, 4).Draw(t, "max")) },
			"ack": func(t *rapid.T) {
				for h := range live {
					ack(t, h)
					return
				}
			},
			"drop": func(t *rapid.T) {
				for h := range live {
					delete(live, h)
					return
				}
			},
			"advance": func(t *rapid.T) { clock.Advance(3 * time.Second) },
		})
		// Drain: every matching message comes (back) and is acked.
		for range 4 * (len(tags) + 1) {
			clock.Advance(10 * time.Second)
			pop(rt, MaxBatch)
			for h := range live {
				ack(rt, h)
			}
		}
		for off, tag := range tags {
			if f.Match(tag) {
				require.Equal(rt, 1, acked[int64(off)], "matching message %d (%q) acked once", off, tag)
			} else {
				require.Zero(rt, acked[int64(off)], "non-matching message %d (%q) never delivered", off, tag)
			}
		}
		c, _ := offs.Committed("g", "T", 0)
		require.EqualValues(rt, len(tags), c)
	})
}
