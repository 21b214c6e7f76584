package schedule_test

// Black-box acceptance tests of the schedule contract in
// shared/ARCHITECTURE.md ("Conventions every package follows" and
// "schedule"), written from the contract and the godoc only. One test per
// contract sentence or bullet; each test names the failure it rules out.
// Time is a fake clock injected through Options.Now (and the store's
// Options.Now, which stamps StoredAt); nothing sleeps for an expiry.

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// logBuffer is a slog sink safe for concurrent use.
type logBuffer = testkit.LogBuffer

// fakeClock is an injectable Options.Now that counts its readings, so a
// test can wait until the scheduler has re-checked due times.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	reads atomic.Int64
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.reads.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// waitReads waits until the scheduler has read the clock n more times
// (re-checked due times), bounded by a real-time safety net.
func (c *fakeClock) waitReads(t *testing.T, n int64) {
	t.Helper()
	target := c.reads.Load() + n
	require.Eventually(t, func() bool { return c.reads.Load() >= target }, 5*time.Second, time.Millisecond,
		"the scheduler stopped reading Options.Now")
}

const tick = 2 * time.Millisecond

type env struct {
	clk *fakeClock
	st  *store.Store
	dir string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := newFakeClock()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "log"), store.Options{Sync: store.SyncNone, Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return &env{clk: clk, st: st, dir: dir}
}

func (e *env) opts() schedule.Options {
	return schedule.Options{Now: e.clk.Now, Tick: tick}
}

func newSched(t *testing.T, log schedule.Log, opts schedule.Options) *schedule.Scheduler {
	t.Helper()
	s, err := schedule.New(log, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// produce delays m by level and appends it to the log, as a host does.
func produce(t *testing.T, s *schedule.Scheduler, log schedule.Log, m *store.Message, level int) *store.Message {
	t.Helper()
	d, err := s.Delay(m, level)
	require.NoError(t, err)
	require.NoError(t, log.Append(d))
	return d
}

func readAll(t *testing.T, st *store.Store, topic string, q int) []*store.Message {
	t.Helper()
	var out []*store.Message
	off := st.MinOffset(topic, q)
	for {
		got, err := st.Read(topic, q, off, 1000)
		require.NoError(t, err)
		if len(got) == 0 {
			return out
		}
		out = append(out, got...)
		off = got[len(got)-1].QueueOffset + 1
	}
}

func bodies(ms []*store.Message) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	return out
}

// --- constants and conventions ----------------------------------------------

func TestAcceptScheduleConstantsAreTheContractValues(t *testing.T) {
	assert.Equal(t, "SCHEDULE_TOPIC_XXXX", schedule.Topic)
	assert.Equal(t, "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", schedule.DefaultLevels)
}

func TestAcceptScheduleZeroOptionsIsAWorkingDefault(t *testing.T) {
	e := newEnv(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the store's own goroutines are not the scheduler's
	s, err := schedule.New(e.st, schedule.Options{})
	require.NoError(t, err)
	d, err := s.Delay(&store.Message{Topic: "real", Body: []byte("x")}, 18)
	require.NoError(t, err)
	assert.Equal(t, schedule.Topic, d.Topic)
	assert.Equal(t, 17, d.QueueID, "18 default levels: level 18 lives in queue 17")
	d, err = s.Delay(&store.Message{Topic: "real", Body: []byte("x")}, 19)
	require.NoError(t, err)
	assert.Equal(t, 17, d.QueueID, "the default has exactly 18 levels")
	require.NoError(t, s.Start())
	require.NoError(t, s.Stop())
}

func TestAcceptScheduleZeroTickDefaultsTo100msAndUsesInjectedClock(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, schedule.Options{Now: e.clk.Now}) // Tick 0 = 100 ms
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("a")}, 1)
	require.NoError(t, s.Start())
	e.clk.Advance(time.Second + time.Millisecond)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 1 }, 3*time.Second, 5*time.Millisecond,
		"delivered within a few default ticks of moving the injected clock")
}

func TestAcceptScheduleNewRejectsBadInputWithErrInvalid(t *testing.T) {
	e := newEnv(t)
	_, err := schedule.New(nil, schedule.Options{})
	assert.ErrorIs(t, err, schedule.ErrInvalid, "nil log")
	for _, lv := range []string{"abc", "1s x", "0s", "-1s", "1q", "1.5s"} {
		_, err := schedule.New(e.st, schedule.Options{Levels: lv})
		assert.ErrorIs(t, err, schedule.ErrInvalid, "levels %q", lv)
	}
	_, err = schedule.New(e.st, schedule.Options{Tick: -time.Second})
	assert.ErrorIs(t, err, schedule.ErrInvalid, "negative tick")
}

