package schedule_test

// Black-box acceptance tests of the timers (issue 16) and of the zero
// Options (issue 14), over a real store and an injected clock.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

var audT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type audEnv struct {
	t    *testing.T
	st   *store.Store
	clk  *testkit.Clock
	opts schedule.Options
}

func audNewEnv(t *testing.T) *audEnv {
	t.Helper()
	clk := testkit.NewClock(audT0)
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone, Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return &audEnv{t: t, st: st, clk: clk, opts: schedule.Options{
		ProgressPath: filepath.Join(t.TempDir(), "progress"),
		Now:          clk.Now,
		Tick:         time.Millisecond,
	}}
}

func (e *audEnv) scheduler() *schedule.Scheduler {
	e.t.Helper()
	s, err := schedule.New(e.st, e.opts)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = s.Stop() })
	return s
}

func (e *audEnv) started() *schedule.Scheduler {
	e.t.Helper()
	s := e.scheduler()
	require.NoError(e.t, s.Start())
	return s
}

func (e *audEnv) at(s *schedule.Scheduler, topic, body string, t time.Time) *store.Message {
	e.t.Helper()
	m, err := s.At(&store.Message{Topic: topic, Body: []byte(body)}, t)
	require.NoError(e.t, err)
	require.NoError(e.t, e.st.Append(m))
	return m
}

func (e *audEnv) bodies(topic string) []string {
	e.t.Helper()
	var out []string
	for off := e.st.MinOffset(topic, 0); off < e.st.MaxOffset(topic, 0); {
		ms, err := e.st.Read(topic, 0, off, 32)
		require.NoError(e.t, err)
		require.NotEmpty(e.t, ms)
		for _, m := range ms {
			out = append(out, string(m.Body))
		}
		off = ms[len(ms)-1].QueueOffset + 1
	}
	return out
}

func (e *audEnv) waitCount(topic string, n int64) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.st.MaxOffset(topic, 0) >= n }, 10*time.Second, time.Millisecond,
		"waiting for %d messages in %s (have %d)", n, topic, e.st.MaxOffset(topic, 0))
}

// sync appends a timer due now to a marker topic and waits for it: the
// timers are delivered in (time, offset) order, so anything due before the
// marker has been delivered once it arrives.
func (e *audEnv) sync(s *schedule.Scheduler) {
	e.t.Helper()
	n := e.st.MaxOffset("marker", 0)
	// At rounds a time up to the millisecond: a marker on the millisecond
	// at or before now is due now.
	e.at(s, "marker", "mark", e.clk.Now().Truncate(time.Millisecond))
	e.waitCount("marker", n+1)
}

func TestAuditTimerNeverBeforeThenOnce(t *testing.T) {
	e := audNewEnv(t)
	s := e.started()
	due := audT0.Add(10*time.Second + 500*time.Microsecond) // not on a millisecond
	m := e.at(s, "real", "hello", due)
	assert.Equal(t, schedule.TimerTopic, m.Topic)
	assert.Equal(t, 0, m.QueueID)
	assert.NotEmpty(t, m.Properties[schedule.PropTimerDeliverMS])
	assert.NotEmpty(t, m.Properties[schedule.PropStartDeliverTime])
	key := m.Properties[schedule.PropUniqKey]
	require.NotEmpty(t, key)

	for _, now := range []time.Time{audT0.Add(5 * time.Second), due.Add(-time.Millisecond), due.Add(-100 * time.Microsecond)} {
		e.clk.Set(now)
		e.sync(s)
		assert.Zero(t, e.st.MaxOffset("real", 0), "delivered before its time at %v", now)
	}
	e.clk.Set(due.Add(500 * time.Microsecond)) // the documented rounding up to the millisecond
	e.waitCount("real", 1)
	e.sync(s)
	e.clk.Advance(time.Hour)
	e.sync(s)
	assert.Equal(t, []string{"hello"}, e.bodies("real"))
	ms, err := e.st.Read("real", 0, 0, 1)
	require.NoError(t, err)
	got := ms[0]
	assert.Equal(t, "real", got.Topic)
	assert.Equal(t, key, got.Properties[schedule.PropUniqKey])
	assert.False(t, got.StoredAt.Before(due), "stored %v before due %v", got.StoredAt, due)
	assert.Empty(t, got.Properties[schedule.PropTimerDeliverMS], "scheduling properties removed")
	assert.ErrorIs(t, s.Cancel(key), schedule.ErrDelivered)
}

