package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The timer rows: timerN timers (100k in a full run) produced ahead of
// time, then due at the same millisecond ("at once") or spread evenly over
// one second. A latency sample is one timer's lag: the time its message was
// stored in its real topic (brokercore StoredAt, JetStream's stored
// timestamp of the fired message) minus its due time. msgs/s is timerN over
// the time from the first due time to the last delivery: in the spread rows
// it cannot exceed the arrival rate, timerN per second.
//
// brokercore runs as brokercore.Open wires it (store SyncNone, so that
// neither side fsyncs each message; the scheduler's progress journal in
// dir/schedule/progress, one fsync per delivered batch; Tick 10 ms).
// JetStream runs message schedules (ADR-51, nats-server 2.12+): a stream
// with AllowMsgSchedules, one schedule message per timer on its own subject
// (the server keeps one schedule per subject) with "Nats-Schedule: @at
// <RFC3339>" and "Nats-Schedule-Target" naming the subject the server
// publishes it to when due; default file store (fsync every 2 minutes).
const (
	wTimers = "timers"

	timerTopic     = "timers" // brokercore real topic; JetStream target subject
	timerIndexProp = "Bench-I"
	timerTick      = 10 * time.Millisecond
	timerBody      = 100
	jsTimerStream  = "TIMERS"
	jsSchedPrefix  = "sched."
)

// timerCases are the four timer rows: each system at once and spread.
func timerCases(cfg *config) []*bcase {
	n := cfg.timerN
	return []*bcase{
		bcTimerCase("brokercore timers due at once", "jetstream schedules due at once", n, 0),
		jsTimerCase("jetstream schedules due at once", n, 0),
		bcTimerCase("brokercore timers spread over 1s", "jetstream schedules spread over 1s", n, time.Second),
		jsTimerCase("jetstream schedules spread over 1s", n, time.Second),
	}
}

// timerPlan is when each timer of a run is due: whole milliseconds, so
// that neither system's rounding of the due time counts as lag.
type timerPlan struct {
	first time.Time
	due   []time.Time
}

// newTimerPlan puts the first due time headStart from now.
func newTimerPlan(n int64, spread, headStart time.Duration) timerPlan {
	p := timerPlan{first: time.Now().Add(headStart).Truncate(time.Millisecond), due: make([]time.Time, n)}
	for i := range p.due {
		p.due[i] = p.first.Add((time.Duration(i) * spread / time.Duration(n)).Truncate(time.Millisecond))
	}
	return p
}

// headStart is the time producing n timers is given before the first is
// due; a run whose producing took longer fails rather than measure its own
// producer. It does not enter the figures (a run's time starts at the first
// due time), so it is generous: at 40 µs per timer JetStream's publishing
// of 100k schedules overran it at load average 3, and its fixed part is
// a second, over ten times what producing the test's few hundred takes at
// load average 10.
func headStart(n int64) time.Duration {
	return time.Second + time.Duration(n)*80*time.Microsecond
}

// timerSample turns the stored times of the delivered timers (by index)
// into a sample.
func timerSample(p timerPlan, stored []time.Time, cpu time.Duration) sample {
	s := sample{msgs: int64(len(stored)), bytes: int64(len(stored)) * timerBody, cpu: cpu}
	last := p.first
	for i, at := range stored {
		s.lat = append(s.lat, max(at.Sub(p.due[i]), time.Nanosecond)) // a 0 would read as "not measured"
		if at.After(last) {
			last = at
		}
	}
	s.elapsed = max(last.Sub(p.first), time.Millisecond)
	return s
}

func bcTimerCase(system, ref string, n int64, spread time.Duration) *bcase {
	return &bcase{system: system, ref: ref, op: "due → stored in its topic", run: func(e *env) (sample, error) {
		return bcTimers(e, n, spread)
	}}
}

func bcTimers(e *env, n int64, spread time.Duration) (sample, error) {
	dir, err := e.dir("timers")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	b, err := brokercore.Open(dir, brokercore.Options{
		Store:    store.Options{Sync: store.SyncNone},
		Schedule: schedule.Options{Tick: timerTick},
	})
	if err != nil {
		return sample{}, err
	}
	defer b.Close()
	st, sch := b.Store(), b.Scheduler()
	all := make(chan struct{})
	var once sync.Once
	cancel := st.Subscribe(func(topic string, q int, next int64) {
		if topic == timerTopic && next >= n {
			once.Do(func() { close(all) })
		}
	})
	defer cancel()

	tm := startTimer()
	p := newTimerPlan(n, spread, headStart(n))
	body := payload(timerBody)
	batch := make([]*store.Message, 0, 256)
	for i := range p.due {
		m, err := sch.At(&store.Message{Topic: timerTopic, Body: body,
			Properties: map[string]string{timerIndexProp: strconv.Itoa(i)}}, p.due[i])
		if err != nil {
			return sample{}, err
		}
		if batch = append(batch, m); len(batch) == cap(batch) || i == len(p.due)-1 {
			if err := st.Append(batch...); err != nil {
				return sample{}, err
			}
			batch = batch[:0]
		}
	}
	if time.Now().After(p.first) {
		return sample{}, fmt.Errorf("producing %d timers took longer than the %v head start", n, headStart(n))
	}
	if err := waitTimers(e.ctx, all, p, spread); err != nil {
		return sample{}, fmt.Errorf("brokercore: %w (%d of %d delivered)", err, st.MaxOffset(timerTopic, 0), n)
	}
	_, cpu := tm.stop()
	stored := make([]time.Time, n)
	seen := make([]bool, n)
	for off := int64(0); off < n; {
		msgs, err := st.Read(timerTopic, 0, off, store.MaxReadBatch)
		if err != nil {
			return sample{}, err
		}
		if len(msgs) == 0 {
			return sample{}, fmt.Errorf("brokercore: read stopped at %d of %d", off, n)
		}
		for _, m := range msgs {
			i, err := strconv.Atoi(m.Properties[timerIndexProp])
			if err != nil || i < 0 || int64(i) >= n || seen[i] {
				return sample{}, fmt.Errorf("brokercore: delivered message %d has index %q (twice, or unknown)", m.QueueOffset, m.Properties[timerIndexProp])
			}
			if m.StoredAt.Before(p.due[i]) {
				return sample{}, fmt.Errorf("brokercore: timer %d delivered %v before its time", i, p.due[i].Sub(m.StoredAt))
			}
			seen[i], stored[i] = true, m.StoredAt
			off = m.QueueOffset + 1
		}
	}
	return timerSample(p, stored, cpu), nil
}

