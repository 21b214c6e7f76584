// Package brokertest opens a brokercore.Broker for a test: in a temporary
// directory, without fsync, with a short scheduler tick, optionally on a
// clock the test moves by hand, and closed when the test ends.
//
//	func TestBilling(t *testing.T) {
//		clk := brokertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
//		b := brokertest.New(t, brokertest.WithClock(clk))
//		// … append, pop, clk.Advance(time.Minute) instead of sleeping, pop again
//	}
//
// # Under testing/synctest
//
// brokercore works inside a synctest bubble: every goroutine it starts is
// owned by the Broker and blocks only on channels, timers and tickers, so
// the bubble's fake time drives it. Open the broker inside the bubble (so
// its goroutines belong to it) and let New's t.Cleanup close it there;
// time.Sleep then moves the fake clock at once, and synctest.Wait returns
// when the library's goroutines have caught up:
//
//	func TestDelayedUnderSynctest(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			var o brokercore.Options
//			o.Schedule.Tick = schedule.DefaultTick
//			b := brokertest.New(t, brokertest.WithOptions(o)) // time.Now is the bubble's clock
//			d, _ := b.Scheduler().Delay(&store.Message{Topic: "t", Body: []byte("x")}, 1)
//			_ = b.Store().Append(d)
//			time.Sleep(2 * time.Second) // no real wait
//			synctest.Wait()
//			// the message is now in topic "t"
//		})
//	}
//
// Do not combine WithClock with synctest: inside a bubble the bubble's
// time.Now already is the test clock. Give the scheduler its default tick
// there, as above: fake time is free, but every tick the bubble passes
// through still runs, and New's short DefaultTick would make a fake hour cost
// real seconds. TestBrokerRunsUnderSynctest in this package runs exactly
// this recipe.
package brokertest

import (
	"testing"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/store"
)

// DefaultTick is the scheduler tick (schedule.Options.Tick) of a test
// broker, short so that a delivery follows a clock move within
// milliseconds.
const DefaultTick = 5 * time.Millisecond

// Option changes how New opens the broker.
type Option func(*config)

type config struct {
	dir  string
	opts brokercore.Options
	sync *store.SyncPolicy
}

// WithOptions starts from opts instead of the zero brokercore.Options.
// New still applies its defaults to fields opts leaves zero (store sync,
// scheduler tick); later options override it.
func WithOptions(opts brokercore.Options) Option {
	return func(c *config) { c.opts = opts }
}

// WithNow injects now as brokercore.Options.Now: the clock of every package.
func WithNow(now func() time.Time) Option {
	return func(c *config) { c.opts.Now = now }
}

// WithClock injects clk as the clock of every package (WithNow(clk.Now)).
func WithClock(clk *Clock) Option { return WithNow(clk.Now) }

// WithSync sets the store's sync policy (New's default is store.SyncNone;
// the zero Options.Store.Sync cannot say SyncGroup, so this option can).
func WithSync(p store.SyncPolicy) Option {
	return func(c *config) { c.sync = &p }
}

// WithDir opens the broker in dir instead of a fresh t.TempDir(), for a test
// that reopens a broker on the same data.
func WithDir(dir string) Option {
	return func(c *config) { c.dir = dir }
}

// New opens a broker for t and registers its Close with t.Cleanup (a Close
// error fails the test). Unless an option says otherwise the broker lives
// in t.TempDir(), its store does not fsync (store.SyncNone), and its
// scheduler ticks every DefaultTick (WithSync and WithOptions change them). A failed Open fails the test at once.
func New(t testing.TB, opts ...Option) *brokercore.Broker {
	t.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.dir == "" {
		c.dir = t.TempDir()
	}
	switch {
	case c.sync != nil:
		c.opts.Store.Sync = *c.sync
	case c.opts.Store.Sync == store.SyncGroup: // the zero policy
		c.opts.Store.Sync = store.SyncNone
	}
	if c.opts.Schedule.Tick == 0 {
		c.opts.Schedule.Tick = DefaultTick
	}
	b, err := brokercore.Open(c.dir, c.opts)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("brokertest: close: %v", err)
		}
	})
	return b
}

// Clock is a clock a test moves by hand: inject it with WithClock, then
// Advance it instead of sleeping. It is safe for concurrent use.
type Clock struct{ c *testkit.Clock }

// NewClock returns a Clock that reads start until it is moved.
func NewClock(start time.Time) *Clock { return &Clock{testkit.NewClock(start)} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time { return c.c.Now() }

// Advance moves the clock by d (backwards for a negative d).
func (c *Clock) Advance(d time.Duration) { c.c.Advance(d) }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.c.Set(t) }