func TestAuditTimerPastDeliversAtOnce(t *testing.T) {
	e := audNewEnv(t)
	s := e.started()
	e.at(s, "real", "late", audT0.Add(-time.Hour))
	e.waitCount("real", 1)
	assert.Equal(t, []string{"late"}, e.bodies("real"))

	// also on a clock that is not on a millisecond, without moving it
	e.clk.Set(audT0.Add(time.Second + 700*time.Microsecond))
	e.at(s, "real", "late2", audT0)
	e.waitCount("real", 2)
	assert.Equal(t, []string{"late", "late2"}, e.bodies("real"))
}

func TestAuditTimerOneYearLimit(t *testing.T) {
	e := audNewEnv(t)
	s := e.scheduler()
	require.Equal(t, 365*24*time.Hour, schedule.DefaultMaxTimerDelay)
	m := &store.Message{Topic: "real", Body: []byte("x")}
	_, err := s.At(m, audT0.Add(schedule.DefaultMaxTimerDelay+time.Second))
	assert.ErrorIs(t, err, schedule.ErrInvalid)
	_, err = s.At(m, audT0.Add(schedule.DefaultMaxTimerDelay))
	assert.NoError(t, err, "one year ahead is within the limit")
	_, err = s.At(nil, audT0)
	assert.ErrorIs(t, err, schedule.ErrInvalid)
	assert.Nil(t, m.Properties, "m is not modified")
	assert.Equal(t, "real", m.Topic)

	// a configured limit is honoured too
	e.opts.MaxTimerDelay = time.Hour
	s2 := e.scheduler()
	_, err = s2.At(m, audT0.Add(time.Hour+time.Second))
	assert.ErrorIs(t, err, schedule.ErrInvalid)
}

func TestAuditTimerCancel(t *testing.T) {
	e := audNewEnv(t)
	s := e.started()
	keep := e.at(s, "real", "keep", audT0.Add(time.Minute))
	drop := e.at(s, "real", "drop", audT0.Add(time.Minute))

	require.NoError(t, s.Cancel(drop.Properties[schedule.PropUniqKey]))
	assert.ErrorIs(t, s.Cancel(drop.Properties[schedule.PropUniqKey]), schedule.ErrCancelled)
	assert.ErrorIs(t, s.Cancel("no-such-key"), schedule.ErrTimerNotFound)
	assert.ErrorIs(t, s.Cancel(""), schedule.ErrInvalid)

	e.clk.Advance(time.Minute)
	e.waitCount("real", 1)
	e.sync(s)
	assert.Equal(t, []string{"keep"}, e.bodies("real"))
	assert.ErrorIs(t, s.Cancel(keep.Properties[schedule.PropUniqKey]), schedule.ErrDelivered)
	assert.ErrorIs(t, s.Cancel(drop.Properties[schedule.PropUniqKey]), schedule.ErrCancelled)
}