func TestAcceptScheduleLevelsParseUnits(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, schedule.Options{Levels: "1s 2m 3h 1d"})
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Minute, 3 * time.Hour, 24 * time.Hour}, s.Levels())
}

func TestAcceptScheduleStatsIsAPlainStructOfCounters(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, e.opts())
	before := s.Stats()
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("a")}, 1)
	require.NoError(t, s.Start())
	e.clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return s.Stats().Delivered == before.Delivered+1 }, 5*time.Second, time.Millisecond)
	assert.True(t, s.Stats().Running)
	require.NoError(t, s.Stop())
	assert.False(t, s.Stats().Running)
}

func TestAcceptScheduleStartStopAreIdempotentAndLeaveNoGoroutines(t *testing.T) {
	e := newEnv(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the store's own goroutines are not the scheduler's
	s, err := schedule.New(e.st, e.opts())
	require.NoError(t, err)
	require.NoError(t, s.Stop(), "stop before any start")
	require.NoError(t, s.Start())
	require.NoError(t, s.Start(), "start while started")
	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "stop while stopped")
	require.NoError(t, s.Start(), "restart after stop")
	require.NoError(t, s.Stop())
}

// --- Delay -------------------------------------------------------------------

func TestAcceptDelayRewritesForTheScheduleTopicAndKeepsRealTopicQueueLevel(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, e.opts())
	born := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &store.Message{
		Topic: "orders", QueueID: 7, Tags: "tg", Keys: []string{"k1"}, Body: []byte("body"),
		Properties: map[string]string{"user": "v"}, BornAt: born, ReconsumeTimes: 2,
	}
	d, err := s.Delay(m, 3)
	require.NoError(t, err)
	assert.Equal(t, schedule.Topic, d.Topic)
	assert.Equal(t, 2, d.QueueID, "level L lives in queue L-1")
	assert.Equal(t, "orders", d.Properties[schedule.PropRealTopic])
	assert.Equal(t, "7", d.Properties[schedule.PropRealQueue])
	assert.Equal(t, "3", d.Properties[schedule.PropDelayLevel])
	assert.Equal(t, "v", d.Properties["user"])
	assert.Equal(t, []byte("body"), d.Body)

	// m is untouched.
	assert.Equal(t, "orders", m.Topic)
	assert.Equal(t, 7, m.QueueID)
	assert.Equal(t, map[string]string{"user": "v"}, m.Properties)
	// The copy is the caller's own: changing it does not reach m.
	d.Body[0] = 'X'
	d.Keys[0] = "changed"
	assert.Equal(t, []byte("body"), m.Body)
	assert.Equal(t, []string{"k1"}, m.Keys)
}

func TestAcceptDelayClampsALevelAboveTheMaximum(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, schedule.Options{Levels: "1s 2s 3s", Now: e.clk.Now, Tick: tick})
	for _, lv := range []int{3, 4, 100, 1 << 30} {
		d, err := s.Delay(&store.Message{Topic: "real", Body: []byte("x")}, lv)
		require.NoError(t, err, "level %d", lv)
		assert.Equal(t, 2, d.QueueID, "level %d clamped to 3", lv)
		assert.Equal(t, "3", d.Properties[schedule.PropDelayLevel])
	}
	// A clamped message is delivered after the top level's delay, not before.
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("clamped")}, 99)
	require.NoError(t, s.Start())
	e.clk.Advance(3*time.Second - time.Millisecond)
	e.clk.waitReads(t, 20)
	assert.Equal(t, int64(0), e.st.MaxOffset("real", 0))
	e.clk.Advance(2 * time.Millisecond)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 1 }, 5*time.Second, time.Millisecond)
}

