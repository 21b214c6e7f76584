package schedule

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// driver runs the deterministic core by hand: it makes a generation
// current (as Start would, without its goroutines) and steps lanes with a
// time it chooses.
type driver struct {
	s *Scheduler
	g *generation
}

func drive(s *Scheduler) *driver {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.gen++
	g := &generation{n: s.gen, stop: make(chan struct{})}
	s.lockLanes()
	s.cur.Store(g)
	s.unlockLanes()
	return &driver{s: s, g: g}
}

// end ends the hand-driven generation the way Stop does.
func (d *driver) end(t testing.TB) {
	d.s.lifeMu.Lock()
	d.s.lockLanes()
	d.s.cur.CompareAndSwap(d.g, nil)
	d.s.unlockLanes()
	d.s.lifeMu.Unlock()
	require.NoError(t, d.s.timers.flush())
	require.NoError(t, d.s.persist())
}

// timers steps the timer lane at now until it has nothing more to do, as
// the loop would (a failed step is retried, at most 3 times in a row).
func (d *driver) timers(now time.Time) stepResult {
	fails := 0
	for i := 0; i < 100000; i++ {
		r := d.s.timers.step(d.g, now)
		if r.failed {
			if fails++; fails <= 3 {
				continue
			}
		} else {
			fails = 0
		}
		if !r.more && !r.failed || fails > 3 {
			return r
		}
	}
	panic("timer lane never settles")
}

// at schedules body for topic at t and appends it; it returns the UNIQ_KEY.
func at(t testing.TB, s *Scheduler, l Log, topic string, when time.Time) string {
	t.Helper()
	m, err := s.At(&store.Message{Topic: topic, Body: []byte("b")}, when)
	require.NoError(t, err)
	require.NoError(t, l.Append(m))
	return m.Properties[PropUniqKey]
}

func TestAtRewritesForTheTimerTopicWithoutTouchingTheCaller(t *testing.T) {
	s, _, clk := newTestScheduler(t, Options{})
	when := clk.Now().Add(90 * time.Second).Add(500 * time.Microsecond)
	m := &store.Message{Topic: "orders", QueueID: 3, Tags: "tg", Keys: []string{"k"}, Body: []byte("x"),
		Properties: map[string]string{"user": "v"}}
	d, err := s.At(m, when)
	require.NoError(t, err)
	assert.Equal(t, TimerTopic, d.Topic)
	assert.Equal(t, 0, d.QueueID)
	assert.Equal(t, "orders", d.Properties[PropRealTopic])
	assert.Equal(t, "3", d.Properties[PropRealQueue])
	ms := strconv.FormatInt(when.UnixMilli()+1, 10) // rounded up: never before when
	assert.Equal(t, ms, d.Properties[PropTimerDeliverMS])
	assert.Equal(t, ms, d.Properties[PropStartDeliverTime])
	assert.NotEmpty(t, d.Properties[PropUniqKey])
	assert.Equal(t, map[string]string{"user": "v"}, m.Properties, "m untouched")
	d.Body[0] = 'y'
	assert.Equal(t, []byte("x"), m.Body)
	assert.Equal(t, "rmq_sys_wheel_timer", TimerTopic)
}

func TestAtBeyondMaxTimerDelayIsErrInvalidAndTheLimitItselfIsAccepted(t *testing.T) {
	s, _, clk := newTestScheduler(t, Options{})
	m := &store.Message{Topic: "orders", Body: []byte("x")}
	_, err := s.At(m, clk.Now().Add(DefaultMaxTimerDelay))
	require.NoError(t, err, "exactly one year ahead is accepted")
	_, err = s.At(m, clk.Now().Add(DefaultMaxTimerDelay+time.Millisecond))
	require.ErrorIs(t, err, ErrInvalid, "beyond one year")
	s2, _, clk2 := newTestScheduler(t, Options{MaxTimerDelay: time.Hour})
	_, err = s2.At(m, clk2.Now().Add(time.Hour+time.Second))
	require.ErrorIs(t, err, ErrInvalid)
	for name, bad := range map[string]*store.Message{
		"nil": nil, "no topic": {}, "negative queue": {Topic: "a", QueueID: -1},
		"timer topic": {Topic: TimerTopic}, "schedule topic": {Topic: Topic},
	} {
		_, err := s.At(bad, clk.Now())
		require.ErrorIs(t, err, ErrInvalid, name)
	}
	_, err = s.At(m, time.Time{})
	require.ErrorIs(t, err, ErrInvalid, "zero time")
	_, err = New(newFakeLog(time.Now), Options{MaxTimerDelay: -1})
	require.ErrorIs(t, err, ErrInvalid)
}