// A cancel survives a restart, also one made while the scheduler is stopped,
// and also when the timer was not indexed yet.
func TestAuditTimerCancelSurvivesRestart(t *testing.T) {
	e := audNewEnv(t)
	s := e.scheduler() // never started
	a := e.at(s, "real", "a", audT0.Add(time.Minute))
	b := e.at(s, "real", "b", audT0.Add(time.Minute))
	c := e.at(s, "real", "c", audT0.Add(2*time.Minute))
	require.NoError(t, s.Cancel(a.Properties[schedule.PropUniqKey]))

	s1 := e.started()
	require.NoError(t, s1.Cancel(c.Properties[schedule.PropUniqKey]))
	require.NoError(t, s1.Stop())

	s2 := e.started()
	e.clk.Advance(time.Hour)
	e.waitCount("real", 1)
	e.sync(s2)
	assert.Equal(t, []string{"b"}, e.bodies("real"))
	assert.ErrorIs(t, s2.Cancel(a.Properties[schedule.PropUniqKey]), schedule.ErrCancelled)
	assert.ErrorIs(t, s2.Cancel(c.Properties[schedule.PropUniqKey]), schedule.ErrCancelled)
	assert.ErrorIs(t, s2.Cancel(b.Properties[schedule.PropUniqKey]), schedule.ErrDelivered)
}

// A record appended to TimerTopic by a protocol layer, with only the
// properties set, is scheduled like one At returned.
func TestAuditTimerTopicRecordByHand(t *testing.T) {
	for _, prop := range []string{schedule.PropTimerDeliverMS, schedule.PropStartDeliverTime} {
		t.Run(prop, func(t *testing.T) {
			e := audNewEnv(t)
			s := e.started()
			due := audT0.Add(30 * time.Second)
			require.NoError(t, e.st.Append(&store.Message{
				Topic: schedule.TimerTopic,
				Body:  []byte("by-hand"),
				Properties: map[string]string{
					schedule.PropRealTopic: "real",
					schedule.PropRealQueue: "0",
					schedule.PropUniqKey:   "k-" + prop,
					prop:                   strconv.FormatInt(due.UnixMilli(), 10),
				},
			}))
			e.clk.Set(due.Add(-time.Millisecond))
			e.sync(s)
			assert.Zero(t, e.st.MaxOffset("real", 0))
			e.clk.Set(due)
			e.waitCount("real", 1)
			e.sync(s)
			assert.Equal(t, []string{"by-hand"}, e.bodies("real"))
			assert.ErrorIs(t, s.Cancel("k-"+prop), schedule.ErrDelivered)
		})
	}
}

// Exactly once under Start/Stop flaps from several goroutines while the
// clock moves, and a restart in the middle.
func TestAuditTimerExactlyOnceAcrossFlaps(t *testing.T) {
	e := audNewEnv(t)
	s := e.scheduler()
	const n = 300
	for i := 0; i < n; i++ {
		e.at(s, "real", fmt.Sprint(i), audT0.Add(time.Duration(i)*time.Second))
	}
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				_ = s.Start()
				time.Sleep(time.Millisecond) // let deliveries run between flaps
				_ = s.Stop()
			}
		}()
	}
	for i := 0; i < 60; i++ {
		e.clk.Advance(3 * time.Second)
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	require.NoError(t, s.Stop())

	s2 := e.started() // a restart over the same log and progress
	e.clk.Advance(time.Hour)
	e.waitCount("real", n)
	e.sync(s2)
	got := e.bodies("real")
	seen := map[string]int{}
	for _, b := range got {
		seen[b]++
	}
	for i := 0; i < n; i++ {
		assert.Equal(t, 1, seen[fmt.Sprint(i)], "timer %d", i)
	}
	assert.Len(t, got, n)
}