func TestAcceptDelayBadInputIsErrInvalidAndChangesNothing(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, e.opts())
	m := &store.Message{Topic: "real", QueueID: 1, Body: []byte("x"), Properties: map[string]string{"a": "b"}}
	for _, lv := range []int{0, -1, -1 << 30} {
		d, err := s.Delay(m, lv)
		assert.ErrorIs(t, err, schedule.ErrInvalid, "level %d", lv)
		assert.Nil(t, d)
	}
	assert.Equal(t, &store.Message{Topic: "real", QueueID: 1, Body: []byte("x"), Properties: map[string]string{"a": "b"}}, m)
	d, err := s.Delay(nil, 1)
	assert.ErrorIs(t, err, schedule.ErrInvalid, "nil message")
	assert.Nil(t, d)
	// A message that could never be delivered back is refused up front
	// (otherwise its level would retry an impossible append forever).
	for name, bad := range map[string]*store.Message{
		"empty topic":    {Body: []byte("x")},
		"negative queue": {Topic: "real", QueueID: -1, Body: []byte("x")},
	} {
		d, err := s.Delay(bad, 1)
		assert.ErrorIs(t, err, schedule.ErrInvalid, name)
		assert.Nil(t, d, name)
	}
	assert.NotPanics(t, func() { _, _ = s.Delay(&store.Message{}, 1) })
}

func TestAcceptRejectedDelayIsLoggedWithItsKeys(t *testing.T) {
	e := newEnv(t)
	var lb logBuffer
	opts := e.opts()
	// An error returned to the caller is logged at DEBUG (issue 14).
	opts.Logger = slog.New(slog.NewTextHandler(&lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := newSched(t, e.st, opts)
	_, err := s.Delay(&store.Message{Topic: "rejected-topic", Body: []byte("x")}, 0)
	require.ErrorIs(t, err, schedule.ErrInvalid)
	assert.Contains(t, lb.String(), "rejected-topic", "a rejected request is logged with its keys")
}

func TestAcceptMalformedRecordInTheScheduleTopicDoesNotWedgeItsLevel(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, schedule.Options{Levels: "1s", Now: e.clk.Now, Tick: tick})
	// A record appended to the schedule topic by hand, without Delay.
	require.NoError(t, e.st.Append(&store.Message{Topic: schedule.Topic, QueueID: 0, Body: []byte("junk")}))
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("good")}, 1)
	require.NoError(t, s.Start())
	e.clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Stop())
	assert.Equal(t, int64(2), s.Progress()[1])
}

func TestAcceptDeliveredExactlyAtStoredAtPlusLevel(t *testing.T) {
	// "once StoredAt + level has passed": the implementation (like RocketMQ,
	// which delivers when deliverTimestamp <= now) treats reaching the due
	// time as passed; 1ns earlier is never.
	e := newEnv(t)
	s := newSched(t, e.st, schedule.Options{Levels: "1s", Now: e.clk.Now, Tick: tick})
	d := produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("a")}, 1)
	require.NoError(t, s.Start())
	e.clk.Set(d.StoredAt.Add(time.Second - time.Nanosecond))
	e.clk.waitReads(t, 20)
	assert.Equal(t, int64(0), e.st.MaxOffset("real", 0))
	e.clk.Set(d.StoredAt.Add(time.Second))
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 1 }, 5*time.Second, time.Millisecond)
}

// --- delivery ------------------------------------------------------------------

func TestAcceptDeliveryRestoresTheMessageIncludingUniqKey(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, e.opts())
	born := time.Date(2025, 6, 7, 8, 9, 10, 11, time.UTC)
	m := &store.Message{
		Topic: "orders", QueueID: 4, Tags: "tagA", Keys: []string{"k1", "k2"}, Body: []byte("payload"),
		Properties:     map[string]string{"UNIQ_KEY": "uniq-123", "user": "v"},
		BornAt:         born,
		ReconsumeTimes: 3,
	}
	produce(t, s, e.st, m, 2) // 5s
	require.NoError(t, s.Start())
	e.clk.Advance(6 * time.Second)
	require.Eventually(t, func() bool { return e.st.MaxOffset("orders", 4) == 1 }, 5*time.Second, time.Millisecond)
	got := readAll(t, e.st, "orders", 4)
	require.Len(t, got, 1)
	r := got[0]
	assert.Equal(t, "orders", r.Topic)
	assert.Equal(t, 4, r.QueueID)
	assert.Equal(t, "tagA", r.Tags)
	assert.Equal(t, []string{"k1", "k2"}, r.Keys)
	assert.Equal(t, []byte("payload"), r.Body)
	assert.Equal(t, map[string]string{"UNIQ_KEY": "uniq-123", "user": "v"}, r.Properties,
		"all properties restored, scheduling properties removed")
	assert.True(t, born.Equal(r.BornAt), "BornAt %v", r.BornAt)
	assert.Equal(t, 3, r.ReconsumeTimes)
}

