package pop_test

// Black-box acceptance tests of what is new in pop this round (issues 14
// and 15): Request.Filter and the zero values of Request.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

var audT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type audEnv struct {
	st   *store.Store
	svc  *pop.Service
	offs *pop.MemoryOffsets
	clk  *testkit.Clock
}

func audNew(t *testing.T, opts pop.Options) *audEnv {
	t.Helper()
	clk := testkit.NewClock(audT0)
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone, Now: clk.Now})
	require.NoError(t, err)
	offs := pop.NewMemoryOffsets()
	opts.Offsets = offs
	opts.Now = clk.Now
	svc := pop.New(st, opts)
	t.Cleanup(func() {
		_ = svc.Close()
		_ = st.Close()
	})
	return &audEnv{st: st, svc: svc, offs: offs, clk: clk}
}

func (e *audEnv) appendTags(t *testing.T, topic string, tags ...string) {
	t.Helper()
	for _, tg := range tags {
		require.NoError(t, e.st.Append(&store.Message{Topic: topic, Tags: tg, Body: []byte(tg)}))
	}
}

func (e *audEnv) pop(t *testing.T, req pop.Request) []pop.Delivery {
	t.Helper()
	if req.Group == "" {
		req.Group = "g"
	}
	if req.Topic == "" {
		req.Topic = "t"
	}
	if req.ClientID == "" {
		req.ClientID = "c"
	}
	res, err := e.svc.Pop(context.Background(), req)
	require.NoError(t, err)
	return res.Messages
}

func audOffsets(ds []pop.Delivery) []int64 {
	out := make([]int64, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Message.QueueOffset)
	}
	return out
}

func (e *audEnv) ackAll(t *testing.T, ds []pop.Delivery) {
	t.Helper()
	for _, d := range ds {
		require.NoError(t, e.svc.Ack(d.Handle))
	}
}

func TestAuditFilterSyntax(t *testing.T) {
	valid := map[string][]int64{ // tags A B C D appended at offsets 0..3
		"":            {0, 1, 2, 3},
		"*":           {0, 1, 2, 3},
		"A":           {0},
		"A||C":        {0, 2},
		"A || C":      {0, 2},
		"A ||C":       {0, 2},
		"A|| C":       {0, 2},
		"B || C || D": {1, 2, 3},
	}
	for f, want := range valid {
		t.Run("valid/"+f, func(t *testing.T) {
			e := audNew(t, pop.Options{})
			e.appendTags(t, "t", "A", "B", "C", "D")
			got := e.pop(t, pop.Request{Filter: f, Max: 32})
			assert.Equal(t, want, audOffsets(got))
		})
	}
	invalid := []string{"A &&", "A | B", "A ||", "|| A", "A |||| B", "A || || B", "||", "|", "A||B||"}
	for _, f := range invalid {
		t.Run("invalid/"+f, func(t *testing.T) {
			e := audNew(t, pop.Options{})
			e.appendTags(t, "t", "A", "B", "A", "B")
			first := e.pop(t, pop.Request{Filter: "A", Max: 1})
			require.Equal(t, []int64{0}, audOffsets(first))
			before := e.svc.Stats()

			_, err := e.svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Filter: f, Max: 32})
			require.ErrorIs(t, err, pop.ErrInvalid)
			assert.NotEmpty(t, err.Error())

			after := e.svc.Stats()
			assert.Equal(t, before.FilterChanges, after.FilterChanges, "an invalid filter replaces nothing")
			assert.Equal(t, before.Filtered, after.Filtered)
			assert.Equal(t, before.Delivered, after.Delivered)
			// the group still has filter "A" and nothing was consumed
			next := e.pop(t, pop.Request{Filter: "A", Max: 32})
			assert.Equal(t, []int64{2}, audOffsets(next))
			assert.Equal(t, before.FilterChanges, e.svc.Stats().FilterChanges)
		})
	}
}