// The zero Options (no ProgressPath) must not deliver again what an earlier
// Scheduler over the same log delivered — levels and timers.
func TestAuditZeroOptionsNoDoubleDelivery(t *testing.T) {
	e := audNewEnv(t)
	e.opts = schedule.Options{Now: e.clk.Now, Tick: time.Millisecond} // zero but for the clock and tick
	s1 := e.started()
	d, err := s1.Delay(&store.Message{Topic: "lvl", Body: []byte("d0")}, 1)
	require.NoError(t, err)
	require.NoError(t, e.st.Append(d))
	e.at(s1, "real", "t0", audT0.Add(time.Second))
	e.clk.Advance(time.Second)
	e.waitCount("lvl", 1)
	e.waitCount("real", 1)
	require.NoError(t, s1.Stop())

	s2 := e.started()
	d, err = s2.Delay(&store.Message{Topic: "lvl", Body: []byte("d1")}, 1)
	require.NoError(t, err)
	require.NoError(t, e.st.Append(d))
	e.at(s2, "real", "t1", e.clk.Now())
	e.clk.Advance(time.Second)
	e.waitCount("lvl", 2)
	e.waitCount("real", 2)
	e.sync(s2)
	assert.Equal(t, []string{"d0", "d1"}, e.bodies("lvl"))
	assert.Equal(t, []string{"t0", "t1"}, e.bodies("real"))

	// even a third one while the second still runs (two schedulers over
	// one log is the host's mistake, but a fresh New must not replay)
	require.NoError(t, s2.Stop())
	s3 := e.started()
	e.sync(s3)
	assert.Equal(t, []string{"t0", "t1"}, e.bodies("real"))
}

// Over a closed store the scheduler starts nothing and Cancel refuses.
func TestAuditSchedulerOverClosedStore(t *testing.T) {
	e := audNewEnv(t)
	s := e.scheduler()
	m := e.at(s, "real", "x", audT0.Add(time.Hour))
	require.NoError(t, e.st.Close())
	require.ErrorIs(t, s.Start(), schedule.ErrClosed)
	assert.False(t, s.Stats().Running)
	assert.ErrorIs(t, s.Cancel(m.Properties[schedule.PropUniqKey]), schedule.ErrClosed)
	require.NoError(t, s.Stop())
}

// audFlakyLog fails every third append that carries a delivery and makes
// every delivery slow, so that Stop often lands in the middle of one.
type audFlakyLog struct {
	*store.Store
	mu sync.Mutex
	n  int
}

func (l *audFlakyLog) Append(msgs ...*store.Message) error {
	delivery := false
	for _, m := range msgs {
		if m.Topic == "real" {
			delivery = true
		}
	}
	if delivery {
		l.mu.Lock()
		l.n++
		fail := l.n%3 == 0
		l.mu.Unlock()
		time.Sleep(200 * time.Microsecond)
		if fail {
			return fmt.Errorf("audit: injected append failure")
		}
	}
	return l.Store.Append(msgs...)
}

// Exactly once with slow and failing appends under flaps, in both progress
// modes (file and log).
func TestAuditTimerExactlyOnceFlakyAppendsAndFlaps(t *testing.T) {
	for _, mode := range []string{"file", "log"} {
		t.Run(mode, func(t *testing.T) {
			e := audNewEnv(t)
			if mode == "log" {
				e.opts.ProgressPath = ""
			}
			e.opts.MaxBatch = 7
			fl := &audFlakyLog{Store: e.st}
			newS := func() *schedule.Scheduler {
				s, err := schedule.New(fl, e.opts)
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Stop() })
				return s
			}
			s := newS()
			const n = 200
			for i := 0; i < n; i++ {
				e.at(s, "real", fmt.Sprint(i), audT0.Add(time.Duration(i%50)*time.Second))
			}
			var wg sync.WaitGroup
			for w := 0; w < 2; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 30; i++ {
						_ = s.Start()
						time.Sleep(500 * time.Microsecond)
						_ = s.Stop()
					}
				}()
			}
			for i := 0; i < 30; i++ {
				e.clk.Advance(2 * time.Second)
				time.Sleep(500 * time.Microsecond)
			}
			wg.Wait()
			require.NoError(t, s.Stop())
			s2 := newS()
			require.NoError(t, s2.Start())
			e.clk.Advance(time.Hour)
			e.waitCount("real", n)
			e.sync(s2)
			seen := map[string]int{}
			for _, b := range e.bodies("real") {
				seen[b]++
			}
			for i := 0; i < n; i++ {
				assert.Equal(t, 1, seen[fmt.Sprint(i)], "timer %d", i)
			}
			fl.mu.Lock()
			assert.GreaterOrEqual(t, fl.n, 3, "appends failed along the way")
			fl.mu.Unlock()
		})
	}
}