func TestTimerIsNotDeliveredBeforeItsTimeThenExactlyOnce(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{})
	due := clk.Now().Add(10 * time.Second)
	key := at(t, s, l, "orders", due)
	d := drive(s)
	for _, now := range []time.Time{clk.Now(), due.Add(-time.Millisecond), due.Add(-time.Nanosecond)} {
		d.timers(now)
		require.Empty(t, l.delivered("orders"), "delivered at %v, before %v", now, due)
	}
	d.timers(due)
	require.Equal(t, map[string]int{key: 1}, countByKey(l, "orders"))
	for i := 0; i < 5; i++ {
		d.timers(due.Add(time.Duration(i) * time.Hour))
	}
	require.Equal(t, map[string]int{key: 1}, countByKey(l, "orders"), "once")
	got := l.delivered("orders")[0]
	assert.Equal(t, []byte("b"), got.Body)
	for _, p := range []string{PropRealTopic, PropRealQueue, PropTimerDeliverMS, PropStartDeliverTime} {
		assert.NotContains(t, got.Properties, p)
	}
	d.end(t)
	assert.EqualValues(t, 1, s.Stats().Timers.Delivered)
}

func TestTimerRunsOnItsLoopWithAFakeClockAndASmallTick(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{Tick: time.Millisecond})
	key := at(t, s, l, "orders", clk.Now().Add(time.Minute))
	require.NoError(t, s.Start())
	clk.Advance(time.Minute)
	waitUntil(t, "the timer", func() bool { return len(l.delivered("orders")) == 1 })
	require.NoError(t, s.Stop())
	assert.Equal(t, map[string]int{key: 1}, countByKey(l, "orders"))
}

func TestTimerInThePastIsDeliveredAtOnce(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{})
	key := at(t, s, l, "orders", clk.Now().Add(-time.Hour))
	d := drive(s)
	d.timers(clk.Now())
	d.end(t)
	assert.Equal(t, map[string]int{key: 1}, countByKey(l, "orders"))
}

func TestTimersAreDeliveredInTimeOrderNotAppendOrder(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{MaxBatch: 2})
	t0 := clk.Now()
	var keys []string
	for _, sec := range []int{50, 10, 40, 20, 30} {
		keys = append(keys, at(t, s, l, "orders", t0.Add(time.Duration(sec)*time.Second)))
	}
	d := drive(s)
	d.timers(t0.Add(time.Hour))
	d.end(t)
	var got []string
	for _, m := range l.delivered("orders") {
		got = append(got, m.Properties[PropUniqKey])
	}
	assert.Equal(t, []string{keys[1], keys[3], keys[4], keys[2], keys[0]}, got)
}

func TestARecordAppendedToTheTimerTopicByHandIsScheduledTheSameWay(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{})
	due := clk.Now().Add(time.Minute)
	ms := strconv.FormatInt(due.UnixMilli(), 10)
	require.NoError(t, l.Append(
		&store.Message{Topic: TimerTopic, Body: []byte("a"), Properties: map[string]string{PropRealTopic: "orders", PropTimerDeliverMS: ms, PropUniqKey: "a"}},
		&store.Message{Topic: TimerTopic, Body: []byte("b"), Properties: map[string]string{PropRealTopic: "orders", PropRealQueue: "2", PropStartDeliverTime: ms, PropUniqKey: "b"}},
		&store.Message{Topic: TimerTopic, Body: []byte("junk")}, // no time, no topic: malformed
		&store.Message{Topic: TimerTopic, Body: []byte("far"), Properties: map[string]string{PropRealTopic: "orders",
			PropTimerDeliverMS: strconv.FormatInt(clk.Now().Add(2*DefaultMaxTimerDelay).UnixMilli(), 10)}},
	))
	d := drive(s)
	d.timers(due.Add(-time.Millisecond))
	require.Empty(t, l.delivered("orders"))
	d.timers(due)
	d.end(t)
	assert.Equal(t, map[string]int{"a": 1, "b": 1}, countByKey(l, "orders"))
	for _, m := range l.delivered("orders") {
		if m.Properties[PropUniqKey] == "b" {
			assert.Equal(t, 2, m.QueueID)
		}
	}
	assert.EqualValues(t, 2, s.Stats().Timers.Malformed, "the junk and the one beyond MaxTimerDelay")
}

