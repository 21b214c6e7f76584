package schedule

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runLeaderFlap replays the field report (RocketMQ 4.7.1, DLedger): a level-2
// delivery is blocked mid-append (slow disk), the service is stopped and, from
// another goroutine, started again (a leader flap), then the append is
// released. It returns how often each delayed message reached its topic.
func runLeaderFlap(t *testing.T, guardOff bool) map[string]int {
	clk := newClock()
	l := newFakeLog(clk.Now)
	s, err := New(l, Options{Levels: "1s 5s", Now: clk.Now, Tick: time.Millisecond,
		ProgressPath: filepath.Join(t.TempDir(), "progress")})
	require.NoError(t, err)
	s.guardOff = guardOff

	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	l.setHook(func([]*store.Message) error {
		if first { // only loops of level 2 append here, one at a time
			first = false
			close(entered)
			<-release
		}
		return nil
	})

	keys := produce(t, s, l, "orders", 2, 3)
	require.NoError(t, s.Start())
	clk.Advance(5 * time.Second)
	<-entered // the delivery of the first batch is now mid-append

	stopped, started := make(chan error, 1), make(chan error, 1)
	go func() { stopped <- s.Stop() }()
	// Let Stop get going: either it returned (no fence to wait for) or it
	// holds the lifecycle lock while it waits for the in-flight delivery.
	waitUntil(t, "stop to begin", func() bool {
		if len(stopped) > 0 {
			return true
		}
		if s.lifeMu.TryLock() {
			s.lifeMu.Unlock()
			return false
		}
		return true
	})
	go func() { started <- s.Start() }()
	if guardOff {
		// Nothing fences Start in the field report's design: it completes
		// while the old task is still mid-append.
		require.NoError(t, <-started)
		close(release)
	} else {
		// Start now waits behind Stop, which waits for the in-flight append.
		time.Sleep(5 * time.Millisecond)
		require.Empty(t, started, "Start must not overtake a Stop that is still fencing")
		close(release)
		require.NoError(t, <-started)
	}
	require.NoError(t, <-stopped)
	require.True(t, s.Stats().Running, "the Start after the Stop wins")

	// More traffic after the flap: a twin of the old task would deliver it too.
	keys = append(keys, produce(t, s, l, "orders", 2, 3)...)
	clk.Advance(5 * time.Second)
	waitUntil(t, "every message delivered", func() bool { return len(l.delivered("orders")) >= len(keys) })
	if guardOff {
		// The twin's duplicates may lag behind under CPU load; wait for them
		// (the test fails after 5 s if they never come).
		waitUntil(t, "a double delivery", func() bool { return len(l.delivered("orders")) > len(keys) })
	} else {
		time.Sleep(30 * time.Millisecond) // 30 ticks: room for a twin to act
	}
	require.NoError(t, s.Stop())
	s.all.Wait() // also the zombie, when the guard is off
	counts := countByKey(l, "orders")
	for _, k := range keys {
		require.Contains(t, counts, k)
	}
	return counts
}

// TestLeaderFlapDuringSlowAppendDeliversEachMessageOnce is the field report as
// a test: with the generation guard every message arrives exactly once.
func TestLeaderFlapDuringSlowAppendDeliversEachMessageOnce(t *testing.T) {
	for k, n := range runLeaderFlap(t, false) {
		assert.Equal(t, 1, n, "message %s", k)
	}
}

// TestLeaderFlapWithoutGenerationGuardDeliversTwice shows the scenario above
// catches the bug: with the guard switched off (the field report's shared
// "started" flag, a Stop that does not fence, a task that reschedules itself
// onto the current timer) the old task survives the flap as a twin of the new
// one and the messages produced after the flap arrive twice.
func TestLeaderFlapWithoutGenerationGuardDeliversTwice(t *testing.T) {
	twice := 0
	c := runLeaderFlap(t, true)
	for _, n := range c {
		if n > 1 {
			twice++
		}
	}
	assert.Positive(t, twice, "without the guard the zombie twin must double-deliver")
}

// TestStopWaitsForTheInFlightAppendAndRecordsItsProgress rules out a Stop
// that returns while its generation is still writing (the field report's
// stop() only flipped a flag).
func TestStopWaitsForTheInFlightAppendAndRecordsItsProgress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress")
	s, l, clk := newTestScheduler(t, Options{Levels: "1s", ProgressPath: path})
	entered, release := make(chan struct{}), make(chan struct{})
	l.setHook(func([]*store.Message) error { close(entered); <-release; return nil })
	produce(t, s, l, "t", 1, 3)
	require.NoError(t, s.Start())
	clk.Advance(time.Second)
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop() }()
	time.Sleep(20 * time.Millisecond)
	require.Empty(t, stopped, "Stop returned while a delivery was mid-append")
	close(release)
	require.NoError(t, <-stopped)
	p, err := loadProgress(path)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 3}, p, "the in-flight batch's progress is recorded")
	assert.EqualValues(t, 3, s.Stats().Delivered)
}