// Non-matching messages are settled for the group and the committed offset
// moves past them once everything before is settled.
func TestAuditFilterSettlesAndCommitsPast(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "B", "B", "A", "B")
	got := e.pop(t, pop.Request{Filter: "A", Max: 32})
	require.Equal(t, []int64{2}, audOffsets(got))
	assert.EqualValues(t, 3, e.svc.Stats().Filtered)
	off, _ := e.offs.Committed("g", "t", 0)
	assert.LessOrEqual(t, off, int64(2), "never past an unacked message")

	e.ackAll(t, got)
	off, ok := e.offs.Committed("g", "t", 0)
	require.True(t, ok)
	assert.EqualValues(t, 4, off)

	// nothing is delivered again, to this group, even after the invisible time
	e.clk.Advance(time.Hour)
	assert.Empty(t, e.pop(t, pop.Request{Filter: "A", Max: 32}))

	// another group with another filter gets the rest, unaffected
	other := e.pop(t, pop.Request{Group: "g2", Filter: "B", Max: 32})
	assert.Equal(t, []int64{0, 1, 3}, audOffsets(other))
}

// A queue of only non-matching messages: the group's offset moves past them.
func TestAuditFilterAllRejectedCommitted(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "B", "B", "B")
	assert.Empty(t, e.pop(t, pop.Request{Filter: "A", Max: 32}))
	assert.EqualValues(t, 3, e.svc.Stats().Filtered)
	off, _ := e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 3, off, "everything is settled: the committed offset is past the rejected messages")
	e.appendTags(t, "t", "A")
	got := e.pop(t, pop.Request{Filter: "A", Max: 32})
	require.Equal(t, []int64{3}, audOffsets(got))
	e.ackAll(t, got)
	off, _ = e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 4, off)
}

// A tag matches exactly: not a prefix, not an empty Tags.
func TestAuditFilterExactTag(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "AB", "", "a", "A", "B A")
	got := e.pop(t, pop.Request{Filter: "A", Max: 32})
	assert.Equal(t, []int64{3}, audOffsets(got))
}

// With AllQueues, a queue of only rejected messages does not hide a matching
// message in another queue.
func TestAuditFilterAllQueues(t *testing.T) {
	e := audNew(t, pop.Options{})
	for i := 0; i < 40; i++ {
		require.NoError(t, e.st.Append(&store.Message{Topic: "t", QueueID: 0, Tags: "B"}))
	}
	require.NoError(t, e.st.Append(&store.Message{Topic: "t", QueueID: 1, Tags: "A", Body: []byte("a")}))
	got := e.pop(t, pop.Request{QueueID: pop.AllQueues, Filter: "A", Max: 1})
	require.Len(t, got, 1)
	assert.Equal(t, 1, got[0].Message.QueueID)
	e.ackAll(t, got)
}

// FIFO honours the filter: a non-matching message never blocks the queue.
func TestAuditFilterFIFONotBlocked(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "B", "A", "B", "B", "A", "B")
	got := e.pop(t, pop.Request{Filter: "A", FIFO: true, AttemptID: "x", Max: 1})
	require.Equal(t, []int64{1}, audOffsets(got))
	// blocked for others until acked
	assert.Empty(t, e.pop(t, pop.Request{Filter: "A", FIFO: true, AttemptID: "y", Max: 1}))
	e.ackAll(t, got)
	got = e.pop(t, pop.Request{Filter: "A", FIFO: true, AttemptID: "y", Max: 32})
	require.Equal(t, []int64{4}, audOffsets(got))
	e.ackAll(t, got)
	off, _ := e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 6, off)
	assert.Empty(t, e.pop(t, pop.Request{Filter: "A", FIFO: true, AttemptID: "z", Max: 32}))
}

// A different filter replaces the group's previous one and never
// re-delivers what the old one skipped.
func TestAuditFilterChangeReplacesNeverRedelivers(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B", "A", "B")
	got := e.pop(t, pop.Request{Filter: "A", Max: 32})
	require.Equal(t, []int64{0, 2}, audOffsets(got))
	e.ackAll(t, got)
	require.EqualValues(t, 0, e.svc.Stats().FilterChanges)

	assert.Empty(t, e.pop(t, pop.Request{Filter: "B", Max: 32}), "what filter A skipped is not delivered to B")
	assert.EqualValues(t, 1, e.svc.Stats().FilterChanges)
	e.clk.Advance(time.Hour)
	assert.Empty(t, e.pop(t, pop.Request{Filter: "B", Max: 32}))

	e.appendTags(t, "t", "A", "B")
	got = e.pop(t, pop.Request{Filter: "B", Max: 32})
	assert.Equal(t, []int64{5}, audOffsets(got))
	e.ackAll(t, got)
	assert.EqualValues(t, 1, e.svc.Stats().FilterChanges, "the same filter again is no change")
	off, _ := e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 6, off)

	// the same expression spelled differently is the same subscription? Not
	// asserted; but "*" after a tag filter is a change that takes effect.
	e.appendTags(t, "t", "C")
	got = e.pop(t, pop.Request{Filter: "*", Max: 32})
	assert.Equal(t, []int64{6}, audOffsets(got))
}

