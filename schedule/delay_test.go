package schedule

import (
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestScheduler(t *testing.T, opts Options) (*Scheduler, *fakeLog, *fakeClock) {
	t.Helper()
	clk := newClock()
	l := newFakeLog(clk.Now)
	if opts.Now == nil {
		opts.Now = clk.Now
	}
	if opts.Tick == 0 {
		opts.Tick = time.Millisecond
	}
	s, err := New(l, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	return s, l, clk
}

func TestParseLevelsAcceptsUnitsAndRejectsGarbage(t *testing.T) {
	got, err := ParseLevels(DefaultLevels)
	require.NoError(t, err)
	require.Len(t, got, 18)
	assert.Equal(t, time.Second, got[0])
	assert.Equal(t, 2*time.Hour, got[17])

	got, err = ParseLevels(" 2s\t3m 4h 1d ")
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{2 * time.Second, 3 * time.Minute, 4 * time.Hour, 24 * time.Hour}, got)

	for _, bad := range []string{"", "   ", "1", "s", "0s", "-1s", "1.5s", "1ms", "1x", "1 s", "+1s", "99999999999999999999s", "1000000d"} {
		_, err := ParseLevels(bad)
		assert.ErrorIs(t, err, ErrInvalid, "%q", bad)
	}
}

func TestNewRejectsBadOptionsWithErrInvalid(t *testing.T) {
	_, err := New(nil, Options{})
	assert.ErrorIs(t, err, ErrInvalid)
	l := newFakeLog(time.Now)
	for _, o := range []Options{{Levels: "1s 2x"}, {Tick: -1}, {MaxBatch: -1}} {
		_, err := New(l, o)
		assert.ErrorIs(t, err, ErrInvalid, "%+v", o)
	}
	s, err := New(l, Options{})
	require.NoError(t, err)
	assert.Len(t, s.Levels(), 18, "zero Options means DefaultLevels")
	assert.Equal(t, DefaultTick, s.opts.Tick)
}

func TestDelayRewritesForScheduleTopicWithoutTouchingTheCaller(t *testing.T) {
	s, _, _ := newTestScheduler(t, Options{Levels: "1s 5s 10s"})
	born := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	m := &store.Message{Topic: "orders", QueueID: 7, Tags: "tagA", Keys: []string{"k1", "k2"},
		Body: []byte("body"), Properties: map[string]string{"a": "1", PropUniqKey: "U1"},
		BornAt: born, ReconsumeTimes: 3}
	orig := copyMsg(m)

	d, err := s.Delay(m, 2)
	require.NoError(t, err)
	assert.Equal(t, orig, m, "Delay must not modify the caller's message")
	assert.Equal(t, Topic, d.Topic)
	assert.Equal(t, 1, d.QueueID, "level L lives in queue L-1")
	assert.Equal(t, map[string]string{"a": "1", PropUniqKey: "U1", PropRealTopic: "orders", PropRealQueue: "7", PropDelayLevel: "2"}, d.Properties)
	assert.Equal(t, "tagA", d.Tags)
	assert.Equal(t, born, d.BornAt)
	assert.Equal(t, 3, d.ReconsumeTimes)
	d.Keys[0], d.Body[0] = "zz", 'Z'
	assert.Equal(t, orig, m, "the copy must not share Keys or Body with the caller")
}

func TestDelayAssignsUniqKeyOnlyWhenMissing(t *testing.T) {
	s, _, _ := newTestScheduler(t, Options{})
	a, err := s.Delay(&store.Message{Topic: "t"}, 1)
	require.NoError(t, err)
	b, err := s.Delay(&store.Message{Topic: "t", Properties: map[string]string{}}, 1)
	require.NoError(t, err)
	require.NotEmpty(t, a.Properties[PropUniqKey])
	require.NotEmpty(t, b.Properties[PropUniqKey])
	assert.NotEqual(t, a.Properties[PropUniqKey], b.Properties[PropUniqKey])
	c, err := s.Delay(&store.Message{Topic: "t", Properties: map[string]string{PropUniqKey: "mine"}}, 1)
	require.NoError(t, err)
	assert.Equal(t, "mine", c.Properties[PropUniqKey])
}

func TestDelayClampsLevelAboveMaximumToMaximum(t *testing.T) {
	s, _, _ := newTestScheduler(t, Options{Levels: "1s 5s 10s"})
	d, err := s.Delay(&store.Message{Topic: "t"}, 99)
	require.NoError(t, err)
	assert.Equal(t, 2, d.QueueID)
	assert.Equal(t, "3", d.Properties[PropDelayLevel])
}

func TestDelayRejectsBadInputWithErrInvalid(t *testing.T) {
	s, _, _ := newTestScheduler(t, Options{})
	for name, c := range map[string]struct {
		m     *store.Message
		level int
	}{
		"nil message":       {nil, 1},
		"level 0":           {&store.Message{Topic: "t"}, 0},
		"negative level":    {&store.Message{Topic: "t"}, -3},
		"empty topic":       {&store.Message{}, 1},
		"schedule topic":    {&store.Message{Topic: Topic}, 1},
		"negative queue id": {&store.Message{Topic: "t", QueueID: -1}, 1},
	} {
		d, err := s.Delay(c.m, c.level)
		assert.ErrorIs(t, err, ErrInvalid, name)
		assert.Nil(t, d, name)
	}
}

func TestDeliveryRestoresTheProducersMessageAndStripsSchedulingProperties(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{Levels: "1s"})
	born := clk.Now().Add(-time.Minute)
	d, err := s.Delay(&store.Message{Topic: "orders", QueueID: 3, Tags: "tg", Keys: []string{"o-1"},
		Body: []byte("hello"), Properties: map[string]string{"trace": "t1", PropUniqKey: "U"},
		BornAt: born, ReconsumeTimes: 2}, 1)
	require.NoError(t, err)
	require.NoError(t, l.Append(d))
	require.NoError(t, s.Start())
	clk.Advance(time.Second)
	waitUntil(t, "delivery", func() bool { return len(l.delivered("orders")) == 1 })
	got := l.delivered("orders")[0]
	assert.Equal(t, 3, got.QueueID)
	assert.Equal(t, "tg", got.Tags)
	assert.Equal(t, []string{"o-1"}, got.Keys)
	assert.Equal(t, []byte("hello"), got.Body)
	assert.Equal(t, map[string]string{"trace": "t1", PropUniqKey: "U"}, got.Properties)
	assert.True(t, born.Equal(got.BornAt))
	assert.Equal(t, 2, got.ReconsumeTimes)
	// The level's progress moves once the delivery's append returned: the
	// delivered message can be read a moment before (Stop waits for it).
	waitUntil(t, "progress", func() bool { return s.Progress()[1] == 1 })
	assert.Equal(t, map[int]int64{1: 1}, s.Progress())
}