func TestAcceptDeliveryNeverBeforeStoredAtPlusLevel(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, schedule.Options{Levels: "1s 5s 10s 1m", Now: e.clk.Now, Tick: tick})
	t0 := e.clk.Now()
	delays := []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, time.Minute}
	for lv := 1; lv <= 4; lv++ {
		produce(t, s, e.st, &store.Message{Topic: "real", QueueID: lv, Body: []byte(strconv.Itoa(lv))}, lv)
	}
	require.NoError(t, s.Start())
	for lv := 1; lv <= 4; lv++ {
		due := t0.Add(delays[lv-1])
		e.clk.Set(due.Add(-time.Nanosecond))
		e.clk.waitReads(t, 40) // every level re-checked several times
		for q := lv; q <= 4; q++ {
			assert.Equal(t, int64(0), e.st.MaxOffset("real", q), "level %d delivered before due (clock at level %d's due-1ns)", q, lv)
		}
		e.clk.Set(due.Add(time.Millisecond))
		require.Eventually(t, func() bool { return e.st.MaxOffset("real", lv) == 1 }, 5*time.Second, time.Millisecond,
			"level %d not delivered once due", lv)
	}
}

func TestAcceptDueTimeCountsFromStoredAtNotFromDelay(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, schedule.Options{Levels: "10s", Now: e.clk.Now, Tick: tick})
	d, err := s.Delay(&store.Message{Topic: "real", Body: []byte("late")}, 1)
	require.NoError(t, err)
	e.clk.Advance(8 * time.Second) // the host appends it late
	require.NoError(t, e.st.Append(d))
	require.NoError(t, s.Start())
	e.clk.Advance(5 * time.Second) // 13 s after Delay, 5 s after StoredAt
	e.clk.waitReads(t, 20)
	assert.Equal(t, int64(0), e.st.MaxOffset("real", 0), "due is StoredAt + level")
	e.clk.Advance(5*time.Second + time.Millisecond)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 1 }, 5*time.Second, time.Millisecond)
}

func TestAcceptDeliveryKeepsOrderWithinALevel(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, schedule.Options{Levels: "1s", Now: e.clk.Now, Tick: tick, MaxBatch: 3})
	var want []string
	for i := 0; i < 10; i++ {
		produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte(strconv.Itoa(i))}, 1)
		want = append(want, strconv.Itoa(i))
		e.clk.Advance(100 * time.Millisecond)
	}
	require.NoError(t, s.Start())
	e.clk.Advance(time.Hour)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 10 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, want, bodies(readAll(t, e.st, "real", 0)))
}

func TestAcceptTickRechecksDueTimesWhileStarted(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, e.opts())
	require.NoError(t, s.Start())
	// Nothing due and nothing in the queue: the loops still read the clock.
	e.clk.waitReads(t, 18*3)
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("a")}, 1)
	e.clk.Advance(1100 * time.Millisecond)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Stop())
	// Stopped: no more due checks and no more deliveries.
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("b")}, 1)
	e.clk.Advance(time.Hour)
	reads := e.clk.reads.Load()
	// A loop has returned once Stop returns (Stop waits for its deferred
	// wg.Done); its goroutine may still be on its way out of the frame.
	require.Eventually(t, func() bool { return !goroutineIn("schedule.(*Scheduler).loop") }, 5*time.Second, time.Millisecond,
		"a delivery loop still running after Stop")
	assert.Equal(t, int64(1), e.st.MaxOffset("real", 0), "a stopped scheduler delivers nothing")
	assert.LessOrEqual(t, e.clk.reads.Load()-reads, int64(0), "a stopped scheduler reads no clock")
}

// --- Progress ----------------------------------------------------------------------