// A long poll with a filter under a flood of non-matching messages returns
// early and empty at most once per Poll, and a matching arrival wakes it.
func TestAuditFilterLongPollFlood(t *testing.T) {
	e := audNew(t, pop.Options{Tick: time.Hour})
	defer testkit.Repeat(func() { _ = e.st.Append(&store.Message{Topic: "t", Tags: "B", Body: []byte("noise")}) })()

	const poll = 300 * time.Millisecond
	windowStart := time.Now()
	early := 0
	for time.Since(windowStart) < poll {
		start := time.Now()
		res, err := e.svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Filter: "A", Max: 32, Poll: poll})
		require.NoError(t, err)
		require.Empty(t, res.Messages, "only non-matching messages were appended")
		if time.Since(start) < poll {
			early++
		}
	}
	assert.LessOrEqual(t, early, 1, "early empty answers within one Poll")

	// a matching message wakes a filtered long poll
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan []pop.Delivery, 1)
	go func() {
		res, _ := e.svc.Pop(ctx, pop.Request{Group: "g", Topic: "t", ClientID: "c", Filter: "A", Max: 1, Poll: 30 * time.Second})
		done <- res.Messages
	}()
	time.Sleep(20 * time.Millisecond) // let it start waiting; correctness does not depend on it
	require.NoError(t, e.st.Append(&store.Message{Topic: "t", Tags: "A", Body: []byte("wanted")}))
	select {
	case ds := <-done:
		require.Len(t, ds, 1)
		assert.Equal(t, "wanted", string(ds[0].Message.Body))
	case <-time.After(20 * time.Second):
		t.Fatal("a matching arrival did not wake the filtered long poll")
	}
}

// Zero Max means 1; zero Invisible means DefaultInvisible (60 s).
func TestAuditPopZeroValues(t *testing.T) {
	require.Equal(t, 60*time.Second, pop.DefaultInvisible)
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B", "C")
	res, err := e.svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1, "Max 0 means 1")
	assert.Equal(t, pop.DefaultInvisible, res.Invisible)
	assert.False(t, res.Clamped)
	first := res.Messages[0]

	e.clk.Advance(pop.DefaultInvisible - time.Second)
	got := e.pop(t, pop.Request{Max: 32})
	assert.Equal(t, []int64{1, 2}, audOffsets(got), "the first is still invisible after 59 s")
	e.clk.Advance(time.Second)
	again := e.pop(t, pop.Request{Max: 32})
	require.Len(t, again, 1)
	assert.Equal(t, first.Message.QueueOffset, again[0].Message.QueueOffset)
	assert.Equal(t, 2, again[0].Attempts)

	// Max above MaxBatch and negative values are still invalid
	_, err = e.svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Max: pop.MaxBatch + 1})
	assert.ErrorIs(t, err, pop.ErrInvalid)
	_, err = e.svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Max: -1})
	assert.ErrorIs(t, err, pop.ErrInvalid)
	_, err = e.svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Invisible: -time.Second})
	assert.ErrorIs(t, err, pop.ErrInvalid)
}

// After Close of the store under a pop service, every call answers
// ErrClosed (not an empty success).
func TestAuditPopOverClosedStore(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B")
	got := e.pop(t, pop.Request{})
	require.Len(t, got, 1)
	require.NoError(t, e.st.Close())
	_, err := e.svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c"})
	assert.ErrorIs(t, err, pop.ErrClosed)
	assert.ErrorIs(t, e.svc.Ack(got[0].Handle), pop.ErrClosed)
	_, err = e.svc.ChangeInvisible(got[0].Handle, time.Minute)
	assert.ErrorIs(t, err, pop.ErrClosed)
}