func TestCancelBeforeDeliveryStopsTheTimerAndSaysSoAfterwards(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{})
	keep := at(t, s, l, "orders", clk.Now().Add(time.Minute))
	gone := at(t, s, l, "orders", clk.Now().Add(time.Minute))
	d := drive(s)
	d.timers(clk.Now()) // indexed
	require.NoError(t, s.Cancel(gone))
	require.ErrorIs(t, s.Cancel(gone), ErrCancelled)
	require.ErrorIs(t, s.Cancel("never-scheduled"), ErrTimerNotFound)
	require.ErrorIs(t, s.Cancel(""), ErrInvalid)
	d.timers(clk.Now().Add(time.Hour))
	assert.Equal(t, map[string]int{keep: 1}, countByKey(l, "orders"))
	require.ErrorIs(t, s.Cancel(keep), ErrDelivered, "cancel after delivery says so")
	d.end(t)
	assert.EqualValues(t, 1, s.Stats().Timers.Cancelled)
}

func TestCancelOfATimerNotIndexedYetWorks(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{})
	key := at(t, s, l, "orders", clk.Now().Add(-time.Second)) // late, never ingested
	require.NoError(t, s.Cancel(key), "cancel works while stopped, before the lane saw the record")
	d := drive(s)
	d.timers(clk.Now().Add(time.Hour))
	d.end(t)
	assert.Empty(t, l.delivered("orders"))
	require.ErrorIs(t, s.Cancel(key), ErrCancelled)
}

// restartCase opens schedulers over one log the way a host restarts: with
// a progress file (and the index beside it), or with zero Options
// (progress in the log, index rebuilt in memory).
func restartCases(t *testing.T) map[string]func() Options {
	dir := t.TempDir()
	return map[string]func() Options{
		"progress file": func() Options { return Options{ProgressPath: filepath.Join(dir, "progress")} },
		"zero options":  func() Options { return Options{} },
	}
}

func TestCancelAndPendingTimersSurviveARestart(t *testing.T) {
	for name, opts := range restartCases(t) {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			l := newFakeLog(clk.Now)
			open := func() *Scheduler {
				o := opts()
				o.Now = clk.Now
				s, err := New(l, o)
				require.NoError(t, err)
				return s
			}
			s := open()
			t0 := clk.Now()
			var keys []string
			for i := 0; i < 20; i++ {
				keys = append(keys, at(t, s, l, "orders", t0.Add(time.Duration(i)*time.Minute)))
			}
			d := drive(s)
			d.timers(t0.Add(5*time.Minute + time.Second)) // 0..5 delivered
			require.NoError(t, s.Cancel(keys[10]))
			d.end(t)
			require.Len(t, l.delivered("orders"), 6)

			s = open() // a new process over the same log
			require.ErrorIs(t, s.Cancel(keys[10]), ErrCancelled, "the cancel survived")
			require.ErrorIs(t, s.Cancel(keys[3]), ErrDelivered)
			d = drive(s)
			d.timers(t0.Add(time.Hour))
			d.end(t)
			c := countByKey(l, "orders")
			for i, k := range keys {
				want := 1
				if i == 10 {
					want = 0
				}
				assert.Equal(t, want, c[k], "timer %d", i)
			}
		})
	}
}

