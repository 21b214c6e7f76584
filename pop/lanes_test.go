package pop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestInvisibleEntriesBecomeVisibleExactlyOnTime drives one queue's
// invisible-entry structures (lanes and the fallback heap) with many
// durations, changes, settles and a clock that is sometimes set back:
// after every refresh exactly the entries whose visible time is over are
// visible, in offset order, and nothing else.
func TestInvisibleEntriesBecomeVisibleExactlyOnTime(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		q := newQueueState(0, 1, 0, 0)
		now := int64(time.Hour)
		durs := rapid.SliceOfN(rapid.Int64Range(1, 20), 1, 12).Draw(rt, "durations")
		pick := func(t *rapid.T) *entry {
			offs := q.liveOffsets()
			require.Len(t, offs, q.pending())
			if len(offs) == 0 {
				return nil
			}
			return q.get(rapid.SampledFrom(offs).Draw(t, "offset"))
		}
		rt.Repeat(map[string]func(*rapid.T){
			"pop": func(t *rapid.T) {
				d := rapid.SampledFrom(durs).Draw(t, "dur") * int64(time.Second)
				q.deliver(q.add(q.next, 0), now, time.Duration(d), true, nil, nil)
			},
			"redeliver": func(t *rapid.T) {
				if len(q.visible) > 0 {
					e := &q.slab[q.visible[0]]
					q.deliver(e, now, time.Duration(rapid.SampledFrom(durs).Draw(t, "dur"))*time.Second, true, nil, nil)
				}
			},
			"change": func(t *rapid.T) {
				if e := pick(t); e != nil {
					q.change(e, now, rapid.Int64Range(0, 30).Draw(t, "d")*int64(time.Second))
				}
			},
			"settle": func(t *rapid.T) {
				if e := pick(t); e != nil {
					q.settle(e)
				}
			},
			"clock": func(t *rapid.T) {
				now += rapid.Int64Range(-5, 15).Draw(t, "by") * int64(time.Second)
			},
			"": func(t *rapid.T) {
				q.refresh(now, 0)
				hidden := 0
				var due []int64
				for _, off := range q.liveOffsets() {
					e := q.get(off)
					require.NotNil(t, e)
					require.Equal(t, off, e.off)
					if e.where == inHidden {
						hidden++
						require.Greater(t, e.visibleAt, now, "offset %d should be visible", off)
					} else {
						due = append(due, off)
					}
				}
				require.Equal(t, hidden, q.nHidden)
				require.Len(t, q.visible, len(due))
				for i := 1; i < len(q.visible); i++ {
					require.Less(t, q.slab[q.visible[i-1]].off, q.slab[q.visible[i]].off)
				}
			},
		})
	})
}