// FIFO + filter keeps attemptId reentrancy: the same attempt re-pops the
// same batch (without the rejected messages) and others stay blocked.
func TestAuditFilterFIFOReentrant(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B", "A", "B", "A")
	first := e.pop(t, pop.Request{Filter: "A", FIFO: true, AttemptID: "x", Max: 2})
	require.Equal(t, []int64{0, 2}, audOffsets(first))
	again := e.pop(t, pop.Request{Filter: "A", FIFO: true, AttemptID: "x", Max: 2})
	require.Equal(t, []int64{0, 2}, audOffsets(again))
	for _, d := range again {
		assert.Equal(t, 1, d.Attempts)
	}
	assert.ErrorIs(t, e.svc.Ack(first[0].Handle), pop.ErrStaleHandle)
	assert.Empty(t, e.pop(t, pop.Request{Filter: "A", FIFO: true, AttemptID: "y", Max: 2}))
	require.NoError(t, e.svc.Ack(again[0].Handle))
	assert.Empty(t, e.pop(t, pop.Request{Filter: "A", FIFO: true, AttemptID: "y", Max: 2}), "batch not fully acked")
	require.NoError(t, e.svc.Ack(again[1].Handle))
	off, _ := e.offs.Committed("g", "t", 0)
	assert.GreaterOrEqual(t, off, int64(3))
	next := e.pop(t, pop.Request{Filter: "A", FIFO: true, AttemptID: "y", Max: 2})
	require.Equal(t, []int64{4}, audOffsets(next))
	e.ackAll(t, next)
	off, _ = e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 5, off)
}

// A rejected message between unacked ones: the commit waits for the one
// before it and then moves past both.
func TestAuditFilterCommitOrder(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B", "A")
	a0 := e.pop(t, pop.Request{Filter: "A", Max: 1})
	a2 := e.pop(t, pop.Request{Filter: "A", Max: 1})
	require.Equal(t, []int64{0}, audOffsets(a0))
	require.Equal(t, []int64{2}, audOffsets(a2))
	e.ackAll(t, a2)
	off, _ := e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 0, off, "offset 0 is still unacked")
	e.ackAll(t, a0)
	off, _ = e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 3, off)
}

// A filter is per group and topic: other groups and other topics keep theirs.
func TestAuditFilterPerGroupAndTopic(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B")
	e.appendTags(t, "u", "A", "B")
	assert.Equal(t, []int64{0}, audOffsets(e.pop(t, pop.Request{Group: "g", Topic: "t", Filter: "A", Max: 32})))
	assert.Equal(t, []int64{1}, audOffsets(e.pop(t, pop.Request{Group: "g", Topic: "u", Filter: "B", Max: 32})))
	assert.Equal(t, []int64{1}, audOffsets(e.pop(t, pop.Request{Group: "h", Topic: "t", Filter: "B", Max: 32})))
	assert.EqualValues(t, 0, e.svc.Stats().FilterChanges)
	before := e.svc.Stats().Invalid
	_, err := e.svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Filter: "A||"})
	require.ErrorIs(t, err, pop.ErrInvalid)
	assert.Equal(t, before+1, e.svc.Stats().Invalid)
}

// The filter's decisions go through Offsets: a new Service over the same
// offsets (a restart) does not deliver what the filter settled.
func TestAuditFilterSettledAcrossRestart(t *testing.T) {
	clk := testkit.NewClock(audT0)
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone, Now: clk.Now})
	require.NoError(t, err)
	defer st.Close()
	offs := pop.NewMemoryOffsets()
	for _, tg := range []string{"B", "A", "B", "B"} {
		require.NoError(t, st.Append(&store.Message{Topic: "t", Tags: tg}))
	}
	svc := pop.New(st, pop.Options{Offsets: offs, Now: clk.Now})
	res, err := svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Filter: "A", Max: 32})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.NoError(t, svc.Ack(res.Messages[0].Handle))
	require.NoError(t, svc.Close())

	svc2 := pop.New(st, pop.Options{Offsets: offs, Now: clk.Now})
	defer svc2.Close()
	res, err = svc2.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Max: 32})
	require.NoError(t, err)
	assert.Empty(t, res.Messages, "everything was settled and committed")
}

