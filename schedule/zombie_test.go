package schedule

import (
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// brokenService is a test-local copy of the design in the field report
// (RocketMQ 4.7.1 ScheduleMessageService): a shared "started" flag, a stop()
// that flips it and cancels the timer without waiting, a start() that makes
// a new timer and schedules a task per level from the offset table, and a
// task whose finally block reschedules a successor onto whatever timer is
// current if the flag says started. It exists only to show that the flap
// scenario below catches the bug; production code has no such switch.
type brokenService struct {
	log   *fakeLog
	clock func() time.Time
	delay time.Duration

	started atomic.Bool
	mu      sync.Mutex
	timer   *brokenTimer
	table   int64 // the delayLevelTable entry of the one level; under mu
	wg      sync.WaitGroup
}

// brokenTimer is java.util.Timer: one goroutine running scheduled tasks.
type brokenTimer struct {
	tasks  chan func()
	cancel chan struct{}
}

func (b *brokenService) start() {
	b.started.Store(true)
	tm := &brokenTimer{tasks: make(chan func(), 64), cancel: make(chan struct{})}
	b.mu.Lock()
	b.timer = tm
	off := b.table
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			select {
			case <-tm.cancel:
				return
			case f := <-tm.tasks:
				f()
			}
		}
	}()
	tm.tasks <- b.task(off)
}

func (b *brokenService) stop() {
	b.started.Store(false)
	b.mu.Lock()
	close(b.timer.cancel) // cancels the timer; a running task runs on
	b.mu.Unlock()
}

// task is DeliverDelayedMessageTimerTask: deliver what is due from off,
// then, in finally, "if started, schedule my successor on the timer".
func (b *brokenService) task(off int64) func() {
	return func() {
		next := off
		defer func() {
			if !b.started.Load() {
				return
			}
			b.mu.Lock()
			tm := b.timer
			b.mu.Unlock()
			runtime.Gosched()
			select {
			case tm.tasks <- b.task(next):
			case <-tm.cancel:
			}
		}()
		msgs, _ := b.log.Read(Topic, 1, off, 16)
		var out []*store.Message
		for _, m := range msgs {
			if b.clock().Before(m.StoredAt.Add(b.delay)) {
				break
			}
			next = m.QueueOffset + 1
			restore(m)
			out = append(out, m)
		}
		if len(out) > 0 && b.log.Append(out...) == nil {
			b.mu.Lock()
			b.table = next
			b.mu.Unlock()
		}
	}
}

// flapScenario is the field report's sequence against either design: a
// level-2 delivery is blocked mid-append (slow disk), the service is
// stopped and started again (a leader flap), the append is released, more
// messages arrive. It returns the UNIQ_KEYs produced and waits until want
// of them (counting repeats) have arrived.
func flapScenario(t *testing.T, l *fakeLog, clk *fakeClock, produceN func(n int) []string,
	start, stop func(), want func(keys []string) int) []string {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	first.Store(true)
	l.setHook(func([]*store.Message) error {
		if first.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil
	})
	keys := produceN(3)
	start()
	clk.Advance(5 * time.Second)
	<-entered // the first batch's delivery is mid-append
	flapped := make(chan struct{})
	go func() { defer close(flapped); stop(); start() }()
	waitBlockedOrDone(t, flapped)
	close(release)
	<-flapped
	keys = append(keys, produceN(3)...)
	clk.Advance(5 * time.Second)
	n := want(keys)
	waitUntil(t, "the deliveries", func() bool { return len(l.delivered("orders")) >= n })
	return keys
}

// waitBlockedOrDone waits until the flap goroutine has either finished (the
// broken design does not wait) or is blocked inside Stop's fence.
func waitBlockedOrDone(t *testing.T, done <-chan struct{}) {
	t.Helper()
	waitUntil(t, "the flap to block or finish", func() bool {
		select {
		case <-done:
			return true
		default:
		}
		return goroutineBlockedIn("schedule.(*Scheduler).lockLanes")
	})
}

// goroutineBlockedIn reports whether some goroutine's stack is in fn.
func goroutineBlockedIn(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

// TestLeaderFlapWithTheFieldReportsDesignDeliversTwice shows the scenario
// catches the bug: against the test-local copy of the broken lifecycle the
// old task survives the flap as a twin of the new one and messages arrive
// twice.
func TestLeaderFlapWithTheFieldReportsDesignDeliversTwice(t *testing.T) {
	clk := newClock()
	l := newFakeLog(clk.Now)
	s, err := New(l, Options{Levels: "1s 5s", Now: clk.Now})
	require.NoError(t, err)
	b := &brokenService{log: l, clock: clk.Now, delay: 5 * time.Second}
	keys := flapScenario(t, l, clk, func(n int) []string { return produce(t, s, l, "orders", 2, n) },
		b.start, b.stop, func(keys []string) int { return len(keys) + 1 })
	b.stop()
	b.wg.Wait()
	twice := 0
	for _, k := range keys {
		if countByKey(l, "orders")[k] > 1 {
			twice++
		}
	}
	assert.Positive(t, twice, "the field report's design must double-deliver in this scenario")
}

// TestLeaderFlapDuringSlowAppendDeliversEachMessageOnce is the field report
// as a test against the Scheduler: every message arrives exactly once, and
// the Start of the flap waits behind the Stop that fences the append.
func TestLeaderFlapDuringSlowAppendDeliversEachMessageOnce(t *testing.T) {
	clk := newClock()
	l := newFakeLog(clk.Now)
	s, err := New(l, Options{Levels: "1s 5s", Now: clk.Now, Tick: time.Millisecond,
		ProgressPath: filepath.Join(t.TempDir(), "progress")})
	require.NoError(t, err)
	start := func() { require.NoError(t, s.Start()) }
	stop := func() { require.NoError(t, s.Stop()) }
	keys := flapScenario(t, l, clk, func(n int) []string { return produce(t, s, l, "orders", 2, n) },
		start, stop, func(keys []string) int { return len(keys) })
	require.True(t, s.Stats().Running, "the Start after the Stop wins")
	require.NoError(t, s.Stop())
	// Drive the core once more by hand: a twin would find something to do.
	g := &generation{n: 99, stop: make(chan struct{})}
	s.cur.Store(g)
	for _, lv := range s.lv {
		s.step(g, lv, &cursor{next: lv.next.Load()}, clk.Now().Add(time.Hour))
	}
	s.cur.Store(nil)
	for _, k := range keys {
		assert.Equal(t, 1, countByKey(l, "orders")[k], "message %s", k)
	}
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
	waitUntil(t, "Stop to reach the fence", func() bool { return goroutineBlockedIn("schedule.(*Scheduler).lockLanes") })
	require.Empty(t, stopped, "Stop returned while a delivery was mid-append")
	close(release)
	require.NoError(t, <-stopped)
	p, err := loadProgress(path)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{1: 3}, p, "the in-flight batch's progress is recorded")
	assert.EqualValues(t, 3, s.Stats().Delivered)
}