// Timers far apart (across index slots, days and months ahead), appended
// out of order, each delivered at its time and not before, across a restart.
func TestAuditTimerAcrossSlotsAndRestart(t *testing.T) {
	e := audNewEnv(t)
	s := e.started()
	offsets := []time.Duration{
		200 * 24 * time.Hour, 90 * time.Minute, 30 * 24 * time.Hour, 59 * time.Minute,
		61 * time.Minute, 5 * time.Hour, 2 * time.Hour, 2*time.Hour + time.Millisecond, 364 * 24 * time.Hour,
	}
	for i, d := range offsets {
		e.at(s, "real", fmt.Sprint(i), audT0.Add(d))
	}
	order := []int{3, 4, 1, 6, 7, 5, 2, 0, 8}
	for k, i := range order {
		due := audT0.Add(offsets[i])
		e.clk.Set(due.Add(-time.Millisecond))
		e.sync(s)
		require.EqualValues(t, k, e.st.MaxOffset("real", 0), "before timer %d (%v)", i, offsets[i])
		e.clk.Set(due)
		e.waitCount("real", int64(k+1))
		if k == 4 { // restart in the middle
			require.NoError(t, s.Stop())
			s = e.started()
		}
	}
	e.sync(s)
	want := make([]string, 0, len(order))
	for _, i := range order {
		want = append(want, fmt.Sprint(i))
	}
	assert.Equal(t, want, e.bodies("real"))
}

// Records appended by hand that cannot be timers are skipped and counted,
// not delivered.
func TestAuditTimerTopicMalformedByHand(t *testing.T) {
	e := audNewEnv(t)
	s := e.started()
	ms := strconv.FormatInt(audT0.UnixMilli(), 10)
	far := strconv.FormatInt(audT0.Add(schedule.DefaultMaxTimerDelay+time.Hour).UnixMilli(), 10)
	require.NoError(t, e.st.Append(
		&store.Message{Topic: schedule.TimerTopic, Properties: map[string]string{schedule.PropTimerDeliverMS: ms}},                                     // no real topic
		&store.Message{Topic: schedule.TimerTopic, Properties: map[string]string{schedule.PropRealTopic: "real"}},                                      // no time
		&store.Message{Topic: schedule.TimerTopic, Properties: map[string]string{schedule.PropRealTopic: "real", schedule.PropTimerDeliverMS: "soon"}}, // bad time
		&store.Message{Topic: schedule.TimerTopic, Properties: map[string]string{schedule.PropRealTopic: "real", schedule.PropTimerDeliverMS: far}},    // beyond a year
	))
	e.sync(s)
	e.clk.Advance(2 * schedule.DefaultMaxTimerDelay)
	e.sync(s)
	assert.Zero(t, e.st.MaxOffset("real", 0))
	assert.EqualValues(t, 4, s.Stats().Timers.Malformed)
}

// Cancel stops every pending timer with the key; in the zero Options mode
// the cancel and a pending timer survive a restart too.
func TestAuditTimerZeroOptionsCancelAndPendingSurviveRestart(t *testing.T) {
	e := audNewEnv(t)
	e.opts = schedule.Options{Now: e.clk.Now, Tick: time.Millisecond}
	s1 := e.started()
	for i := 0; i < 2; i++ {
		m, err := s1.At(&store.Message{Topic: "real", Body: []byte("dup"), Properties: map[string]string{schedule.PropUniqKey: "same"}}, audT0.Add(time.Minute))
		require.NoError(t, err)
		require.NoError(t, e.st.Append(m))
	}
	e.at(s1, "real", "pending", audT0.Add(time.Hour))
	require.NoError(t, s1.Cancel("same"))
	require.NoError(t, s1.Stop())

	s2 := e.started()
	assert.ErrorIs(t, s2.Cancel("same"), schedule.ErrCancelled)
	e.clk.Advance(time.Hour)
	e.waitCount("real", 1)
	e.sync(s2)
	assert.Equal(t, []string{"pending"}, e.bodies("real"))
}