func TestNeverDeliversBeforeDueOnAnyLevel(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{Levels: "1s 5s 10s 30s"})
	due := map[string]time.Time{}
	for level, delay := range s.Levels() {
		for _, k := range produce(t, s, l, "t", level+1, 3) {
			due[k] = clk.Now().Add(delay)
		}
		clk.Advance(200 * time.Millisecond) // later levels stored a little later
	}
	var early []string
	l.setHook(func(msgs []*store.Message) error {
		now := clk.Now()
		for _, m := range msgs {
			if now.Before(due[m.Properties[PropUniqKey]]) {
				early = append(early, m.Properties[PropUniqKey])
			}
		}
		return nil
	})
	// Driven step by step: after each clock move every level steps until
	// it has nothing more to do, so "nothing early" is checked at every
	// instant without waiting for ticks.
	d := drive(s)
	cursors := make([]*cursor, len(s.lv))
	for i, lv := range s.lv {
		cursors[i] = &cursor{next: lv.next.Load()}
	}
	for step := 0; step < 70; step++ {
		want := 0
		for _, d := range due {
			if !clk.Now().Before(d) {
				want++
			}
		}
		for i, lv := range s.lv {
			for s.step(d.g, lv, cursors[i], clk.Now()).more {
			}
		}
		require.Len(t, l.delivered("t"), want, "at %v", clk.Now())
		clk.Advance(500 * time.Millisecond)
	}
	d.end(t)
	require.NoError(t, s.Stop())
	assert.Empty(t, early)
	assert.Len(t, countByKey(l, "t"), len(due))
}