// A filtered long poll under a flood it cannot keep up with still ends when
// its Poll does: reading on past rejected messages must not outlive Poll.
func TestAuditFilterLongPollFloodEndsWithPoll(t *testing.T) {
	e := audNew(t, pop.Options{Tick: time.Hour})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]*store.Message, 512)
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range batch {
					batch[i] = &store.Message{Topic: "t", Tags: "B"}
				}
				_ = e.st.Append(batch...)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	require.Eventually(t, func() bool { return e.st.MaxOffset("t", 0) > 10000 }, 10*time.Second, time.Millisecond)

	const poll = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // far past Poll: a loaded machine
	defer cancel()
	start := time.Now()
	res, err := e.svc.Pop(ctx, pop.Request{Group: "g", Topic: "t", ClientID: "c", Filter: "A", Max: 32, Poll: poll})
	elapsed := time.Since(start)
	require.NoError(t, err, "the Poll ends the pop, not the ctx (after %v)", elapsed)
	assert.Empty(t, res.Messages)
	assert.Less(t, elapsed, 25*poll, "a pop with Poll %v took %v", poll, elapsed)
}

// FIFO with zero values: Max 1 and a block of DefaultInvisible.
func TestAuditPopZeroValuesFIFO(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B")
	first := e.pop(t, pop.Request{FIFO: true, AttemptID: "x"})
	require.Equal(t, []int64{0}, audOffsets(first))
	e.clk.Advance(pop.DefaultInvisible - time.Second)
	assert.Empty(t, e.pop(t, pop.Request{FIFO: true, AttemptID: "y"}), "still blocked after 59 s")
	e.clk.Advance(time.Second)
	again := e.pop(t, pop.Request{FIFO: true, AttemptID: "y"})
	require.Equal(t, []int64{0}, audOffsets(again))
	assert.Equal(t, 2, again[0].Attempts)
}

// Poll 0 pops over a long run of rejected messages make progress: each
// reads on from where the previous one stopped, so a match behind the run is
// reached and the offset committed past the run.
func TestAuditFilterLongRejectedRunPoll0(t *testing.T) {
	e := audNew(t, pop.Options{})
	batch := make([]*store.Message, 0, 3000)
	for i := 0; i < 3000; i++ {
		batch = append(batch, &store.Message{Topic: "t", Tags: "B"})
	}
	for i := 0; i < len(batch); i += 500 {
		require.NoError(t, e.st.Append(batch[i:i+500]...))
	}
	e.appendTags(t, "t", "A")
	var got []pop.Delivery
	for i := 0; i < 20 && len(got) == 0; i++ {
		got = e.pop(t, pop.Request{Filter: "A", Max: 32})
	}
	require.Equal(t, []int64{3000}, audOffsets(got))
	e.ackAll(t, got)
	off, _ := e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 3001, off)
	assert.EqualValues(t, 3000, e.svc.Stats().Filtered)
}

// Read-ahead never loses a match: Max 1 pops walk the matches one by one.
func TestAuditFilterMax1WalksMatches(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "A", "B", "A", "B", "B", "A")
	var got []int64
	for i := 0; i < 6; i++ {
		ds := e.pop(t, pop.Request{Filter: "A", Max: 1})
		got = append(got, audOffsets(ds)...)
	}
	assert.Equal(t, []int64{0, 1, 3, 6}, got)
}

// Spellings of the same subscription are not a change.
func TestAuditFilterEquivalentSpellingsNoChange(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B", "C")
	e.pop(t, pop.Request{Filter: "A || B", Max: 1})
	e.pop(t, pop.Request{Filter: "B||A", Max: 1})
	e.pop(t, pop.Request{Filter: "A ||B", Max: 1})
	assert.EqualValues(t, 0, e.svc.Stats().FilterChanges)
	e.pop(t, pop.Request{Max: 1})
	e.pop(t, pop.Request{Filter: "*", Max: 1})
	assert.EqualValues(t, 1, e.svc.Stats().FilterChanges, `"" and "*" are the same subscription`)
}