func TestAcceptProgressIsLevelToNextOffsetToDeliver(t *testing.T) {
	e := newEnv(t)
	s := newSched(t, e.st, e.opts())
	assert.Len(t, s.Progress(), 18, "every level, from the start")
	for k, v := range s.Progress() {
		assert.GreaterOrEqual(t, k, 1, "keys are levels (1-based)")
		assert.LessOrEqual(t, k, 18)
		assert.Equal(t, int64(0), v)
	}
	for i := 0; i < 3; i++ {
		produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte(strconv.Itoa(i))}, 2)
	}
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("later")}, 3)
	require.NoError(t, s.Start())
	e.clk.Advance(6 * time.Second) // level 2 (5s) due, level 3 (10s) not
	require.Eventually(t, func() bool { return s.Progress()[2] == 3 }, 5*time.Second, time.Millisecond)
	p := s.Progress()
	assert.Equal(t, int64(3), p[2], "level 2 -> next offset 3")
	assert.Equal(t, int64(0), p[3], "level 3 has delivered nothing yet")
	assert.Equal(t, int64(0), p[1])
	_, hasZero := p[0]
	assert.False(t, hasZero, "keys are levels, not queue ids")
	// The returned map is a snapshot the caller owns.
	p[2] = 99
	assert.Equal(t, int64(3), s.Progress()[2])
}

func TestAcceptProgressPersistsSoARestartNeitherLosesNorRepeats(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.dir, "progress")
	opts := e.opts()
	opts.ProgressPath = path
	s1 := newSched(t, e.st, opts)
	for i := 0; i < 5; i++ {
		produce(t, s1, e.st, &store.Message{Topic: "real", Body: []byte(fmt.Sprintf("first-%d", i))}, 1)
	}
	require.NoError(t, s1.Start())
	e.clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 5 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s1.Stop())
	want := s1.Progress()
	assert.Equal(t, int64(5), want[1])
	assert.FileExists(t, path)

	// Messages delayed while no scheduler runs.
	for i := 0; i < 3; i++ {
		produce(t, s1, e.st, &store.Message{Topic: "real", Body: []byte(fmt.Sprintf("second-%d", i))}, 1)
	}
	s2 := newSched(t, e.st, opts)
	assert.Equal(t, int64(5), s2.Progress()[1], "progress loaded by New")
	require.NoError(t, s2.Start())
	e.clk.Advance(time.Hour)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) >= 8 }, 5*time.Second, time.Millisecond)
	e.clk.waitReads(t, 40)
	require.NoError(t, s2.Stop())
	got := bodies(readAll(t, e.st, "real", 0))
	assert.Equal(t, []string{"first-0", "first-1", "first-2", "first-3", "first-4", "second-0", "second-1", "second-2"}, got)
}

func TestAcceptProgressFileIsReplacedAtomicallyAndNeverLeftHalfWritten(t *testing.T) {
	e := newEnv(t)
	pdir := filepath.Join(e.dir, "p")
	require.NoError(t, os.MkdirAll(pdir, 0o755))
	path := filepath.Join(pdir, "progress")
	opts := e.opts()
	opts.ProgressPath = path
	s := newSched(t, e.st, opts)
	require.NoError(t, s.Start())
	for i := 0; i < 20; i++ {
		produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte(strconv.Itoa(i))}, 1+i%3)
		e.clk.Advance(3 * time.Second)
	}
	e.clk.Advance(time.Hour)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 20 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Stop())
	entries, err := os.ReadDir(pdir)
	require.NoError(t, err)
	var names []string
	for _, de := range entries {
		names = append(names, de.Name())
	}
	assert.Equal(t, []string{"progress"}, names, "no temp files left behind")
	s2 := newSched(t, e.st, opts)
	assert.Equal(t, s.Progress(), s2.Progress())
}

func TestAcceptCorruptProgressFileIsAnErrorNeverSilentlyZero(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.dir, "progress")
	opts := e.opts()
	opts.ProgressPath = path
	s := newSched(t, e.st, opts)
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("a")}, 1)
	require.NoError(t, s.Start())
	e.clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return s.Progress()[1] == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Stop())
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEmpty(t, good)
	for name, bad := range map[string][]byte{
		"torn":    good[:len(good)/2],
		"garbage": []byte("\x00\xffnot a progress file"),
		"flipped": func() []byte { b := append([]byte(nil), good...); b[len(b)-1] ^= 0x5a; return b }(),
	} {
		require.NoError(t, os.WriteFile(path, bad, 0o644))
		s2, err := schedule.New(e.st, opts)
		if err == nil {
			// Refusing at Start is acceptable too, but never a silent zero.
			err = s2.Start()
			_ = s2.Stop()
			if err == nil {
				assert.NotEqual(t, int64(0), s2.Progress()[1], "%s progress file read as zero", name)
				continue
			}
		}
		assert.ErrorIs(t, err, schedule.ErrCorrupt, name)
	}
}

// --- Stop, generations and exactly once ---------------------------------------------

