package schedule

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// atomicClock is an injected clock safe to share with the store.
type atomicClock struct{ ns atomic.Int64 }

func newAtomicClock() *atomicClock {
	c := &atomicClock{}
	c.ns.Store(time.Date(2026, 5, 21, 14, 50, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *atomicClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *atomicClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestRealStoreDeliversEveryLevelOnceAcrossAStoreAndSchedulerRestart runs the
// scheduler on *store.Store (group commit): delayed messages on several
// levels, a flap, a restart of both the store and the scheduler, and every
// message arrives exactly once, restored, on time.
func TestRealStoreDeliversEveryLevelOnceAcrossAStoreAndSchedulerRestart(t *testing.T) {
	dir := t.TempDir()
	clk := newAtomicClock()
	progress := filepath.Join(dir, "schedule.progress")
	opts := Options{Levels: "1s 5s 10s", ProgressPath: progress, Now: clk.Now, Tick: time.Millisecond}

	log, err := store.Open(filepath.Join(dir, "log"), store.Options{Now: clk.Now})
	require.NoError(t, err)
	s, err := New(log, opts)
	require.NoError(t, err)
	var keys []string
	for level := 1; level <= 3; level++ {
		for i := 0; i < 5; i++ {
			d, err := s.Delay(&store.Message{Topic: "orders", QueueID: level, Tags: "t", Keys: []string{"k"},
				Body: []byte{byte(level), byte(i)}, Properties: map[string]string{"p": "v"}, ReconsumeTimes: 1}, level)
			require.NoError(t, err)
			require.NoError(t, log.Append(d))
			keys = append(keys, d.Properties[PropUniqKey])
		}
	}
	delivered := func(l *store.Store) []*store.Message {
		var out []*store.Message
		for q := 1; q <= 3; q++ {
			m, err := l.Read("orders", q, 0, 100)
			require.NoError(t, err)
			out = append(out, m...)
		}
		return out
	}
	require.NoError(t, s.Start())
	clk.Advance(5 * time.Second) // levels 1 and 2 due, level 3 not
	waitUntil(t, "levels 1 and 2", func() bool { return len(delivered(log)) == 10 })
	require.NoError(t, s.Stop())
	require.NoError(t, s.Start())
	require.NoError(t, s.Stop())
	require.NoError(t, log.Close())

	log, err = store.Open(filepath.Join(dir, "log"), store.Options{Now: clk.Now})
	require.NoError(t, err)
	defer log.Close()
	s, err = New(log, opts)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 5, 2: 5, 3: 0}, s.Progress())
	require.NoError(t, s.Start())
	clk.Advance(5 * time.Second)
	waitUntil(t, "level 3", func() bool { return len(delivered(log)) == 15 })
	require.NoError(t, s.Stop())
	// Drive every level once more by hand, far in the future: anything a
	// twin or a lost progress would deliver again shows now.
	d := drive(s)
	for _, lv := range s.lv {
		s.step(d.g, lv, &cursor{next: lv.next.Load()}, clk.Now().Add(time.Hour))
	}
	d.end(t)

	got := map[string]int{}
	for _, m := range delivered(log) {
		got[m.Properties[PropUniqKey]]++
		assert.Equal(t, map[string]string{"p": "v", PropUniqKey: m.Properties[PropUniqKey]}, m.Properties)
		assert.Equal(t, int(m.Body[0]), m.QueueID, "real queue restored")
		assert.Equal(t, 1, m.ReconsumeTimes)
		assert.Equal(t, []string{"k"}, m.Keys)
	}
	require.Len(t, got, 15)
	for _, k := range keys {
		assert.Equal(t, 1, got[k], k)
	}
}

// TestRealStoreTimersAcrossAHostRestartInBothProgressModes runs timers on
// *store.Store with a progress file and with zero Options (progress in the
// log): half delivered, a cancel, both restarted, the rest delivered; each
// timer exactly once, the cancelled one never.
func TestRealStoreTimersAcrossAHostRestartInBothProgressModes(t *testing.T) {
	for name, progressPath := range map[string]bool{"progress file": true, "zero options": false} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			clk := newAtomicClock()
			opts := Options{Now: clk.Now}
			if progressPath {
				opts.ProgressPath = filepath.Join(dir, "progress")
			}
			open := func() (*store.Store, *Scheduler) {
				st, err := store.Open(filepath.Join(dir, "log"), store.Options{Sync: store.SyncNone, Now: clk.Now})
				require.NoError(t, err)
				s, err := New(st, opts)
				require.NoError(t, err)
				return st, s
			}
			st, s := open()
			t0 := clk.Now()
			var keys []string
			for i := 0; i < 100; i++ {
				keys = append(keys, at(t, s, st, "orders", t0.Add(time.Duration(i)*time.Hour/2))) // 50 h
			}
			d := drive(s)
			d.timers(t0.Add(24*time.Hour + time.Second)) // 0..48 delivered
			require.NoError(t, s.Cancel(keys[70]))
			d.end(t)
			require.NoError(t, st.Close())

			st, s = open()
			defer st.Close()
			d = drive(s)
			d.timers(t0.Add(100 * time.Hour))
			d.end(t)
			got := map[string]int{}
			for q := 0; q < 1; q++ {
				msgs, err := st.Read("orders", q, 0, 1000)
				require.NoError(t, err)
				for _, m := range msgs {
					got[m.Properties[PropUniqKey]]++
				}
			}
			for i, k := range keys {
				want := 1
				if i == 70 {
					want = 0
				}
				assert.Equal(t, want, got[k], "timer %d", i)
			}
		})
	}
}