// waitTimers waits for every timer, at most 30 s after the last is due.
func waitTimers(ctx context.Context, all <-chan struct{}, p timerPlan, spread time.Duration) error {
	limit := time.NewTimer(time.Until(p.first.Add(spread + 30*time.Second)))
	defer limit.Stop()
	select {
	case <-all:
		return nil
	case <-limit.C:
		return errors.New("not every timer was delivered 30 s after the last was due")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func jsTimerCase(system string, n int64, spread time.Duration) *bcase {
	return &bcase{system: system, op: "due → stored in its topic", run: func(e *env) (sample, error) {
		return jsTimers(e, n, spread)
	}}
}

func jsTimers(e *env, n int64, spread time.Duration) (sample, error) {
	dir, err := e.dir("js-timers")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	node, err := startJS(dir, false, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return sample{}, err
	}
	defer node.stop()
	ctx, cancelCtx := context.WithTimeout(e.ctx, time.Minute+2*headStart(n))
	defer cancelCtx()
	if _, err := node.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: jsTimerStream, Subjects: []string{jsSchedPrefix + ">", timerTopic},
		Storage: jetstream.FileStorage, Replicas: 1, AllowMsgSchedules: true,
	}); err != nil {
		return sample{}, fmt.Errorf("jetstream: create a stream with AllowMsgSchedules: %w", err)
	}
	cons, err := node.js.OrderedConsumer(ctx, jsTimerStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{timerTopic}})
	if err != nil {
		return sample{}, err
	}
	stored := make([]time.Time, n)
	var mu sync.Mutex
	var got int64
	var bad error
	all := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, merr := m.Metadata()
		i, ierr := strconv.Atoi(m.Headers().Get(timerIndexProp))
		mu.Lock()
		defer mu.Unlock()
		switch {
		case merr != nil:
			bad = merr
		case ierr != nil || i < 0 || int64(i) >= n || !stored[i].IsZero():
			bad = fmt.Errorf("fired message with index %q (twice, or unknown)", m.Headers().Get(timerIndexProp))
		default:
			stored[i] = md.Timestamp
			if got++; got == n {
				close(all)
			}
		}
	})
	if err != nil {
		return sample{}, err
	}
	defer cc.Stop()

	tm := startTimer()
	p := newTimerPlan(n, spread, headStart(n))
	body := payload(timerBody)
	for i := range p.due {
		m := &nats.Msg{Subject: jsSchedPrefix + strconv.Itoa(i), Data: body, Header: nats.Header{
			"Nats-Schedule":        []string{"@at " + p.due[i].UTC().Format(time.RFC3339Nano)},
			"Nats-Schedule-Target": []string{timerTopic},
			timerIndexProp:         []string{strconv.Itoa(i)},
		}}
		if _, err := node.js.PublishMsgAsync(m, jetstream.WithStallWait(jsTimeout)); err != nil {
			return sample{}, fmt.Errorf("jetstream: publish schedule %d: %w", i, err)
		}
	}
	select {
	case <-node.js.PublishAsyncComplete():
	case <-ctx.Done():
		return sample{}, errors.New("jetstream: schedule publishes not acknowledged")
	}
	if time.Now().After(p.first) {
		return sample{}, fmt.Errorf("publishing %d schedules took longer than the %v head start", n, headStart(n))
	}
	if err := waitTimers(ctx, all, p, spread); err != nil {
		mu.Lock()
		defer mu.Unlock()
		return sample{}, fmt.Errorf("jetstream: %w (%d of %d fired)", err, got, n)
	}
	_, cpu := tm.stop()
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		return sample{}, fmt.Errorf("jetstream: %w", bad)
	}
	for i, at := range stored {
		if at.Before(p.due[i]) {
			return sample{}, fmt.Errorf("jetstream: schedule %d fired %v before its time", i, p.due[i].Sub(at))
		}
	}
	return timerSample(p, stored, cpu), nil
}