// gateLog blocks Append to the real topic while gated.
type gateLog struct {
	*store.Store
	mu      sync.Mutex
	gate    chan struct{} // nil = open
	entered chan struct{}
	fail    atomic.Int64 // fail this many real-topic appends first
	appends atomic.Int64
}

func (g *gateLog) Append(msgs ...*store.Message) error {
	if len(msgs) > 0 && msgs[0].Topic != schedule.Topic {
		g.appends.Add(1)
		if g.fail.Load() > 0 {
			g.fail.Add(-1)
			return errors.New("injected append failure")
		}
		g.mu.Lock()
		gate, entered := g.gate, g.entered
		g.mu.Unlock()
		if gate != nil {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-gate
		}
	}
	return g.Store.Append(msgs...)
}

func (g *gateLog) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func newGateLog(st *store.Store) *gateLog {
	return &gateLog{Store: st, gate: make(chan struct{}), entered: make(chan struct{}, 1)}
}

func TestAcceptStopWaitsForTheInFlightDeliveryAndRecordsItsProgress(t *testing.T) {
	e := newEnv(t)
	g := newGateLog(e.st)
	s := newSched(t, g, e.opts())
	for i := 0; i < 4; i++ {
		produce(t, s, g, &store.Message{Topic: "real", Body: []byte(strconv.Itoa(i))}, 1)
	}
	require.NoError(t, s.Start())
	e.clk.Advance(2 * time.Second)
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery started")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop() }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a delivery of its generation was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	g.close()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return after the delivery finished")
	}
	delivered := e.st.MaxOffset("real", 0)
	assert.Equal(t, int64(4), delivered, "the in-flight batch completed")
	assert.Equal(t, delivered, s.Progress()[1], "its progress is recorded when Stop returns")
}

func TestAcceptZombieDeliveryOfAnOldGenerationCannotDeliverTwice(t *testing.T) {
	// The field report: a delivery blocked mid-append, Stop then Start from
	// another goroutine (a leader flap), then the append is released.
	e := newEnv(t)
	g := newGateLog(e.st)
	s := newSched(t, g, e.opts())
	const n = 6
	for i := 0; i < n; i++ {
		produce(t, s, g, &store.Message{Topic: "real", Body: []byte(strconv.Itoa(i))}, 2)
	}
	require.NoError(t, s.Start())
	e.clk.Advance(10 * time.Second)
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery started")
	}
	flapped := make(chan struct{})
	go func() {
		defer close(flapped)
		assert.NoError(t, s.Stop())
		assert.NoError(t, s.Start())
	}()
	// Let the flap get going: Stop is then fencing the in-flight append
	// (or, were it broken, already through).
	require.Eventually(t, func() bool {
		return goroutineIn("schedule.(*Scheduler).Stop")
	}, 5*time.Second, time.Millisecond)
	g.close()
	<-flapped
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) >= n }, 5*time.Second, time.Millisecond)
	e.clk.Advance(time.Hour)
	e.clk.waitReads(t, 18*5)
	require.NoError(t, s.Stop())
	got := bodies(readAll(t, e.st, "real", 0))
	assert.Equal(t, []string{"0", "1", "2", "3", "4", "5"}, got, "each delayed message exactly once")
	assert.Equal(t, int64(n), s.Progress()[2])
}

func TestAcceptAnyInterleavingOfStartStopDeliversEachMessageExactlyOnce(t *testing.T) {
	t.Run("progress file", func(t *testing.T) { testInterleaving(t, true) })
	t.Run("memory only", func(t *testing.T) { testInterleaving(t, false) })
}