func TestFailedAppendRetriesTheSameOffsetAndNeverSkips(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{Levels: "1s", MaxBatch: 2})
	keys := produce(t, s, l, "t", 1, 5)
	fails := 0
	l.setHook(func([]*store.Message) error {
		if fails < 4 {
			fails++
			return errInjected
		}
		return nil
	})
	require.NoError(t, s.Start())
	clk.Advance(time.Second)
	waitUntil(t, "all delivered", func() bool { return len(l.delivered("t")) == 5 })
	require.NoError(t, s.Stop())
	var order []string
	for _, m := range l.delivered("t") {
		order = append(order, m.Properties[PropUniqKey])
	}
	assert.Equal(t, keys, order, "in order, each once, none skipped")
	st := s.Stats()
	assert.EqualValues(t, 4, st.Retried)
	assert.EqualValues(t, 5, st.Delivered)
	assert.Equal(t, map[int]int64{1: 5}, s.Progress())
}

func TestProgressDoesNotPassAnUndeliveredMessageWhileAppendsFail(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{Levels: "1s"})
	produce(t, s, l, "t", 1, 3)
	l.setHook(func([]*store.Message) error { return errInjected })
	require.NoError(t, s.Start())
	clk.Advance(time.Second)
	waitUntil(t, "retries", func() bool { return s.Stats().Retried >= 2 })
	clk.Advance(time.Minute)
	st := s.Stats()
	assert.Equal(t, map[int]int64{1: 0}, s.Progress())
	lag, err := time.ParseDuration(st.Levels[0].Lag)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, lag, time.Minute, "lag is now minus the due time of the oldest undelivered")
	require.NoError(t, s.Stop())
}

func TestStopEndsABackoffWaitAtOnce(t *testing.T) {
	// With an hour-long Tick the first retry would be an hour away: Stop must
	// not wait for it (the test would time out).
	s, l, clk := newTestScheduler(t, Options{Levels: "1s", Tick: time.Hour})
	clk.Advance(-time.Second) // make the message due as soon as it is stored
	produce(t, s, l, "t", 1, 1)
	clk.Advance(time.Second)
	l.setHook(func([]*store.Message) error { return errInjected })
	require.NoError(t, s.Start())
	waitUntil(t, "first failure", func() bool { return s.Stats().Retried == 1 })
	require.NoError(t, s.Stop())
}

func TestRecordWithoutSchedulingPropertiesIsSkippedAndCounted(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{Levels: "1s"})
	require.NoError(t, l.Append(&store.Message{Topic: Topic, QueueID: 0, Body: []byte("foreign")}))
	keys := produce(t, s, l, "t", 1, 1)
	require.NoError(t, s.Start())
	clk.Advance(time.Second)
	waitUntil(t, "delivery", func() bool { return len(l.delivered("t")) == 1 })
	require.NoError(t, s.Stop())
	assert.Equal(t, map[string]int{keys[0]: 1}, countByKey(l, "t"))
	assert.EqualValues(t, 1, s.Stats().Levels[0].Malformed)
	assert.Equal(t, map[int]int64{1: 2}, s.Progress())
}

func TestStartAndStopAreIdempotent(t *testing.T) {
	s, _, _ := newTestScheduler(t, Options{})
	require.NoError(t, s.Stop())
	require.NoError(t, s.Start())
	g := s.Stats().Generation
	require.NoError(t, s.Start())
	assert.Equal(t, g, s.Stats().Generation, "a second Start must not start a second generation")
	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop())
	assert.False(t, s.Stats().Running)
}

func TestConcurrentStartStopFromManyGoroutinesDeliversEachMessageOnce(t *testing.T) {
	s, l, clk := newTestScheduler(t, Options{Levels: "1s 2s 3s", MaxBatch: 3})
	l.setHook(func([]*store.Message) error { yieldN(20); return nil }) // slow appends
	var keys []string
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 60; i++ {
				if (i+g)%2 == 0 {
					assert.NoError(t, s.Start())
				} else {
					assert.NoError(t, s.Stop())
				}
			}
		}(g)
	}
	for i := 0; i < 30; i++ {
		keys = append(keys, produce(t, s, l, "t", 1+i%3, 4)...)
		clk.Advance(700 * time.Millisecond)
		yieldN(50)
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	require.NoError(t, s.Start())
	clk.Advance(5 * time.Second)
	waitUntil(t, "all delivered", func() bool { return len(l.delivered("t")) >= len(keys) })
	require.NoError(t, s.Stop())
	counts := countByKey(l, "t")
	require.Len(t, counts, len(keys))
	for k, n := range counts {
		require.Equal(t, 1, n, "message %s", k)
	}
}