// audCopyDir copies a directory tree (a crash image of the progress) while
// the scheduler may still be writing it (progress.tmp may vanish mid-copy:
// os.CopyFS failed on that once in a CI run).
func audCopyDir(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, testkit.CopyCrashImage(from, to))
}

// A crash (no Stop) after deliveries settled: a new Scheduler over the
// files as they were repeats nothing. Progress is on disk after every
// batch, not only on Stop.
func TestAuditTimerCrashImageRepeatsNothing(t *testing.T) {
	e := audNewEnv(t)
	dir := filepath.Dir(e.opts.ProgressPath)
	s1 := e.started()
	const n = 40
	for i := 0; i < n; i++ {
		e.at(s1, "real", fmt.Sprint(i), audT0.Add(time.Duration(i)*time.Second))
	}
	d, err := s1.Delay(&store.Message{Topic: "lvl", Body: []byte("d")}, 1)
	require.NoError(t, err)
	require.NoError(t, e.st.Append(d))
	e.clk.Advance(time.Minute)
	e.waitCount("real", n)
	e.waitCount("lvl", 1)
	e.sync(s1)
	require.Eventually(t, func() bool { return s1.Progress()[1] == 1 }, 10*time.Second, time.Millisecond)
	// let the last batch's progress land: it is written before the loop
	// goes on, so one more marker round trip covers it
	e.sync(s1)

	image := t.TempDir()
	audCopyDir(t, dir, image)
	require.NoError(t, s1.Stop())

	e.opts.ProgressPath = filepath.Join(image, filepath.Base(e.opts.ProgressPath))
	s2 := e.started()
	d, err = s2.Delay(&store.Message{Topic: "lvl", Body: []byte("d2")}, 1)
	require.NoError(t, err)
	require.NoError(t, e.st.Append(d))
	e.clk.Advance(time.Second)
	e.waitCount("lvl", 2)
	e.sync(s2)
	assert.Len(t, e.bodies("real"), n)
	assert.Equal(t, []string{"d", "d2"}, e.bodies("lvl"))
}

// At refuses a message it could never deliver (no topic, or a system topic
// of the scheduler's own), instead of letting it be skipped as malformed.
func TestAuditTimerAtRefusesUndeliverable(t *testing.T) {
	e := audNewEnv(t)
	s := e.scheduler()
	for _, topic := range []string{"", schedule.TimerTopic, schedule.Topic} {
		_, err := s.At(&store.Message{Topic: topic, Body: []byte("x")}, audT0.Add(time.Minute))
		assert.ErrorIs(t, err, schedule.ErrInvalid, "topic %q", topic)
	}
	_, err := s.At(&store.Message{Topic: "real", QueueID: -1}, audT0.Add(time.Minute))
	assert.ErrorIs(t, err, schedule.ErrInvalid, "negative queue")
}

// The literal zero Options (real clock, default tick, no ProgressPath), with
// timers in the past so nothing waits for a real expiry: a second Scheduler,
// created while the first has not stopped yet (a crash image: the log),
// repeats nothing.
func TestAuditLiteralZeroOptionsNoDoubleDelivery(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	defer st.Close()
	s1, err := schedule.New(st, schedule.Options{})
	require.NoError(t, err)
	require.NoError(t, s1.Start())
	past := time.Now().Add(-time.Hour)
	for i := 0; i < 10; i++ {
		m, err := s1.At(&store.Message{Topic: "real", Body: []byte(fmt.Sprint(i))}, past)
		require.NoError(t, err)
		require.NoError(t, st.Append(m))
	}
	require.Eventually(t, func() bool { return st.MaxOffset("real", 0) == 10 }, 10*time.Second, time.Millisecond)

	s2, err := schedule.New(st, schedule.Options{})
	require.NoError(t, err)
	require.NoError(t, s1.Stop())
	require.NoError(t, s2.Start())
	defer s2.Stop()
	m, err := s2.At(&store.Message{Topic: "real", Body: []byte("sync")}, past)
	require.NoError(t, err)
	require.NoError(t, st.Append(m))
	require.Eventually(t, func() bool { return st.MaxOffset("real", 0) >= 11 }, 10*time.Second, time.Millisecond)
	require.NoError(t, s2.Stop())
	assert.EqualValues(t, 11, st.MaxOffset("real", 0))
}