func testInterleaving(t *testing.T, withFile bool) {
	e := newEnv(t)
	path := ""
	if withFile {
		path = filepath.Join(e.dir, "progress")
	}
	opts := schedule.Options{Levels: "1s 2s 3s 4s", Now: e.clk.Now, Tick: time.Millisecond, ProgressPath: path, MaxBatch: 4}
	s := newSched(t, e.st, opts)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 120
	for i := 0; i < n; i++ {
		produce(t, s, e.st, &store.Message{Topic: "real", QueueID: i % 3, Body: []byte(strconv.Itoa(i))}, 1+rng.IntN(4))
		if i%10 == 0 {
			e.clk.Advance(500 * time.Millisecond)
		}
	}
	stopReaders := testkit.Repeat(func() { // readers of Progress and Stats run alongside (race-clean)
		_ = s.Progress()
		_ = s.Stats()
		runtime.Gosched()
	})
	var fw sync.WaitGroup
	for w := 0; w < 4; w++ {
		fw.Add(1)
		go func() {
			defer fw.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for i := 0; i < 40; i++ {
				if r.IntN(2) == 0 {
					assert.NoError(t, s.Start())
				} else {
					assert.NoError(t, s.Stop())
				}
				e.clk.Advance(time.Duration(r.IntN(300)) * time.Millisecond)
				for range r.IntN(50) {
					runtime.Gosched()
				}
			}
		}()
	}
	fw.Wait()
	stopReaders()
	require.NoError(t, s.Start())
	e.clk.Advance(time.Hour)
	total := func() int64 {
		return e.st.MaxOffset("real", 0) + e.st.MaxOffset("real", 1) + e.st.MaxOffset("real", 2)
	}
	require.Eventually(t, func() bool { return total() >= n }, 5*time.Second, time.Millisecond)
	e.clk.waitReads(t, 40)
	require.NoError(t, s.Stop())
	seen := map[string]int{}
	for q := 0; q < 3; q++ {
		for _, m := range readAll(t, e.st, "real", q) {
			seen[string(m.Body)]++
			assert.Equal(t, q, m.QueueID)
		}
	}
	assert.Len(t, seen, n)
	for b, c := range seen {
		assert.Equal(t, 1, c, "message %s delivered %d times", b, c)
	}
}

func TestAcceptACrashRepeatsAtMostTheInFlightBatchWithItsUniqKey(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.dir, "progress")
	opts := schedule.Options{Levels: "1s", Now: e.clk.Now, Tick: tick, ProgressPath: path}
	s := newSched(t, e.st, opts)
	// First batch delivered and recorded.
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("a")}, 1)
	require.NoError(t, s.Start())
	e.clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return s.Progress()[1] == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Stop())
	saved, err := os.ReadFile(path) // the file as it was before the "in-flight" batch
	require.NoError(t, err)

	// Second batch: one with a producer's UNIQ_KEY, one without.
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("b"), Properties: map[string]string{"UNIQ_KEY": "mine"}}, 1)
	produce(t, s, e.st, &store.Message{Topic: "real", Body: []byte("c")}, 1)
	require.NoError(t, s.Start())
	e.clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return s.Progress()[1] == 3 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Stop())

	// Crash before the progress write of that batch: the old file is back.
	require.NoError(t, os.WriteFile(path, saved, 0o644))
	s2 := newSched(t, e.st, opts)
	require.NoError(t, s2.Start())
	e.clk.Advance(time.Hour)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 5 }, 5*time.Second, time.Millisecond)
	e.clk.waitReads(t, 20)
	require.NoError(t, s2.Stop())

	got := readAll(t, e.st, "real", 0)
	require.Equal(t, []string{"a", "b", "c", "b", "c"}, bodies(got), "only the in-flight batch again")
	assert.Equal(t, "mine", got[1].Properties["UNIQ_KEY"])
	assert.Equal(t, "mine", got[3].Properties["UNIQ_KEY"])
	assert.NotEmpty(t, got[2].Properties["UNIQ_KEY"], "Delay gives a message without one a UNIQ_KEY")
	assert.Equal(t, got[2].Properties["UNIQ_KEY"], got[4].Properties["UNIQ_KEY"], "the duplicate is recognisable")
	assert.NotEqual(t, got[0].Properties["UNIQ_KEY"], got[2].Properties["UNIQ_KEY"])
}

func TestAcceptAFailedAppendIsRetriedFromTheSameOffsetNeverSkipped(t *testing.T) {
	e := newEnv(t)
	g := newGateLog(e.st)
	g.close() // no gate, only failures
	g.fail.Store(3)
	s := newSched(t, g, schedule.Options{Levels: "1s", Now: e.clk.Now, Tick: time.Millisecond})
	for i := 0; i < 3; i++ {
		produce(t, s, g, &store.Message{Topic: "real", Body: []byte(strconv.Itoa(i))}, 1)
	}
	require.NoError(t, s.Start())
	e.clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return e.st.MaxOffset("real", 0) == 3 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Stop())
	assert.Equal(t, []string{"0", "1", "2"}, bodies(readAll(t, e.st, "real", 0)))
	assert.Equal(t, int64(3), s.Progress()[1])
	assert.GreaterOrEqual(t, g.appends.Load(), int64(4), "the failures were retried")
	assert.GreaterOrEqual(t, s.Stats().Retried, uint64(3))
}