// TestZeroOptionsDoNotDeliverTwiceWhenANewSchedulerStarts is issue 14's
// report: with no ProgressPath a new Scheduler over the same log delivered
// every delayed message still in the log again (two copies).
func TestZeroOptionsDoNotDeliverTwiceWhenANewSchedulerStarts(t *testing.T) {
	clk := newClock()
	l := newFakeLog(clk.Now)
	s, err := New(l, Options{Now: clk.Now, Tick: time.Millisecond})
	require.NoError(t, err)
	keys := produce(t, s, l, "orders", 1, 3)
	require.NoError(t, s.Start())
	clk.Advance(time.Second)
	waitUntil(t, "delivery", func() bool { return len(l.delivered("orders")) == 3 })
	require.NoError(t, s.Stop())

	s2, err := New(l, Options{Now: clk.Now, Tick: time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, int64(3), s2.Progress()[1], "progress found in the log")
	d := drive(s2)
	for _, lv := range s2.lv {
		s2.step(d.g, lv, &cursor{next: lv.next.Load()}, clk.Now().Add(time.Hour))
	}
	d.end(t)
	for _, k := range keys {
		assert.Equal(t, 1, countByKey(l, "orders")[k])
	}
}

func TestDamagedOrMissingIndexIsRebuiltFromTheLogAndTheProgress(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, dir string){
		"missing": func(t *testing.T, dir string) { require.NoError(t, os.RemoveAll(dir)) },
		"flipped byte": func(t *testing.T, dir string) {
			des, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, de := range des {
				if filepath.Ext(de.Name()) == slotExt {
					p := filepath.Join(dir, de.Name())
					b, err := os.ReadFile(p)
					require.NoError(t, err)
					b[len(b)-30] ^= 0x40
					require.NoError(t, os.WriteFile(p, b, 0o644))
				}
			}
		},
		"meta garbage": func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, metaName), []byte("junk"), 0o644))
		},
	} {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			l := newFakeLog(clk.Now)
			path := filepath.Join(t.TempDir(), "progress")
			s, err := New(l, Options{Now: clk.Now, ProgressPath: path})
			require.NoError(t, err)
			t0 := clk.Now()
			var keys []string
			for i := 0; i < 40; i++ {
				keys = append(keys, at(t, s, l, "orders", t0.Add(time.Duration(i)*time.Minute)))
			}
			d := drive(s)
			d.timers(t0.Add(9*time.Minute + time.Second)) // 0..9 delivered
			require.NoError(t, s.Cancel(keys[20]))
			d.end(t)

			damage(t, path+".timers")
			s, err = New(l, Options{Now: clk.Now, ProgressPath: path})
			require.NoError(t, err)
			d = drive(s)
			d.timers(t0.Add(2 * time.Hour))
			d.end(t)
			c := countByKey(l, "orders")
			for i, k := range keys {
				want := 1
				if i == 20 {
					want = 0
				}
				assert.Equal(t, want, c[k], "timer %d", i)
			}
			assert.EqualValues(t, 1, s.Stats().Timers.Rebuilds)
		})
	}
}

func TestRestartReopensTheIndexWithoutReadingPendingTimers(t *testing.T) {
	clk := newClock()
	l := newFakeLog(clk.Now)
	path := filepath.Join(t.TempDir(), "progress")
	s, err := New(l, Options{Now: clk.Now, ProgressPath: path})
	require.NoError(t, err)
	t0 := clk.Now()
	for i := 0; i < 500; i++ {
		at(t, s, l, "orders", t0.Add(time.Duration(i)*7*time.Minute)) // ~58 h: 59 slots
	}
	d := drive(s)
	d.timers(t0)
	d.end(t)
	reads := &countingLog{fakeLog: l}
	s, err = New(reads, Options{Now: clk.Now, ProgressPath: path})
	require.NoError(t, err)
	assert.Zero(t, reads.timerReads, "reopen reads no timer record")
	assert.Zero(t, s.Stats().Timers.Rebuilds)
	d = drive(s)
	d.timers(t0.Add(3 * time.Hour))
	d.end(t)
	assert.Len(t, l.delivered("orders"), 26, "0..180 min: 26 timers")
	assert.LessOrEqual(t, s.Stats().Timers.InWindow, int64(10), "only the current slot is in memory")
}

type countingLog struct {
	*fakeLog
	timerReads int
}