// A pop never returns a message its own filter rejects, even a redelivery of
// one popped under the group's previous filter.
func TestAuditFilterNeverDeliversRejectedAfterChange(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B", "A", "B")
	first := e.pop(t, pop.Request{Filter: "A", Max: 1, Invisible: 10 * time.Second})
	require.Equal(t, []int64{0}, audOffsets(first))
	e.clk.Advance(11 * time.Second)
	for i := 0; i < 4; i++ {
		for _, d := range e.pop(t, pop.Request{Filter: "B", Max: 32, Invisible: 10 * time.Second}) {
			assert.Equal(t, "B", d.Message.Tags, "filter B delivered offset %d", d.Message.QueueOffset)
			require.NoError(t, e.svc.Ack(d.Handle))
		}
		e.clk.Advance(11 * time.Second)
	}
	// the consumer that popped offset 0 died: the queue must not be stuck
	// behind it (it is settled, by the new filter, or dead-lettered)
	off0, _ := e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 4, off0, "committed offset stuck behind a message no pop will ever deliver")
	_ = e.svc.Ack(first[0].Handle)
	e.clk.Advance(time.Hour)
	assert.Empty(t, e.pop(t, pop.Request{Filter: "B", Max: 32}))
	off, _ := e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 4, off, "everything settled")
}

// A long poll waiting when its store closes ends with ErrClosed at once
// (the wake-up tick is an hour: only the store's Done can end it).
func TestAuditLongPollEndsWhenStoreCloses(t *testing.T) {
	e := audNew(t, pop.Options{Tick: time.Hour})
	done := make(chan error, 1)
	go func() {
		_, err := e.svc.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Poll: time.Minute})
		done <- err
	}()
	require.Eventually(t, func() bool { return e.svc.Stats().Waiters == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, e.st.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, pop.ErrClosed)
	case <-time.After(20 * time.Second):
		t.Fatal("the long poll did not end when its store closed")
	}
}

// A Service closed over a live store unsubscribes; a new one over the same
// store is woken by arrivals by itself.
func TestAuditNewServiceOverSameStoreSubscribes(t *testing.T) {
	e := audNew(t, pop.Options{Tick: time.Hour})
	require.NoError(t, e.svc.Close())
	e.appendTags(t, "t", "A") // no call into the closed service may break this
	svc2 := pop.New(e.st, pop.Options{Tick: time.Hour, Now: e.clk.Now})
	defer svc2.Close()
	res, err := svc2.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	done := make(chan []pop.Delivery, 1)
	go func() {
		res, _ := svc2.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", ClientID: "c", Poll: time.Minute})
		done <- res.Messages
	}()
	require.Eventually(t, func() bool { return svc2.Stats().Waiters == 1 }, 10*time.Second, time.Millisecond)
	e.appendTags(t, "t", "B")
	select {
	case ds := <-done:
		require.Len(t, ds, 1)
		assert.Equal(t, "B", ds[0].Message.Tags)
	case <-time.After(20 * time.Second):
		t.Fatal("the new service was not woken by the arrival")
	}
}

// An offset reset under a filter: popping restarts at the reset offset with
// the group's filter, and the commits after it carry the new epoch.
func TestAuditFilterAfterReset(t *testing.T) {
	e := audNew(t, pop.Options{})
	e.appendTags(t, "t", "A", "B", "A", "B")
	got := e.pop(t, pop.Request{Filter: "A", Max: 32})
	require.Equal(t, []int64{0, 2}, audOffsets(got))
	e.ackAll(t, got)
	off, _ := e.offs.Committed("g", "t", 0)
	require.EqualValues(t, 4, off)

	e.offs.Reset("g", "t", 0, 1)
	got = e.pop(t, pop.Request{Filter: "A", Max: 32})
	require.Equal(t, []int64{2}, audOffsets(got))
	e.ackAll(t, got)
	off, _ = e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 4, off)

	// a reset while a delivery is in flight: its ack cannot commit over it
	e.appendTags(t, "t", "A")
	inflight := e.pop(t, pop.Request{Filter: "A", Max: 32})
	require.Equal(t, []int64{4}, audOffsets(inflight))
	e.offs.Reset("g", "t", 0, 0)
	assert.ErrorIs(t, e.svc.Ack(inflight[0].Handle), pop.ErrStaleHandle)
	off, _ = e.offs.Committed("g", "t", 0)
	assert.EqualValues(t, 0, off)
	got = e.pop(t, pop.Request{Filter: "A", Max: 32})
	assert.Equal(t, []int64{0, 2, 4}, audOffsets(got))
}