// retainedLog is a Log whose MinOffset of the schedule queues has moved up
// (retention dropped the head of the queue).
type retainedLog struct {
	*store.Store
	min int64
}

func (r *retainedLog) MinOffset(topic string, q int) int64 {
	if topic == schedule.Topic {
		return max(r.min, r.Store.MinOffset(topic, q))
	}
	return r.Store.MinOffset(topic, q)
}

func (r *retainedLog) Read(topic string, q int, off int64, n int) ([]*store.Message, error) {
	if topic == schedule.Topic && off < r.min {
		return nil, fmt.Errorf("offset %d below %d: %w", off, r.min, store.ErrOffsetTooSmall)
	}
	return r.Store.Read(topic, q, off, n)
}

func TestAcceptRetentionMovingMinOffsetIsSkippedAndLoggedNotAWedge(t *testing.T) {
	e := newEnv(t)
	r := &retainedLog{Store: e.st}
	var lb logBuffer
	s := newSched(t, r, schedule.Options{Levels: "1s", Now: e.clk.Now, Tick: tick, Logger: slog.New(slog.NewTextHandler(&lb, nil))})
	for i := 0; i < 5; i++ {
		produce(t, s, r, &store.Message{Topic: "real", Body: []byte(strconv.Itoa(i))}, 1)
	}
	r.min = 2 // retention took offsets 0 and 1 before delivery
	require.NoError(t, s.Start())
	e.clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return s.Progress()[1] == 5 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Stop())
	assert.Equal(t, []string{"2", "3", "4"}, bodies(readAll(t, e.st, "real", 0)))
	assert.Contains(t, lb.String(), "level=WARN", "what retention took is logged as a warning")
	assert.Equal(t, uint64(2), s.Stats().Skipped)
}

func TestAcceptStopDoesNotWaitOutARetryBackoff(t *testing.T) {
	e := newEnv(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := newGateLog(e.st)
	g.close()
	g.fail.Store(1 << 40) // the real topic never takes the append
	s, err := schedule.New(g, schedule.Options{Levels: "1s", Now: e.clk.Now, Tick: 20 * time.Millisecond})
	require.NoError(t, err)
	produce(t, s, g, &store.Message{Topic: "real", Body: []byte("a")}, 1)
	require.NoError(t, s.Start())
	e.clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return s.Stats().Retried >= 3 }, 5*time.Second, time.Millisecond)
	begin := time.Now()
	require.NoError(t, s.Stop())
	assert.Less(t, time.Since(begin), time.Second, "Stop ends a backoff at once")
	assert.Equal(t, int64(0), s.Progress()[1], "progress never passes an undelivered message")
}

func TestAcceptRestartOfTheWholeHostNeitherLosesNorRepeats(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	logDir, path := filepath.Join(dir, "log"), filepath.Join(dir, "progress")
	sopts := store.Options{Now: clk.Now}
	opts := schedule.Options{Levels: "1s 5s", Now: clk.Now, Tick: tick, ProgressPath: path}
	var want []string
	for round := 0; round < 3; round++ {
		st, err := store.Open(logDir, sopts)
		require.NoError(t, err)
		s, err := schedule.New(st, opts)
		require.NoError(t, err)
		for i := 0; i < 4; i++ {
			b := fmt.Sprintf("r%d-%d", round, i)
			produce(t, s, st, &store.Message{Topic: "real", Body: []byte(b)}, 1+i%2)
			want = append(want, b)
		}
		require.NoError(t, s.Start())
		clk.Advance(10 * time.Second)
		require.Eventually(t, func() bool { return st.MaxOffset("real", 0) == int64(len(want)) }, 5*time.Second, time.Millisecond)
		clk.waitReads(t, 20)
		require.NoError(t, s.Stop())
		require.NoError(t, st.Close())
	}
	st, err := store.Open(logDir, sopts)
	require.NoError(t, err)
	defer st.Close()
	got := bodies(readAll(t, st, "real", 0))
	assert.ElementsMatch(t, want, got, "every delayed message exactly once across host restarts")
}

// *store.Store satisfies Log, as the contract says.
var _ schedule.Log = (*store.Store)(nil)

// goroutineIn reports whether some goroutine's stack is in fn.
func goroutineIn(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}