func (c *countingLog) Read(topic string, q int, off int64, n int) ([]*store.Message, error) {
	if topic == TimerTopic {
		c.timerReads++
	}
	return c.fakeLog.Read(topic, q, off, n)
}

// TestALateRecordIsDeliveredOnce covers a record whose time is already
// behind the delivered position when it is indexed (a producer clock
// behind the scheduler's): it is delivered at once, and once.
func TestALateRecordIsDeliveredOnce(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{ProgressPath: filepath.Join(t.TempDir(), "p")})
	t0 := clk.Now()
	at(t, s, l, "orders", t0.Add(time.Minute))
	d := drive(s)
	d.timers(t0.Add(time.Minute)) // done is now at t0+1m
	clk.Set(t0)                   // the log's clock is behind: StoredAt t0
	late := at(t, s, l, "orders", t0.Add(30*time.Second))
	d.timers(t0.Add(time.Minute))
	d.timers(t0.Add(time.Minute))
	d.end(t)
	assert.Equal(t, 1, countByKey(l, "orders")[late])
	assert.Len(t, l.delivered("orders"), 2)
}

func TestAFailedTimerAppendIsRetriedAndNothingIsSkipped(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{})
	key := at(t, s, l, "orders", clk.Now())
	fails := 2
	l.setHook(func([]*store.Message) error {
		if fails > 0 {
			fails--
			return errInjected
		}
		return nil
	})
	d := drive(s)
	for i := 0; i < 3; i++ {
		d.timers(clk.Now())
	}
	d.end(t)
	assert.Equal(t, map[string]int{key: 1}, countByKey(l, "orders"))
	assert.EqualValues(t, 2, s.Stats().Timers.Retried)
}

func TestAStaleGenerationsTimerStepDoesNothing(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{})
	at(t, s, l, "orders", clk.Now())
	d := drive(s)
	d.end(t)
	r := s.timers.step(d.g, clk.Now())
	assert.True(t, r.stale)
	assert.Empty(t, l.delivered("orders"))
	assert.False(t, errors.Is(nil, ErrDelivered))
}

// TestCancelOfALateTimerWhoseAppendFailedStoresOneCancel is the rapid
// model's first find: a late record's delivery failed after its index entry
// was written, so Cancel saw the record twice (index and unindexed tail)
// and stored the cancel twice, a progress record that no longer decoded.
func TestCancelOfALateTimerWhoseAppendFailedStoresOneCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress")
	s, l, clk := newTestScheduler(t, Options{ProgressPath: path})
	t0 := clk.Now()
	at(t, s, l, "orders", t0.Add(time.Minute))
	d := drive(s)
	d.timers(t0.Add(time.Minute)) // done is at t0+1m
	clk.Set(t0)
	late := at(t, s, l, "orders", t0.Add(30*time.Second))
	l.setHook(func([]*store.Message) error { return errInjected })
	d.timers(t0.Add(time.Minute)) // the late batch fails after indexing
	require.NoError(t, s.Cancel(late))
	l.setHook(nil)
	d.timers(t0.Add(time.Hour))
	d.end(t)
	_, err := New(l, Options{Now: clk.Now, ProgressPath: path})
	require.NoError(t, err, "the stored progress decodes")
	assert.Zero(t, countByKey(l, "orders")[late])
	require.ErrorIs(t, s.Cancel(late), ErrCancelled)
}

// TestACancelledTimerStillAnswersCancelledAfterItsTime is the second find:
// once done passed a cancelled timer its cancel was pruned and Cancel
// answered ErrDelivered for a timer never delivered.
func TestACancelledTimerStillAnswersCancelledAfterItsTime(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{ProgressPath: filepath.Join(t.TempDir(), "progress")})
	key := at(t, s, l, "orders", clk.Now().Add(time.Minute))
	other := at(t, s, l, "orders", clk.Now().Add(2*time.Minute))
	require.NoError(t, s.Cancel(key))
	d := drive(s)
	d.timers(clk.Now().Add(time.Hour))
	d.end(t)
	require.ErrorIs(t, s.Cancel(key), ErrCancelled)
	require.ErrorIs(t, s.Cancel(other), ErrDelivered)
	assert.Equal(t, map[string]int{other: 1}, countByKey(l, "orders"))
}