// The timer index is derived state: damaged or deleted, it is rebuilt from
// the log and the progress, with deliveries and cancels intact.
func TestAuditTimerIndexDamagedRebuilt(t *testing.T) {
	for _, damage := range []string{"delete", "garbage", "truncate"} {
		t.Run(damage, func(t *testing.T) {
			e := audNewEnv(t)
			s1 := e.started()
			var keys []string
			for i := 0; i < 20; i++ {
				due := audT0.Add(time.Minute)
				if i >= 10 {
					due = audT0.Add(time.Duration(i) * time.Hour)
				}
				m := e.at(s1, "real", fmt.Sprint(i), due)
				keys = append(keys, m.Properties[schedule.PropUniqKey])
			}
			require.NoError(t, s1.Cancel(keys[15]))
			e.clk.Advance(time.Minute)
			e.waitCount("real", 10)
			e.sync(s1)
			require.NoError(t, s1.Stop())

			idx := e.opts.ProgressPath + ".timers"
			switch damage {
			case "delete":
				require.NoError(t, os.RemoveAll(idx))
			default:
				n := 0
				require.NoError(t, filepath.WalkDir(idx, func(p string, d os.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					n++
					if damage == "garbage" {
						return os.WriteFile(p, []byte("not an index file at all"), 0o644)
					}
					return os.Truncate(p, 3)
				}))
				require.NotZero(t, n, "the index has files to damage")
			}

			s2 := e.started()
			assert.ErrorIs(t, s2.Cancel(keys[0]), schedule.ErrDelivered)
			assert.ErrorIs(t, s2.Cancel(keys[15]), schedule.ErrCancelled)
			e.clk.Advance(30 * time.Hour)
			e.waitCount("real", 19)
			e.sync(s2)
			seen := map[string]int{}
			for _, b := range e.bodies("real") {
				seen[b]++
			}
			for i := 0; i < 20; i++ {
				want := 1
				if i == 15 {
					want = 0
				}
				assert.Equal(t, want, seen[fmt.Sprint(i)], "timer %d", i)
			}
		})
	}
}

// A timer is delivered as the producer sent it: its queue, tags, keys,
// body, born time, reconsume count and own properties.
func TestAuditTimerRestoresMessage(t *testing.T) {
	e := audNewEnv(t)
	s := e.started()
	born := audT0.Add(-time.Minute)
	orig := &store.Message{Topic: "real", QueueID: 3, Tags: "TagA", Keys: []string{"k1", "k2"}, Body: []byte("body"),
		Properties: map[string]string{"app": "v", schedule.PropUniqKey: "u-1"}, BornAt: born, ReconsumeTimes: 2}
	m, err := s.At(orig, audT0.Add(time.Second))
	require.NoError(t, err)
	require.NoError(t, e.st.Append(m))
	e.clk.Advance(time.Second)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 3) == 1 }, 10*time.Second, time.Millisecond)
	ms, err := e.st.Read("real", 3, 0, 1)
	require.NoError(t, err)
	got := ms[0]
	assert.Equal(t, "TagA", got.Tags)
	assert.Equal(t, []string{"k1", "k2"}, got.Keys)
	assert.Equal(t, "body", string(got.Body))
	assert.Equal(t, map[string]string{"app": "v", schedule.PropUniqKey: "u-1"}, got.Properties)
	assert.True(t, got.BornAt.Equal(born))
	assert.Equal(t, 2, got.ReconsumeTimes)
	assert.Zero(t, e.st.MaxOffset("real", 0))
}
