package pop_test

// Black-box acceptance tests of the pop contract in ARCHITECTURE.md ("## pop"
// and the conventions), written from the contract alone, on the real store and
// the real offset.Manager. One test per contract sentence; the comment above
// each test quotes the sentence it checks.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// ---------------------------------------------------------------- helpers

type accClock struct {
	mu sync.Mutex
	t  time.Time
}

func newAccClock() *accClock {
	return &accClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *accClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *accClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// accSource is the real *store.Store with one optional gate: holdNextRead makes
// the next Read block until released, so a test can hold the group@topic lock
// the way the field report's slow read did.
type accSource struct {
	*store.Store
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{}
}

func (s *accSource) Read(topic string, queueID int, off int64, max int) ([]*store.Message, error) {
	s.mu.Lock()
	gate, entered := s.gate, s.entered
	s.gate, s.entered = nil, nil
	s.mu.Unlock()
	if gate != nil {
		close(entered)
		<-gate
	}
	return s.Store.Read(topic, queueID, off, max)
}

func (s *accSource) holdNextRead() (entered <-chan struct{}, release func()) {
	gate, ent := make(chan struct{}), make(chan struct{})
	s.mu.Lock()
	s.gate, s.entered = gate, ent
	s.mu.Unlock()
	var once sync.Once
	return ent, func() { once.Do(func() { close(gate) }) }
}

type accEnv struct {
	t    *testing.T
	dir  string
	clk  *accClock
	st   *store.Store
	src  *accSource
	offs *offset.Manager
	svc  *pop.Service
	cur  atomic.Pointer[pop.Service]
	opts pop.Options
}

// newAccEnv opens a real store (arrivals wired to the service), a real
// offset.Manager and a Service with a fake clock. opts.Now and opts.Offsets are
// filled in.
func newAccEnv(t *testing.T, opts pop.Options) *accEnv {
	t.Helper()
	e := &accEnv{t: t, dir: t.TempDir(), clk: newAccClock()}
	e.openStore()
	offs, err := offset.Open(offset.Options{})
	require.NoError(t, err)
	e.offs = offs
	opts.Now = e.clk.Now
	opts.Offsets = offs
	e.opts = opts
	e.svc = pop.New(e.src, opts)
	e.cur.Store(e.svc)
	t.Cleanup(func() {
		_ = e.cur.Load().Close()
		_ = e.st.Close()
		_ = e.offs.Close()
	})
	return e
}

func (e *accEnv) openStore() {
	st, err := store.Open(filepath.Join(e.dir, "log"), store.Options{
		Sync: store.SyncNone,
		OnAppend: func(topic string, q int, _ int64) {
			if s := e.cur.Load(); s != nil {
				s.Arrived(topic, q)
			}
		},
	})
	require.NoError(e.t, err)
	e.st = st
	e.src = &accSource{Store: st}
}

// restart closes the Service and starts a new one over the same store and
// offsets (the host restarted; its durable pieces survived).
func (e *accEnv) restart() {
	require.NoError(e.t, e.svc.Close())
	e.svc = pop.New(e.src, e.opts)
	e.cur.Store(e.svc)
}

func (e *accEnv) appendN(topic string, q, n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		require.NoError(e.t, e.st.Append(&store.Message{Topic: topic, QueueID: q, Body: []byte(fmt.Sprintf("%s/%d/%d", topic, q, i))}))
	}
}

func accReq() pop.Request {
	return pop.Request{Group: "g", Topic: "t", ClientID: "c", QueueID: 0, Max: 32, Invisible: 30 * time.Second}
}

func fifoReq(attempt string) pop.Request {
	r := accReq()
	r.FIFO = true
	r.AttemptID = attempt
	return r
}

func (e *accEnv) pop(req pop.Request) pop.Result {
	e.t.Helper()
	res, err := e.svc.Pop(context.Background(), req)
	require.NoError(e.t, err)
	return res
}

func offsetsOf(res pop.Result) []int64 {
	out := []int64{}
	for _, d := range res.Messages {
		out = append(out, d.Message.QueueOffset)
	}
	return out
}

func attemptsOf(res pop.Result) []int {
	out := []int{}
	for _, d := range res.Messages {
		out = append(out, d.Attempts)
	}
	return out
}

func (e *accEnv) committed(q int) int64 {
	off, ok := e.offs.Committed("g", "t", q)
	if !ok {
		return -1
	}
	return off
}

type popOutcome struct {
	res pop.Result
	err error
	at  time.Duration
}

// popAsync runs a Pop in a goroutine and reports it with its elapsed time.
func (e *accEnv) popAsync(ctx context.Context, req pop.Request) <-chan popOutcome {
	ch := make(chan popOutcome, 1)
	svc := e.svc
	start := time.Now()
	go func() {
		res, err := svc.Pop(ctx, req)
		ch <- popOutcome{res, err, time.Since(start)}
	}()
	return ch
}

func waitOutcome(t *testing.T, ch <-chan popOutcome, within time.Duration, what string) popOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(within):
		t.Fatalf("%s: Pop did not return within %v", what, within)
		return popOutcome{}
	}
}

func requireStillWaiting(t *testing.T, ch <-chan popOutcome, d time.Duration, what string) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("%s: Pop returned early (%d messages, err %v) instead of long-polling", what, len(o.res.Messages), o.err)
	case <-time.After(d):
	}
}

// ---------------------------------------------------------------- start offset

// "A group with no committed offset starts at the queue's MinOffset".
// Retention moves MinOffset above 0, so a service that started at 0 (or at a
// Read error) is caught.
func TestAcceptNewGroupStartsAtMinOffsetNotZero(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	require.NoError(t, e.st.Close())
	st, err := store.Open(filepath.Join(e.dir, "log"), store.Options{Sync: store.SyncNone, SegmentSize: 512, MaxBytes: 1, RetainEvery: -1})
	require.NoError(t, err)
	e.st = st
	e.src.Store = st
	for i := 0; i < 40; i++ {
		require.NoError(t, st.Append(&store.Message{Topic: "t", Body: make([]byte, 100)}))
	}
	_, err = st.Retain()
	require.NoError(t, err)
	min := st.MinOffset("t", 0)
	require.Greater(t, min, int64(0), "retention must have moved MinOffset for this test to mean anything")
	for i := 0; i < 3; i++ {
		require.NoError(t, st.Append(&store.Message{Topic: "t", Body: []byte("after retention")}))
	}
	require.Equal(t, min, st.MinOffset("t", 0))

	res := e.pop(accReq())
	require.NotEmpty(t, res.Messages)
	assert.Equal(t, min, res.Messages[0].Message.QueueOffset)
	assert.Len(t, res.Messages, int(st.MaxOffset("t", 0)-min))
	for i, d := range res.Messages {
		assert.Equal(t, min+int64(i), d.Message.QueueOffset)
		assert.Equal(t, 1, d.Attempts, "first delivery has Attempts 1")
	}
}

// "(Options.InitialOffset can say Latest)": a new group then skips what is
// already in the queue and gets only what arrives later.
func TestAcceptInitialOffsetLatestSkipsExistingMessages(t *testing.T) {
	e := newAccEnv(t, pop.Options{InitialOffset: pop.Latest})
	e.appendN("t", 0, 3)
	res := e.pop(accReq())
	assert.Empty(t, res.Messages, "Latest: messages before the group's first pop are not delivered")
	e.appendN("t", 0, 2)
	res = e.pop(accReq())
	assert.Equal(t, []int64{3, 4}, offsetsOf(res))
}

// "A topic or queue with nothing in it yet is not an error: the pop long-polls
// for it."
func TestAcceptEmptyTopicLongPollsInsteadOfErroring(t *testing.T) {
	e := newAccEnv(t, pop.Options{})

	res, err := e.svc.Pop(context.Background(), accReq())
	require.NoError(t, err, "a never-written topic is not an error")
	assert.Empty(t, res.Messages)
	// The contract's Result is { Messages []Delivery }: an empty answer must
	// compare equal to the zero Result whatever fields pop added.
	assert.Equal(t, pop.Result{}, res)

	r := accReq()
	r.QueueID = pop.AllQueues
	res, err = e.svc.Pop(context.Background(), r)
	require.NoError(t, err, "AllQueues on a topic with no queues yet is not an error")
	assert.Empty(t, res.Messages)

	// A short Poll on nothing ends empty, without error, after about Poll.
	r = accReq()
	r.Poll = 50 * time.Millisecond
	o := waitOutcome(t, e.popAsync(context.Background(), r), 2*time.Second, "short poll")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages)
	assert.GreaterOrEqual(t, o.at, 40*time.Millisecond, "Poll>0 must wait, not answer at once")

	// One queue and AllQueues both long-poll until the first message arrives.
	r = accReq()
	r.Poll = 30 * time.Second
	one := e.popAsync(context.Background(), r)
	r.Group = "g2"
	r.QueueID = pop.AllQueues
	all := e.popAsync(context.Background(), r)
	requireStillWaiting(t, one, 100*time.Millisecond, "queue long-poll")
	e.appendN("t", 0, 1)
	for name, ch := range map[string]<-chan popOutcome{"queue": one, "AllQueues": all} {
		o := waitOutcome(t, ch, 2*time.Second, name)
		require.NoError(t, o.err, name)
		assert.Equal(t, []int64{0}, offsetsOf(o.res), name)
	}
}

// ---------------------------------------------------------------- time

// "Every visibility decision (invisible time over, FIFO block over) uses
// Options.Now at the time of the call; background loops only wake waiters, so
// a test that moves an injected clock and pops again sees the result at once."
// Tick is an hour, so nothing but the call itself can make the decision.
func TestAcceptVisibilityReadsInjectedClockAtCallTime(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	e.appendN("t", 0, 1)
	e.appendN("t", 1, 1)

	// Non-FIFO invisible time.
	first := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(first))
	assert.Empty(t, e.pop(accReq()).Messages, "invisible")
	e.clk.Advance(29 * time.Second)
	assert.Empty(t, e.pop(accReq()).Messages, "still invisible before Invisible is over")
	e.clk.Advance(2 * time.Second)
	again := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(again), "visible again as soon as the clock passed Invisible")
	assert.Equal(t, []int{2}, attemptsOf(again))

	// FIFO block.
	a := fifoReq("A")
	a.QueueID = 1
	b := fifoReq("B")
	b.QueueID = 1
	require.Equal(t, []int64{0}, offsetsOf(e.pop(a)))
	assert.Empty(t, e.pop(b).Messages, "blocked for another attemptId")
	e.clk.Advance(29 * time.Second)
	assert.Empty(t, e.pop(b).Messages, "still blocked before Invisible is over")
	e.clk.Advance(2 * time.Second)
	res := e.pop(b)
	require.Equal(t, []int64{0}, offsetsOf(res), "block over as soon as the clock passed Invisible")
	assert.Equal(t, []int{2}, attemptsOf(res))
}

// ---------------------------------------------------------------- commits

// "The ack that advances the lowest unacked offset commits it (through
// Offsets) before Ack returns." and "The committed offset never passes an
// unacked message."
func TestAcceptAckOfLowestUnackedCommitsBeforeAckReturns(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 4)
	res := e.pop(accReq())
	require.Equal(t, []int64{0, 1, 2, 3}, offsetsOf(res))
	h := func(i int) string { return res.Messages[i].Handle }

	require.NoError(t, e.svc.Ack(h(1)))
	require.NoError(t, e.svc.Ack(h(3)))
	assert.LessOrEqual(t, e.committed(0), int64(0), "offset 0 is unacked: the commit must not pass it")

	require.NoError(t, e.svc.Ack(h(0)))
	assert.Equal(t, int64(2), e.committed(0), "acking 0 advances the lowest unacked to 2, committed before Ack returns")

	require.NoError(t, e.svc.Ack(h(2)))
	assert.Equal(t, int64(4), e.committed(0))
}

// "An offset reset (through Offsets: its epoch changes) takes effect on the
// next pop of that queue: in-memory state for the queue is dropped and popping
// restarts at the committed offset; commits carry the epoch they were made
// under, so pop can never write its old progress back over a reset."
func TestAcceptOffsetResetTakesEffectOnNextPopAndOldProgressCannotCommit(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 10)
	e.appendN("t", 1, 2)

	r := accReq()
	r.Max = 5
	before := e.pop(r)
	require.Equal(t, []int64{0, 1, 2, 3, 4}, offsetsOf(before))
	require.NoError(t, e.svc.Ack(before.Messages[0].Handle))
	require.Equal(t, int64(1), e.committed(0))
	r1 := accReq()
	r1.QueueID = 1
	other := e.pop(r1)
	require.Len(t, other.Messages, 2)

	// Forward reset.
	_, err := e.offs.Reset("g", "t", 0, 7)
	require.NoError(t, err)

	// Handles popped before the reset are stale even before the next pop,
	// and acking them writes nothing over the reset.
	err = e.svc.Ack(before.Messages[1].Handle)
	assert.ErrorIs(t, err, pop.ErrStaleHandle, "a handle popped before a reset is stale")
	assert.Equal(t, int64(7), e.committed(0), "old progress must not be written over the reset")

	after := e.pop(r)
	assert.Equal(t, []int64{7, 8, 9}, offsetsOf(after), "popping restarts at the reset offset")
	for _, d := range after.Messages {
		assert.Equal(t, 1, d.Attempts)
	}
	for i := 1; i < 5; i++ {
		assert.ErrorIs(t, e.svc.Ack(before.Messages[i].Handle), pop.ErrStaleHandle, "pre-reset handle %d", i)
		_, err := e.svc.ChangeInvisible(before.Messages[i].Handle, time.Minute)
		assert.ErrorIs(t, err, pop.ErrStaleHandle, "pre-reset handle %d", i)
	}
	assert.Equal(t, int64(7), e.committed(0), "stale acks changed nothing")

	// The reset of queue 0 leaves queue 1's in-flight deliveries alone.
	require.NoError(t, e.svc.Ack(other.Messages[0].Handle))
	assert.Equal(t, int64(1), e.committed(1))

	// Post-reset handles commit under the new epoch.
	require.NoError(t, e.svc.Ack(after.Messages[0].Handle))
	assert.Equal(t, int64(8), e.committed(0))

	// Backward reset: state dropped, so messages in flight (invisible) and
	// already acked are delivered again at once.
	_, err = e.offs.Reset("g", "t", 0, 2)
	require.NoError(t, err)
	back := e.pop(r)
	assert.Equal(t, []int64{2, 3, 4, 5, 6}, offsetsOf(back), "in-memory state dropped: popping restarts at the committed offset")
	assert.ErrorIs(t, e.svc.Ack(after.Messages[1].Handle), pop.ErrStaleHandle)
	assert.Equal(t, int64(2), e.committed(0))
}

// FIFO flavour of the reset sentence: the in-flight batch (and its block) is
// part of the in-memory state that a reset drops.
func TestAcceptOffsetResetDropsFIFOBatch(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 6)
	a := fifoReq("A")
	a.Max = 2
	batch := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(batch))
	b := fifoReq("B")
	b.Max = 2
	require.Empty(t, e.pop(b).Messages)

	_, err := e.offs.Reset("g", "t", 0, 4)
	require.NoError(t, err)
	res := e.pop(b)
	assert.Equal(t, []int64{4, 5}, offsetsOf(res), "the old batch's block is gone with the reset")
	assert.ErrorIs(t, e.svc.Ack(batch.Messages[0].Handle), pop.ErrStaleHandle)
	assert.Equal(t, int64(4), e.committed(0))
}

// ---------------------------------------------------------------- non-FIFO

// "Non-FIFO: popped messages are invisible for Invisible; unacked ones are
// delivered again after it with Attempts+1."
func TestAcceptNonFIFOUnackedRedeliveredWithAttemptsPlusOne(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 2)
	res := e.pop(accReq())
	require.Equal(t, []int64{0, 1}, offsetsOf(res))
	require.NoError(t, e.svc.Ack(res.Messages[1].Handle))

	handles := []string{res.Messages[0].Handle}
	for attempt := 2; attempt <= 4; attempt++ {
		e.clk.Advance(31 * time.Second)
		again := e.pop(accReq())
		require.Equal(t, []int64{0}, offsetsOf(again), "only the unacked one comes back")
		assert.Equal(t, attempt, again.Messages[0].Attempts)
		assert.Equal(t, res.Messages[0].Message.Body, again.Messages[0].Message.Body)
		assert.NotContains(t, handles, again.Messages[0].Handle, "a redelivery has a fresh handle")
		for _, old := range handles {
			assert.ErrorIs(t, e.svc.Ack(old), pop.ErrStaleHandle, "a redelivered message's older handles are stale")
		}
		handles = append(handles, again.Messages[0].Handle)
	}
	require.NoError(t, e.svc.Ack(handles[len(handles)-1]))
	assert.Equal(t, int64(2), e.committed(0))
	e.clk.Advance(time.Hour)
	assert.Empty(t, e.pop(accReq()).Messages, "an acked message never comes again")
}

// ChangeInvisible: "popped messages stay hidden this long unless acked or
// changed"; the new handle replaces the old one.
func TestAcceptChangeInvisibleMovesRedeliveryAndStalesOldHandle(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 1)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 1)
	old := res.Messages[0].Handle

	nh, err := e.svc.ChangeInvisible(old, 2*time.Minute)
	require.NoError(t, err)
	require.NotEqual(t, old, nh)
	assert.ErrorIs(t, e.svc.Ack(old), pop.ErrStaleHandle, "the old handle becomes stale")

	e.clk.Advance(31 * time.Second)
	assert.Empty(t, e.pop(accReq()).Messages, "extended: still invisible after the original Invisible")
	e.clk.Advance(90 * time.Second)
	again := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(again))
	assert.Equal(t, 2, again.Messages[0].Attempts)
	assert.ErrorIs(t, e.svc.Ack(nh), pop.ErrStaleHandle)
	require.NoError(t, e.svc.Ack(again.Messages[0].Handle))
	assert.Equal(t, int64(1), e.committed(0))
}

// "Options.MaxAttempts (default 16) is the total number of deliveries: once a
// message has been delivered that many times and its invisible time ends
// again, it goes to Options.DeadLetter instead of a next delivery."
func TestAcceptMaxAttemptsDeliveriesThenDeadLetter(t *testing.T) {
	var mu sync.Mutex
	var dead []string
	var groups []string
	e := newAccEnv(t, pop.Options{MaxAttempts: 3, DeadLetter: func(group string, m *store.Message) error {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, string(m.Body))
		groups = append(groups, group)
		return nil
	}})
	deadCount := func() int { mu.Lock(); defer mu.Unlock(); return len(dead) }
	e.appendN("t", 0, 1)

	for attempt := 1; attempt <= 3; attempt++ {
		res := e.pop(accReq())
		require.Equal(t, []int64{0}, offsetsOf(res), "delivery %d", attempt)
		assert.Equal(t, attempt, res.Messages[0].Attempts)
		e.clk.Advance(10 * time.Second)
		assert.Empty(t, e.pop(accReq()).Messages)
		assert.Equal(t, 0, deadCount(), "not dead-lettered while its last invisible time runs")
		e.clk.Advance(21 * time.Second)
	}
	res := e.pop(accReq())
	assert.Empty(t, res.Messages, "no 4th delivery")
	require.Equal(t, 1, deadCount(), "dead-lettered by the pop that found its last invisible time over")
	assert.Equal(t, []string{"t/0/0"}, dead)
	assert.Equal(t, []string{"g"}, groups)

	// The message is done: it never comes again, it is not dead-lettered
	// twice, and the committed offset may now pass it.
	e.clk.Advance(time.Hour)
	assert.Empty(t, e.pop(accReq()).Messages)
	assert.Equal(t, 1, deadCount())
	e.appendN("t", 0, 1)
	next := e.pop(accReq())
	require.Equal(t, []int64{1}, offsetsOf(next))
	require.NoError(t, e.svc.Ack(next.Messages[0].Handle))
	assert.Equal(t, int64(2), e.committed(0), "a dead-lettered message is done: the commit passes it")
}

// "MaxAttempts (default 16)": the zero Options dead-letters after 16 deliveries.
func TestAcceptDefaultMaxAttemptsIsSixteen(t *testing.T) {
	var n atomic.Int32
	e := newAccEnv(t, pop.Options{DeadLetter: func(string, *store.Message) error { n.Add(1); return nil }})
	e.appendN("t", 0, 1)
	for attempt := 1; attempt <= 16; attempt++ {
		res := e.pop(accReq())
		require.Len(t, res.Messages, 1, "delivery %d", attempt)
		require.Equal(t, attempt, res.Messages[0].Attempts)
		e.clk.Advance(31 * time.Second)
	}
	assert.Empty(t, e.pop(accReq()).Messages)
	assert.Equal(t, int32(1), n.Load())
}

// "With a nil DeadLetter nothing is dropped: it keeps being redelivered."
func TestAcceptNilDeadLetterKeepsRedelivering(t *testing.T) {
	e := newAccEnv(t, pop.Options{MaxAttempts: 2})
	e.appendN("t", 0, 1)
	for attempt := 1; attempt <= 6; attempt++ {
		res := e.pop(accReq())
		require.Equal(t, []int64{0}, offsetsOf(res), "delivery %d", attempt)
		assert.Equal(t, attempt, res.Messages[0].Attempts)
		e.clk.Advance(31 * time.Second)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0), "never committed past an undelivered-to-DLQ message")
}

// "Options.DeadLetter … receives a message that reached MaxAttempts; until it
// returns nil the message is kept and retried."
func TestAcceptFailingDeadLetterKeepsMessageAndRetries(t *testing.T) {
	var calls atomic.Int32
	e := newAccEnv(t, pop.Options{MaxAttempts: 2, DeadLetter: func(_ string, m *store.Message) error {
		if calls.Add(1) <= 2 {
			return errors.New("dead-letter topic unavailable")
		}
		return nil
	}})
	e.appendN("t", 0, 1)
	for attempt := 1; attempt <= 2; attempt++ {
		require.Len(t, e.pop(accReq()).Messages, 1)
		e.clk.Advance(31 * time.Second)
	}
	// A second message, acked, must not let the commit pass the kept one.
	e.appendN("t", 0, 1)

	seen := map[int32]bool{}
	for i := 0; i < 10 && calls.Load() < 3; i++ {
		res := e.pop(accReq())
		for _, d := range res.Messages {
			if d.Message.QueueOffset == 0 {
				assert.LessOrEqual(t, d.Attempts, 2, "no delivery beyond MaxAttempts")
				continue
			}
			require.NoError(t, e.svc.Ack(d.Handle))
		}
		if c := calls.Load(); c > 0 && c < 3 {
			seen[c] = true
			assert.LessOrEqual(t, e.committed(0), int64(0), "kept: the commit never passes a message whose DeadLetter failed")
		}
		e.clk.Advance(time.Minute)
	}
	require.Equal(t, int32(3), calls.Load(), "a failing DeadLetter is retried until it returns nil")
	assert.True(t, seen[1] && seen[2])

	e.clk.Advance(time.Hour)
	for _, d := range e.pop(accReq()).Messages {
		assert.NotEqual(t, int64(0), d.Message.QueueOffset, "done after DeadLetter returned nil")
	}
	assert.Equal(t, int32(3), calls.Load(), "not dead-lettered again after success")
}

// ---------------------------------------------------------------- FIFO

// "FIFO: a queue with an unacked batch is blocked for every other attemptId
// until the batch is fully acked or its invisible time ends."
func TestAcceptFIFOBatchBlocksOtherAttemptIDsUntilFullyAcked(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 5)
	a := fifoReq("A")
	a.Max = 2
	batch := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(batch))

	for _, other := range []string{"B", "C", ""} {
		r := fifoReq(other)
		r.Max = 2
		assert.Empty(t, e.pop(r).Messages, "attemptId %q is blocked", other)
	}
	require.NoError(t, e.svc.Ack(batch.Messages[0].Handle))
	b := fifoReq("B")
	b.Max = 2
	assert.Empty(t, e.pop(b).Messages, "partially acked batch still blocks")
	require.NoError(t, e.svc.Ack(batch.Messages[1].Handle))
	assert.Equal(t, int64(2), e.committed(0))
	next := e.pop(b)
	assert.Equal(t, []int64{2, 3}, offsetsOf(next), "fully acked: the next batch, in order")
	assert.Equal(t, []int{1, 1}, attemptsOf(next))
}

// "… or its invisible time ends" — then the same batch comes again with
// Attempts+1, in order, and the previous handles are stale.
func TestAcceptFIFOBatchRedeliveredInOrderAfterInvisibleEnds(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 5)
	a := fifoReq("A")
	a.Max = 3
	batch := e.pop(a)
	require.Equal(t, []int64{0, 1, 2}, offsetsOf(batch))
	e.clk.Advance(31 * time.Second)

	b := fifoReq("B")
	b.Max = 3
	again := e.pop(b)
	require.Equal(t, []int64{0, 1, 2}, offsetsOf(again), "the same batch, in order, not the next messages")
	assert.Equal(t, []int{2, 2, 2}, attemptsOf(again))
	for _, d := range batch.Messages {
		assert.ErrorIs(t, e.svc.Ack(d.Handle), pop.ErrStaleHandle)
	}
	assert.Empty(t, e.pop(a).Messages, "A is no longer the batch's attemptId: blocked")
	for _, d := range again.Messages {
		require.NoError(t, e.svc.Ack(d.Handle))
	}
	assert.Equal(t, int64(3), e.committed(0))
}

// "A pop that carries the batch's attemptId gets the same batch again, with
// fresh handles and without counting an extra attempt. Old handles of that
// batch are then stale."
func TestAcceptFIFOSameAttemptIDRepopsSameBatchFreshHandlesNoExtraAttempt(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 5)
	a := fifoReq("A")
	a.Max = 2
	first := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(first))

	second := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(second), "same batch, not the next messages")
	assert.Equal(t, []int{1, 1}, attemptsOf(second), "no extra attempt counted")
	third := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(third))
	assert.Equal(t, []int{1, 1}, attemptsOf(third))
	for i := range first.Messages {
		assert.NotEqual(t, first.Messages[i].Handle, second.Messages[i].Handle, "fresh handles")
		assert.NotEqual(t, second.Messages[i].Handle, third.Messages[i].Handle, "fresh handles")
	}
	for _, old := range append(append([]pop.Delivery{}, first.Messages...), second.Messages...) {
		assert.ErrorIs(t, e.svc.Ack(old.Handle), pop.ErrStaleHandle)
		_, err := e.svc.ChangeInvisible(old.Handle, time.Minute)
		assert.ErrorIs(t, err, pop.ErrStaleHandle)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0), "stale acks committed nothing")

	// After the invisible time ends, the next delivery is attempt 2 (not 4).
	e.clk.Advance(31 * time.Second)
	res := e.pop(fifoReq("B"))
	require.Equal(t, []int64{0, 1}, offsetsOf(res)[:2])
	assert.Equal(t, []int{2, 2}, attemptsOf(res)[:2])
	for _, d := range res.Messages {
		require.NoError(t, e.svc.Ack(d.Handle))
	}
}

// ---------------------------------------------------------------- the lock

// holdLock parks a non-FIFO pop of group g on topic t inside its Source read
// of queue 1, i.e. holding the group@topic lock, until release is called.
func (e *accEnv) holdLock(t *testing.T) (release func(), done <-chan popOutcome) {
	t.Helper()
	entered, rel := e.src.holdNextRead()
	r := accReq()
	r.QueueID = 1
	r.Max = 1
	inner := e.popAsync(context.Background(), r)
	out, finished := make(chan popOutcome, 1), make(chan struct{})
	go func() { o := <-inner; close(finished); out <- o }()
	select {
	case <-entered:
	case <-time.After(2 * time.Second):
		rel()
		t.Fatal("holder pop never reached the Source read")
	}
	t.Cleanup(func() { rel(); <-finished })
	return rel, out
}

// "A contended non-FIFO pop never waits on the lock: with Poll>0 it long-polls,
// otherwise it returns empty." The long poll is woken by the lock's release.
func TestAcceptContendedNonFIFOPopNeverWaitsOnLock(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 2)
	release, holder := e.holdLock(t)

	o := waitOutcome(t, e.popAsync(context.Background(), accReq()), time.Second, "contended Poll=0")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages, "contended, Poll 0: empty at once")

	r := accReq()
	r.Poll = 30 * time.Second
	polled := e.popAsync(context.Background(), r)
	requireStillWaiting(t, polled, 150*time.Millisecond, "contended Poll>0")
	release()
	ho := waitOutcome(t, holder, 2*time.Second, "holder")
	require.NoError(t, ho.err)
	o = waitOutcome(t, polled, 2*time.Second, "long-poll woken by the lock release")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0, 1}, offsetsOf(o.res))
}

// "A FIFO pop with a non-empty attemptId waits for the lock … it must never come
// back empty because of the lock. If the wait runs out it returns
// ErrLockTimeout" — for each bound: Options.LockWait (Poll 0), Poll, ctx.
func TestAcceptFIFORetryLockWaitRunsOutWithErrLockTimeoutNotEmpty(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 120 * time.Millisecond})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 1)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Equal(t, []int64{0}, offsetsOf(batch))
	e.holdLock(t)

	cases := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		req  pop.Request
	}{
		{"LockWait", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, a},
		{"Poll", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			func() pop.Request { r := a; r.Poll = 120 * time.Millisecond; return r }()},
		{"ctx", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 120*time.Millisecond)
		}, func() pop.Request { r := a; r.Poll = 30 * time.Second; return r }()},
		{"new attemptId", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			fifoReq("N")},
	}
	for _, c := range cases {
		ctx, cancel := c.ctx()
		o := waitOutcome(t, e.popAsync(ctx, c.req), 3*time.Second, c.name)
		cancel()
		require.Error(t, o.err, "%s: a FIFO pop with an attemptId must not come back empty because of the lock", c.name)
		assert.ErrorIs(t, o.err, pop.ErrLockTimeout, c.name)
		assert.Empty(t, o.res.Messages, c.name)
		assert.GreaterOrEqual(t, o.at, 90*time.Millisecond, "%s: it waited for the lock", c.name)
	}
	// Nothing changed: the batch is still A's, attempt 1, and still blocks B.
	require.NoError(t, e.svc.Ack(batch.Messages[0].Handle), "timed-out retries did not supersede the handle")
}

// The FIFO retry waits for the lock and gets its batch as soon as the lock is
// released (no empty answer, no extra attempt).
func TestAcceptFIFORetryWaitsForLockThenGetsSameBatch(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 30 * time.Second})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 1)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Equal(t, []int64{0}, offsetsOf(batch))
	release, _ := e.holdLock(t)

	retries := make([]<-chan popOutcome, 4)
	for i := range retries {
		retries[i] = e.popAsync(context.Background(), a)
	}
	newID := e.popAsync(context.Background(), fifoReq("B"))
	requireStillWaiting(t, retries[0], 150*time.Millisecond, "FIFO retry")
	release()
	for i, ch := range retries {
		o := waitOutcome(t, ch, 2*time.Second, "retry woken by lock release")
		require.NoError(t, o.err, i)
		require.Equal(t, []int64{0}, offsetsOf(o.res), "retry %d: same batch, never empty", i)
		assert.Equal(t, []int{1}, attemptsOf(o.res), "retry %d: no attempt counted", i)
	}
	o := waitOutcome(t, newID, 2*time.Second, "new attemptId")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages, "another attemptId stays blocked")
}

// ---------------------------------------------------------------- long polling

// "Long-polling waiters wake on message arrival, on an ack that unblocks a FIFO
// queue, on a lock release, and on an invisible time that ends" (lock release:
// TestAcceptContendedNonFIFOPopNeverWaitsOnLock). Poll is 30 s; each must
// return within 2 s, which it cannot without its wake-up.
func TestAcceptLongPollWakesOnArrival(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	r := accReq()
	r.Poll = 30 * time.Second
	ch := e.popAsync(context.Background(), r)
	requireStillWaiting(t, ch, 100*time.Millisecond, "arrival")
	e.appendN("t", 0, 1)
	o := waitOutcome(t, ch, 2*time.Second, "arrival")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))
}

func TestAcceptLongPollWakesOnFIFOUnblockingAck(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	e.appendN("t", 0, 2)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Equal(t, []int64{0}, offsetsOf(batch))
	b := fifoReq("B")
	b.Max = 1
	b.Poll = 30 * time.Second
	ch := e.popAsync(context.Background(), b)
	requireStillWaiting(t, ch, 100*time.Millisecond, "FIFO blocked")
	require.NoError(t, e.svc.Ack(batch.Messages[0].Handle))
	o := waitOutcome(t, ch, 2*time.Second, "FIFO-unblocking ack")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{1}, offsetsOf(o.res))
}

func TestAcceptLongPollWakesWhenInvisibleTimeEnds(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 1)
	e.appendN("t", 1, 1)
	require.Len(t, e.pop(accReq()).Messages, 1)
	fr := fifoReq("A")
	fr.QueueID = 1
	require.Len(t, e.pop(fr).Messages, 1)

	r := accReq()
	r.Poll = 30 * time.Second
	plain := e.popAsync(context.Background(), r)
	fb := fifoReq("B")
	fb.QueueID = 1
	fb.Poll = 30 * time.Second
	fifo := e.popAsync(context.Background(), fb)
	requireStillWaiting(t, plain, 150*time.Millisecond, "invisible")
	e.clk.Advance(31 * time.Second)
	o := waitOutcome(t, plain, 2*time.Second, "invisible time ended")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))
	assert.Equal(t, []int{2}, attemptsOf(o.res))
	o = waitOutcome(t, fifo, 2*time.Second, "FIFO block ended")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))
	assert.Equal(t, []int{2}, attemptsOf(o.res))
}

// ---------------------------------------------------------------- restart

// "Nothing popped and unacked is ever lost: after a restart of the host it is
// delivered again (at-least-once)." and "After a restart, old handles may
// answer either; their messages are delivered again anyway." The host restart
// reopens the store and the persisted offsets too.
func TestAcceptUnackedDeliveredAgainAfterHostRestart(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	require.NoError(t, e.offs.Close())
	offPath := filepath.Join(e.dir, "offsets")
	offs, err := offset.Open(offset.Options{Path: offPath})
	require.NoError(t, err)
	e.offs = offs
	e.opts.Offsets = offs
	e.restart()

	e.appendN("t", 0, 6)
	e.appendN("t", 1, 3)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 6)
	for _, i := range []int{0, 1, 3} {
		require.NoError(t, e.svc.Ack(res.Messages[i].Handle))
	}
	require.Equal(t, int64(2), e.committed(0))
	f := fifoReq("A")
	f.QueueID = 1
	f.Max = 2
	fb := e.pop(f)
	require.Equal(t, []int64{0, 1}, offsetsOf(fb))

	// Host restart: everything closed, reopened from disk.
	require.NoError(t, e.svc.Close())
	require.NoError(t, e.st.Close())
	require.NoError(t, e.offs.Close())
	e.openStore()
	offs, err = offset.Open(offset.Options{Path: offPath})
	require.NoError(t, err)
	e.offs = offs
	e.opts.Offsets = offs
	e.svc = pop.New(e.src, e.opts)
	e.cur.Store(e.svc)

	for _, d := range res.Messages {
		err := e.svc.Ack(d.Handle)
		assert.True(t, errors.Is(err, pop.ErrBadHandle) || errors.Is(err, pop.ErrStaleHandle), "old handle after restart: %v", err)
	}
	assert.Equal(t, int64(2), e.committed(0), "old handles changed nothing")

	again := e.pop(accReq())
	got := offsetsOf(again)
	for _, want := range []int64{2, 4, 5} {
		assert.Contains(t, got, want, "unacked message %d delivered again after the restart", want)
	}
	assert.NotContains(t, got, int64(0), "the committed offset is never re-delivered")
	f.AttemptID = "B"
	assert.Equal(t, []int64{0, 1}, offsetsOf(e.pop(f)), "the unacked FIFO batch is delivered again, in order")
}

// Same sentence, Service-only restart under concurrent consumers: a new
// Service over the same store and offsets delivers every message that was
// never acked.
func TestAcceptNoLossAcrossServiceRestartWithConcurrentConsumers(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	const perQueue = 60
	for q := 0; q < 3; q++ {
		e.appendN("t", q, perQueue)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			r := accReq()
			r.QueueID = pop.AllQueues
			r.Max = 7
			for i := 0; i < 6; i++ {
				res, err := e.svc.Pop(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				for j, d := range res.Messages {
					if (j+c)%3 == 0 {
						continue // left unacked
					}
					if assert.NoError(t, e.svc.Ack(d.Handle)) {
						mu.Lock()
						acked[string(d.Message.Body)] = true
						mu.Unlock()
					}
				}
			}
		}(c)
	}
	wg.Wait()
	e.restart()

	seen := map[string]bool{}
	r := accReq()
	r.QueueID = pop.AllQueues
	for i := 0; i < 100; i++ {
		res := e.pop(r)
		if len(res.Messages) == 0 {
			break
		}
		for _, d := range res.Messages {
			seen[string(d.Message.Body)] = true
			require.NoError(t, e.svc.Ack(d.Handle))
		}
	}
	for q := 0; q < 3; q++ {
		for i := 0; i < perQueue; i++ {
			b := fmt.Sprintf("t/%d/%d", q, i)
			assert.True(t, acked[b] || seen[b], "message %s lost across the restart", b)
		}
		assert.Equal(t, int64(perQueue), e.committed(q))
	}
}

// ---------------------------------------------------------------- handles

// "Ack/ChangeInvisible with a malformed or forged handle → ErrBadHandle …;
// nothing changes."
func TestAcceptMalformedOrForgedHandleIsErrBadHandleAndChangesNothing(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 1)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 1)
	h := res.Messages[0].Handle

	bad := []string{"", "x", "not-a-handle", h[:len(h)/2], h + "x", h + h, "\x00\xff" + h}
	for i := 0; i < len(h); i++ {
		for _, c := range []byte{'A', 'z', '0', '_', '-', '.'} {
			if h[i] != c {
				bad = append(bad, h[:i]+string(c)+h[i+1:])
				break
			}
		}
	}
	// A handle from another Service (another key) is forged for this one.
	other := pop.New(e.src, pop.Options{Now: e.clk.Now, Offsets: pop.NewMemoryOffsets()})
	oRes, err := other.Pop(context.Background(), accReq())
	require.NoError(t, err)
	require.Len(t, oRes.Messages, 1)
	bad = append(bad, oRes.Messages[0].Handle)
	require.NoError(t, other.Close())

	for _, b := range bad {
		assert.ErrorIs(t, e.svc.Ack(b), pop.ErrBadHandle, "Ack(%q)", b)
		nh, err := e.svc.ChangeInvisible(b, time.Minute)
		assert.ErrorIs(t, err, pop.ErrBadHandle, "ChangeInvisible(%q)", b)
		assert.Empty(t, nh)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0), "nothing committed")
	// Nothing changed: the genuine handle still works and the message is
	// still in flight with its original invisible time.
	e.clk.Advance(31 * time.Second)
	again := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(again))
	assert.Equal(t, 2, again.Messages[0].Attempts)
}

// "… with a handle of a delivery that was superseded (re-popped, revived,
// already acked, popped before an offset reset) → ErrStaleHandle; nothing
// changes."
func TestAcceptSupersededHandleIsErrStaleHandleAndChangesNothing(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 2)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 2)
	h0, h1 := res.Messages[0].Handle, res.Messages[1].Handle

	// Already acked.
	require.NoError(t, e.svc.Ack(h1))
	assert.ErrorIs(t, e.svc.Ack(h1), pop.ErrStaleHandle)
	_, err := e.svc.ChangeInvisible(h1, time.Minute)
	assert.ErrorIs(t, err, pop.ErrStaleHandle)

	// Changed: the old handle is stale and using it changes nothing.
	nh, err := e.svc.ChangeInvisible(h0, 5*time.Minute)
	require.NoError(t, err)
	_, err = e.svc.ChangeInvisible(h0, time.Second)
	assert.ErrorIs(t, err, pop.ErrStaleHandle)
	e.clk.Advance(time.Minute)
	assert.Empty(t, e.pop(accReq()).Messages, "the stale ChangeInvisible did not shorten the invisible time")
	assert.LessOrEqual(t, e.committed(0), int64(0))
	require.NoError(t, e.svc.Ack(nh))
	assert.Equal(t, int64(2), e.committed(0))
}

// ---------------------------------------------------------------- bad requests

// Conventions: "Bad input gets a clear error and changes nothing. No panics on
// input." — for pop: Max outside 1..32, empty group, topic or client id,
// negative durations, a queue id below AllQueues → ErrInvalid.
func TestAcceptBadRequestIsErrInvalidAndChangesNothing(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 1)
	mod := map[string]func(r *pop.Request){
		"Max 0":              func(r *pop.Request) { r.Max = 0 },
		"Max 33":             func(r *pop.Request) { r.Max = 33 },
		"Max -1":             func(r *pop.Request) { r.Max = -1 },
		"empty group":        func(r *pop.Request) { r.Group = "" },
		"empty topic":        func(r *pop.Request) { r.Topic = "" },
		"empty client":       func(r *pop.Request) { r.ClientID = "" },
		"negative Invisible": func(r *pop.Request) { r.Invisible = -time.Second },
		"negative Poll":      func(r *pop.Request) { r.Poll = -time.Second },
		"QueueID -2":         func(r *pop.Request) { r.QueueID = -2 },
		"FIFO Max 33":        func(r *pop.Request) { r.FIFO = true; r.AttemptID = "A"; r.Max = 33 },
		"FIFO empty group":   func(r *pop.Request) { r.FIFO = true; r.AttemptID = "A"; r.Group = "" },
	}
	for name, m := range mod {
		r := accReq()
		r.Poll = 30 * time.Second // an invalid request must not wait either
		m(&r)
		o := waitOutcome(t, e.popAsync(context.Background(), r), 2*time.Second, name)
		assert.ErrorIs(t, o.err, pop.ErrInvalid, name)
		assert.Empty(t, o.res.Messages, name)
	}
	// Nothing changed: the message is delivered for the first time, and a
	// FIFO attemptId "A" owns no batch.
	res := e.pop(accReq())
	require.Equal(t, []int64{0}, offsetsOf(res))
	assert.Equal(t, 1, res.Messages[0].Attempts)

	// Max bounds are inclusive.
	e.appendN("t", 0, 40)
	r := accReq()
	r.Max = 32
	assert.Len(t, e.pop(r).Messages, 32)
	r.Max = 1
	assert.Len(t, e.pop(r).Messages, 1)

	_, err := e.svc.ChangeInvisible(res.Messages[0].Handle, -time.Second)
	assert.ErrorIs(t, err, pop.ErrInvalid, "negative ChangeInvisible duration")
	require.NoError(t, e.svc.Ack(res.Messages[0].Handle), "the handle was not superseded by the rejected change")
}

// ---------------------------------------------------------------- Close

// Conventions: every goroutine owned, stopped and waited for by Close
// (idempotent); calls after Close return ErrClosed. Close wakes every waiter.
func TestAcceptCloseWakesWaitersLaterCallsErrClosedNoLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	func() {
		clk := newAccClock()
		dir := t.TempDir()
		var cur atomic.Pointer[pop.Service]
		st, err := store.Open(dir, store.Options{Sync: store.SyncNone, OnAppend: func(topic string, q int, _ int64) {
			if s := cur.Load(); s != nil {
				s.Arrived(topic, q)
			}
		}})
		require.NoError(t, err)
		defer st.Close()
		src := &accSource{Store: st}
		svc := pop.New(src, pop.Options{Now: clk.Now, LockWait: time.Minute})
		cur.Store(svc)
		require.NoError(t, st.Append(&store.Message{Topic: "t", QueueID: 0}, &store.Message{Topic: "f", QueueID: 0}, &store.Message{Topic: "f", QueueID: 1}))

		// A FIFO batch on f/0 so that another attemptId long-polls on the block.
		f := fifoReq("A")
		f.Topic = "f"
		res, err := svc.Pop(context.Background(), f)
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		handle := res.Messages[0].Handle

		var waiters []<-chan popOutcome
		start := func(r pop.Request) {
			ch := make(chan popOutcome, 1)
			go func() { res, err := svc.Pop(context.Background(), r); ch <- popOutcome{res: res, err: err} }()
			waiters = append(waiters, ch)
		}
		r := accReq()
		r.Topic = "empty"
		r.Poll = time.Minute
		start(r)
		fb := fifoReq("B")
		fb.Topic = "f"
		fb.Poll = time.Minute
		start(fb)

		// A FIFO retry queued behind a held lock.
		entered, release := src.holdNextRead()
		defer release()
		hr := accReq()
		hr.Topic = "f"
		hr.QueueID = 1
		holder := make(chan error, 1)
		go func() { _, err := svc.Pop(context.Background(), hr); holder <- err }()
		<-entered
		fr := f
		fr.Poll = time.Minute
		start(fr)
		time.Sleep(100 * time.Millisecond) // let them all settle into waiting

		closed := make(chan error, 1)
		go func() { closed <- svc.Close() }()
		for i, ch := range waiters {
			o := waitOutcome(t, ch, 2*time.Second, fmt.Sprintf("waiter %d after Close", i))
			assert.ErrorIs(t, o.err, pop.ErrClosed, "waiter %d", i)
		}
		release()
		<-holder
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Fatal("Close did not return")
		}
		assert.NoError(t, svc.Close(), "Close is idempotent")

		_, err = svc.Pop(context.Background(), accReq())
		assert.ErrorIs(t, err, pop.ErrClosed)
		assert.ErrorIs(t, svc.Ack(handle), pop.ErrClosed)
		_, err = svc.ChangeInvisible(handle, time.Minute)
		assert.ErrorIs(t, err, pop.ErrClosed)
		svc.Arrived("t", 0) // must not panic or block
		require.NoError(t, st.Append(&store.Message{Topic: "t"}))
		_ = svc.Stats()
		require.NoError(t, st.Close())
	}()
	goleak.VerifyNone(t, ignore)
}

// ---------------------------------------------------------------- Stats

// Conventions: "Each package has Stats() returning a plain struct of counters".
func TestAcceptStatsCountPopsDeliveriesAcksAndRejections(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 3)
	s0 := e.svc.Stats()
	res := e.pop(accReq())
	require.Len(t, res.Messages, 3)
	require.NoError(t, e.svc.Ack(res.Messages[0].Handle))
	assert.ErrorIs(t, e.svc.Ack(res.Messages[0].Handle), pop.ErrStaleHandle)
	assert.ErrorIs(t, e.svc.Ack("junk"), pop.ErrBadHandle)
	r := accReq()
	r.Max = 0
	_, err := e.svc.Pop(context.Background(), r)
	assert.ErrorIs(t, err, pop.ErrInvalid)
	assert.Empty(t, e.pop(accReq()).Messages)
	e.clk.Advance(31 * time.Second)
	require.Len(t, e.pop(accReq()).Messages, 2)

	s := e.svc.Stats()
	assert.Equal(t, s0.Pops+3, s.Pops)
	assert.Equal(t, s0.Empty+1, s.Empty)
	assert.Equal(t, s0.Delivered+5, s.Delivered)
	assert.Equal(t, s0.Redelivered+2, s.Redelivered)
	assert.Equal(t, s0.Acks+1, s.Acks)
	assert.Equal(t, s0.Commits+1, s.Commits)
	assert.Equal(t, s0.StaleHandles+1, s.StaleHandles)
	assert.Equal(t, s0.BadHandles+1, s.BadHandles)
	assert.Equal(t, s0.Invalid+1, s.Invalid)
	assert.Equal(t, int64(0), s.Waiters)
}

// AllQueues: "rotate over every queue of the topic" — no queue starves.
func TestAcceptAllQueuesRotatesOverEveryQueue(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	for q := 0; q < 3; q++ {
		e.appendN("t", q, 10)
	}
	r := accReq()
	r.QueueID = pop.AllQueues
	r.Max = 1
	hits := map[int]int{}
	for i := 0; i < 6; i++ {
		res := e.pop(r)
		require.Len(t, res.Messages, 1)
		hits[res.Messages[0].Message.QueueID]++
	}
	for q := 0; q < 3; q++ {
		assert.Equal(t, 2, hits[q], "queue %d over 6 pops of Max 1: %v", q, hits)
	}
}

// ---------------------------------------------------------------- sharper edges

// Reset sentence, the sharp case: a message popped before a reset and popped
// again after it (first delivery under the new epoch, same offset, Attempts 1)
// must not be ackable through its pre-reset handle.
func TestAcceptPreResetHandleOfRepoppedOffsetIsStale(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 3)
	before := e.pop(accReq())
	require.Equal(t, []int64{0, 1, 2}, offsetsOf(before))
	_, err := e.offs.Reset("g", "t", 0, 0)
	require.NoError(t, err)
	after := e.pop(accReq())
	require.Equal(t, []int64{0, 1, 2}, offsetsOf(after), "reset to 0: everything again at once")
	assert.Equal(t, []int{1, 1, 1}, attemptsOf(after))
	for i := range before.Messages {
		assert.ErrorIs(t, e.svc.Ack(before.Messages[i].Handle), pop.ErrStaleHandle, "pre-reset handle of offset %d", i)
		_, err := e.svc.ChangeInvisible(before.Messages[i].Handle, time.Hour)
		assert.ErrorIs(t, err, pop.ErrStaleHandle)
	}
	assert.Equal(t, int64(0), e.committed(0), "pre-reset handles committed nothing")
	for _, d := range after.Messages {
		require.NoError(t, e.svc.Ack(d.Handle), "the post-reset handles are the live ones")
	}
	assert.Equal(t, int64(3), e.committed(0))
}

// Same for FIFO: the pre-reset batch's attemptId does not own the post-reset
// batch, and its handles are stale.
func TestAcceptPreResetFIFOAttemptIDDoesNotOwnNewBatch(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 3)
	a := fifoReq("A")
	a.Max = 2
	before := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(before))
	_, err := e.offs.Reset("g", "t", 0, 0)
	require.NoError(t, err)
	b := fifoReq("B")
	b.Max = 2
	after := e.pop(b)
	require.Equal(t, []int64{0, 1}, offsetsOf(after))
	assert.Equal(t, []int{1, 1}, attemptsOf(after))
	assert.Empty(t, e.pop(a).Messages, "A's batch was dropped by the reset; B owns the new one")
	for _, d := range before.Messages {
		assert.ErrorIs(t, e.svc.Ack(d.Handle), pop.ErrStaleHandle)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0))
}

// Restart sentence with a stable HandleKey (handles verify across restarts):
// an old handle of a message the new Service has delivered again must not
// settle the new delivery ("old handles may answer either; their messages are
// delivered again anyway").
func TestAcceptOldHandleAfterRestartCannotSettleNewDelivery(t *testing.T) {
	e := newAccEnv(t, pop.Options{HandleKey: []byte("0123456789abcdef0123456789abcdef")})
	e.appendN("t", 0, 2)
	before := e.pop(accReq())
	require.Len(t, before.Messages, 2)
	e.restart()
	after := e.pop(accReq())
	require.Equal(t, []int64{0, 1}, offsetsOf(after))
	for _, d := range before.Messages {
		err := e.svc.Ack(d.Handle)
		assert.True(t, errors.Is(err, pop.ErrBadHandle) || errors.Is(err, pop.ErrStaleHandle), "old handle after restart: %v", err)
	}
	assert.LessOrEqual(t, e.committed(0), int64(0))
	for _, d := range after.Messages {
		require.NoError(t, e.svc.Ack(d.Handle))
	}
	assert.Equal(t, int64(2), e.committed(0))
}

// Long polling on one queue is not answered early by arrivals elsewhere, and
// groups are independent consumers of the same messages.
func TestAcceptLongPollIgnoresArrivalOnOtherQueueAndGroupsAreIndependent(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	r := accReq()
	r.Poll = 30 * time.Second
	ch := e.popAsync(context.Background(), r)
	requireStillWaiting(t, ch, 100*time.Millisecond, "before any arrival")
	e.appendN("t", 1, 1)
	e.appendN("other", 0, 1)
	requireStillWaiting(t, ch, 150*time.Millisecond, "after arrivals on other queues")
	assert.Equal(t, int64(1), e.svc.Stats().Waiters)
	e.appendN("t", 0, 1)
	o := waitOutcome(t, ch, 2*time.Second, "arrival")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))

	g2 := accReq()
	g2.Group = "g2"
	res := e.pop(g2)
	assert.Equal(t, []int64{0}, offsetsOf(res), "another group gets the same message")
	assert.Equal(t, []int{1}, attemptsOf(res))
}

// flakyOffsets fails CommitFenced while fail is set.
type flakyOffsets struct {
	*offset.Manager
	fail atomic.Bool
}

func (f *flakyOffsets) CommitFenced(group, topic string, q int, off int64, epoch uint64) error {
	if f.fail.Load() {
		return errors.New("offset store down")
	}
	return f.Manager.CommitFenced(group, topic, q, off, epoch)
}

// "The ack that advances the lowest unacked offset commits it (through
// Offsets) before Ack returns": an Ack whose commit failed cannot report
// success, and the message is not lost.
func TestAcceptAckWhoseCommitFailsIsNotASuccess(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	fo := &flakyOffsets{Manager: e.offs}
	e.opts.Offsets = fo
	e.restart()
	e.appendN("t", 0, 2)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 2)
	fo.fail.Store(true)
	err := e.svc.Ack(res.Messages[0].Handle)
	require.Error(t, err, "the commit failed: Ack must not report success")
	assert.LessOrEqual(t, e.committed(0), int64(0))
	fo.fail.Store(false)
	if err := e.svc.Ack(res.Messages[0].Handle); err != nil {
		// The ack was not applied: the message must come again.
		e.clk.Advance(31 * time.Second)
		again := e.pop(accReq())
		require.Contains(t, offsetsOf(again), int64(0), "an unapplied ack must not lose the message")
		for _, d := range again.Messages {
			require.NoError(t, e.svc.Ack(d.Handle))
		}
	} else {
		require.NoError(t, e.svc.Ack(res.Messages[1].Handle))
	}
	assert.Equal(t, int64(2), e.committed(0))
}

// A FIFO retry that waits for the lock re-checks the in-flight state once it
// has it: if the batch was acked meanwhile, the retry must not re-deliver it.
func TestAcceptFIFORetryRechecksStateAfterLockWait(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 30 * time.Second})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 1)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Equal(t, []int64{0}, offsetsOf(batch))
	release, _ := e.holdLock(t)
	retry := e.popAsync(context.Background(), a)
	requireStillWaiting(t, retry, 100*time.Millisecond, "retry behind lock")
	require.NoError(t, e.svc.Ack(batch.Messages[0].Handle))
	release()
	o := waitOutcome(t, retry, 2*time.Second, "retry")
	require.NoError(t, o.err)
	assert.NotContains(t, offsetsOf(o.res), int64(0), "an acked message never comes again")
}

// Concurrent resets and acks: whatever the interleaving, once Reset returned
// the committed offset is never moved back below the reset by old progress.
func TestAcceptConcurrentAcksNeverCommitOverAReset(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 300)
	r := accReq()
	r.Max = 8
	var stop atomic.Bool
	var wg sync.WaitGroup
	for c := 0; c < 3; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				res, err := e.svc.Pop(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				if len(res.Messages) == 0 {
					return
				}
				for _, d := range res.Messages {
					err := e.svc.Ack(d.Handle)
					if err != nil && !errors.Is(err, pop.ErrStaleHandle) {
						assert.NoError(t, err)
					}
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	_, err := e.offs.Reset("g", "t", 0, 250)
	require.NoError(t, err)
	low := int64(1 << 62)
	for i := 0; i < 200; i++ {
		if c := e.committed(0); c < low {
			low = c
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	assert.GreaterOrEqual(t, low, int64(250), "old progress written over the reset")
	assert.GreaterOrEqual(t, e.committed(0), int64(250))
}

// "Nothing popped and unacked is ever lost" together with InitialOffset
// Latest: a group that popped (but never acked) under Latest must get those
// messages again after a restart, not jump to the new end of the queue.
func TestAcceptLatestGroupDoesNotLoseUnackedAcrossRestart(t *testing.T) {
	e := newAccEnv(t, pop.Options{InitialOffset: pop.Latest})
	e.appendN("t", 0, 2) // before the group exists: skipped
	assert.Empty(t, e.pop(accReq()).Messages)
	e.appendN("t", 0, 2)
	res := e.pop(accReq())
	require.Equal(t, []int64{2, 3}, offsetsOf(res))
	e.restart()
	e.appendN("t", 0, 1)
	again := e.pop(accReq())
	assert.Equal(t, []int64{2, 3, 4}, offsetsOf(again), "popped-but-unacked messages lost across a restart under Latest")
}

// A group whose committed offset fell below MinOffset (retention) is not
// wedged: popping goes on from what is readable.
func TestAcceptCommittedBelowMinOffsetDoesNotWedgeTheGroup(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	require.NoError(t, e.st.Close())
	st, err := store.Open(filepath.Join(e.dir, "log"), store.Options{Sync: store.SyncNone, SegmentSize: 512, MaxBytes: 1, RetainEvery: -1})
	require.NoError(t, err)
	e.st = st
	e.src.Store = st
	require.NoError(t, st.Append(&store.Message{Topic: "t", Body: make([]byte, 100)}))
	res := e.pop(accReq())
	require.Len(t, res.Messages, 1)
	require.NoError(t, e.svc.Ack(res.Messages[0].Handle))
	require.Equal(t, int64(1), e.committed(0))
	for i := 0; i < 40; i++ {
		require.NoError(t, st.Append(&store.Message{Topic: "t", Body: make([]byte, 100)}))
	}
	_, err = st.Retain()
	require.NoError(t, err)
	require.NoError(t, st.Append(&store.Message{Topic: "t", Body: []byte("fresh")}))
	min := st.MinOffset("t", 0)
	require.Greater(t, min, int64(1))
	got, err := e.svc.Pop(context.Background(), accReq())
	require.NoError(t, err, "a retained-away committed offset must not wedge the group")
	require.NotEmpty(t, got.Messages)
	assert.Equal(t, min, got.Messages[0].Message.QueueOffset)
}

// "Serialization is a group@topic lock": another group is not contended.
func TestAcceptLockIsPerGroupAtTopic(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 100 * time.Millisecond})
	e.appendN("t", 0, 1)
	e.appendN("t", 1, 1)
	e.holdLock(t)
	g2 := accReq()
	g2.Group = "g2"
	o := waitOutcome(t, e.popAsync(context.Background(), g2), 2*time.Second, "other group")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res), "group g2 is not serialized behind group g")
	f := fifoReq("A")
	f.Group = "g3"
	o = waitOutcome(t, e.popAsync(context.Background(), f), 2*time.Second, "other group FIFO")
	require.NoError(t, o.err)
	assert.Equal(t, []int64{0}, offsetsOf(o.res))
}

// A DeadLetter that appends to a dead-letter topic of the same store (which
// fires OnAppend → Arrived) must not deadlock the service.
func TestAcceptDeadLetterMayAppendToStore(t *testing.T) {
	var e *accEnv
	e = newAccEnv(t, pop.Options{MaxAttempts: 1, DeadLetter: func(group string, m *store.Message) error {
		return e.st.Append(&store.Message{Topic: "%DLQ%" + group, Body: m.Body})
	}})
	e.appendN("t", 0, 1)
	require.Len(t, e.pop(accReq()).Messages, 1)
	e.clk.Advance(31 * time.Second)
	o := waitOutcome(t, e.popAsync(context.Background(), accReq()), 2*time.Second, "pop that dead-letters")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages)
	dl := accReq()
	dl.Topic = "%DLQ%g"
	res := e.pop(dl)
	require.Len(t, res.Messages, 1)
	assert.Equal(t, []byte("t/0/0"), res.Messages[0].Message.Body)
}

// Issue: caps on waiters with a clear error past them.
func TestAcceptTooManyWaitersIsAClearError(t *testing.T) {
	e := newAccEnv(t, pop.Options{MaxWaitersPerKey: 2})
	r := accReq()
	r.Poll = 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	w1, w2 := e.popAsync(ctx, r), e.popAsync(ctx, r)
	require.Eventually(t, func() bool { return e.svc.Stats().Waiters == 2 }, 2*time.Second, time.Millisecond)
	o := waitOutcome(t, e.popAsync(context.Background(), r), time.Second, "third waiter")
	assert.ErrorIs(t, o.err, pop.ErrTooManyWaiters)
	cancel()
	waitOutcome(t, w1, 2*time.Second, "w1")
	waitOutcome(t, w2, 2*time.Second, "w2")
}

// Issue: "ChangeInvisible on a FIFO handle extends the block." Max is honoured.
func TestAcceptFIFOChangeInvisibleExtendsBlock(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	e.appendN("t", 0, 5)
	a := fifoReq("A")
	a.Max = 2
	batch := e.pop(a)
	require.Equal(t, []int64{0, 1}, offsetsOf(batch))
	var nh []string
	for _, d := range batch.Messages {
		h, err := e.svc.ChangeInvisible(d.Handle, 5*time.Minute)
		require.NoError(t, err)
		nh = append(nh, h)
	}
	e.clk.Advance(time.Minute)
	assert.Empty(t, e.pop(fifoReq("B")).Messages, "block extended past the original invisible time")
	for _, h := range nh {
		require.NoError(t, e.svc.Ack(h))
	}
	b := fifoReq("B")
	b.Max = 2
	assert.Equal(t, []int64{2, 3}, offsetsOf(e.pop(b)))
}

// resettingOffsets performs an offset reset at the worst moment: inside the
// first CommitFenced after arm, just before the commit lands, so the Ack that
// carries it was issued (and popped) before the reset.
type resettingOffsets struct {
	*offset.Manager
	armed atomic.Bool
	to    int64
}

func (r *resettingOffsets) CommitFenced(group, topic string, q int, off int64, epoch uint64) error {
	if r.armed.CompareAndSwap(true, false) {
		if _, err := r.Manager.Reset(group, topic, q, r.to); err != nil {
			return err
		}
	}
	return r.Manager.CommitFenced(group, topic, q, off, epoch)
}

// Reset and handle sentences under the race: an Ack whose handle was popped
// before a reset that lands while the Ack is committing answers
// ErrStaleHandle (not a raw Offsets error) and changes nothing.
func TestAcceptAckRacingAResetIsStaleHandle(t *testing.T) {
	e := newAccEnv(t, pop.Options{})
	ro := &resettingOffsets{Manager: e.offs, to: 5}
	e.opts.Offsets = ro
	e.restart()
	e.appendN("t", 0, 8)
	res := e.pop(accReq())
	require.Len(t, res.Messages, 8)
	ro.armed.Store(true)
	err := e.svc.Ack(res.Messages[0].Handle)
	assert.ErrorIs(t, err, pop.ErrStaleHandle, "a handle popped before a reset is stale, whenever the reset lands")
	assert.Equal(t, int64(5), e.committed(0), "the reset stands")
	assert.Equal(t, []int64{5, 6, 7}, offsetsOf(e.pop(accReq())))
}

// "popping restarts at the committed offset": a group whose offset was
// committed before its first pop starts there, under Latest too.
func TestAcceptGroupWithCommittedOffsetStartsThere(t *testing.T) {
	for _, init := range []pop.InitialOffset{pop.Earliest, pop.Latest} {
		e := newAccEnv(t, pop.Options{InitialOffset: init})
		e.appendN("t", 0, 6)
		require.NoError(t, e.offs.Commit("g", "t", 0, 4))
		assert.Equal(t, []int64{4, 5}, offsetsOf(e.pop(accReq())), "InitialOffset %v", init)
	}
}

// "no wake-up source is missing", under races: the arrival, the unblocking
// ack and the lock release happen right as the pop goes to sleep. A lost
// wake-up shows as a 30 s Poll not returning within 2 s.
func TestAcceptNoLostWakeUpWhenEventRacesTheWait(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	for i := 0; i < 40; i++ {
		r := accReq()
		r.Poll = 30 * time.Second
		r.Max = 1
		ch := e.popAsync(context.Background(), r)
		e.appendN("t", 0, 1)
		o := waitOutcome(t, ch, 2*time.Second, fmt.Sprintf("arrival race %d", i))
		require.NoError(t, o.err)
		require.Equal(t, []int64{int64(i)}, offsetsOf(o.res))
		require.NoError(t, e.svc.Ack(o.res.Messages[0].Handle))
	}

	e.appendN("f", 0, 41)
	a := fifoReq("A")
	a.Topic = "f"
	a.Max = 1
	batch := e.pop(a)
	for i := 0; i < 40; i++ {
		b := fifoReq(fmt.Sprintf("B%d", i))
		b.Topic = "f"
		b.Max = 1
		b.Poll = 30 * time.Second
		ch := e.popAsync(context.Background(), b)
		require.NoError(t, e.svc.Ack(batch.Messages[0].Handle))
		o := waitOutcome(t, ch, 2*time.Second, fmt.Sprintf("unblocking-ack race %d", i))
		require.NoError(t, o.err)
		require.Equal(t, []int64{int64(i + 1)}, offsetsOf(o.res))
		batch = o.res
	}
}

// AllQueues long-poll wakes for a queue that did not exist when it started.
func TestAcceptAllQueuesLongPollWakesOnNewQueue(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	e.appendN("t", 0, 1)
	r := accReq()
	r.QueueID = pop.AllQueues
	require.Len(t, e.pop(r).Messages, 1)
	r.Poll = 30 * time.Second
	ch := e.popAsync(context.Background(), r)
	requireStillWaiting(t, ch, 100*time.Millisecond, "AllQueues")
	e.appendN("t", 5, 1)
	o := waitOutcome(t, ch, 2*time.Second, "new queue")
	require.NoError(t, o.err)
	require.Len(t, o.res.Messages, 1)
	assert.Equal(t, 5, o.res.Messages[0].Message.QueueID)
}

// Lock-release wake-up under races: the holder lets go right as the
// contended long-poll goes to sleep.
func TestAcceptNoLostLockReleaseWakeUp(t *testing.T) {
	e := newAccEnv(t, pop.Options{Tick: time.Hour})
	e.appendN("t", 0, 20)
	e.appendN("t", 1, 20)
	for i := 0; i < 15; i++ {
		release, holder := e.holdLock(t)
		r := accReq()
		r.Max = 1
		r.Poll = 30 * time.Second
		ch := e.popAsync(context.Background(), r)
		release()
		o := waitOutcome(t, ch, 2*time.Second, fmt.Sprintf("lock-release race %d", i))
		require.NoError(t, o.err)
		require.Len(t, o.res.Messages, 1)
		require.NoError(t, e.svc.Ack(o.res.Messages[0].Handle))
		ho := waitOutcome(t, holder, 2*time.Second, "holder")
		require.NoError(t, ho.err)
		for _, d := range ho.res.Messages {
			require.NoError(t, e.svc.Ack(d.Handle))
		}
	}
}

// Issue: "The lock has an expiry backstop that can never evict a lock its
// holder still uses" — however far the clock moves while the holder's read
// is slow, nobody else gets the lock, and the holder's pop completes.
func TestAcceptLockBackstopNeverEvictsALiveHolder(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockExpiry: time.Second, LockWait: 200 * time.Millisecond})
	e.appendN("t", 0, 2)
	e.appendN("t", 1, 1)
	a := fifoReq("A")
	a.Max = 1
	batch := e.pop(a)
	require.Len(t, batch.Messages, 1)
	release, holder := e.holdLock(t)
	e.clk.Advance(time.Hour)
	time.Sleep(150 * time.Millisecond) // a few background ticks with the clock far past LockExpiry
	o := waitOutcome(t, e.popAsync(context.Background(), a), 2*time.Second, "FIFO retry")
	assert.ErrorIs(t, o.err, pop.ErrLockTimeout, "the live holder's lock must not be evicted")
	o = waitOutcome(t, e.popAsync(context.Background(), accReq()), 2*time.Second, "non-FIFO")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Messages)
	release()
	ho := waitOutcome(t, holder, 2*time.Second, "holder")
	require.NoError(t, ho.err)
	assert.Equal(t, []int64{0}, offsetsOf(ho.res), "the slow holder's pop completes")
}

// Issue: "A request whose ctx/deadline is over by then changes nothing": a pop
// abandoned by its caller during the read delivers nothing and leaves the
// messages it read to the next pop, first attempt.
func TestAcceptAbandonedPopChangesNothing(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockExpiry: time.Second})
	e.appendN("t", 0, 3)
	entered, release := e.src.holdNextRead()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	ch := e.popAsync(ctx, accReq())
	<-entered
	cancel()
	e.clk.Advance(time.Minute) // past LockExpiry: the abandoned hold may be taken away
	// Another pop of the group proceeds (possibly after the backstop frees
	// the abandoned hold) and gets every message, first attempt.
	var got pop.Result
	require.Eventually(t, func() bool {
		res, err := e.svc.Pop(context.Background(), accReq())
		require.NoError(t, err)
		got = res
		return len(res.Messages) > 0
	}, 2*time.Second, 10*time.Millisecond)
	release()
	o := waitOutcome(t, ch, 2*time.Second, "abandoned pop")
	assert.Error(t, o.err)
	assert.Empty(t, o.res.Messages)
	assert.Equal(t, []int64{0, 1, 2}, offsetsOf(got))
	assert.Equal(t, []int{1, 1, 1}, attemptsOf(got))
	for _, d := range got.Messages {
		require.NoError(t, e.svc.Ack(d.Handle), "the abandoned pop superseded nothing")
	}
	assert.Equal(t, int64(3), e.committed(0))
}

// ---------------------------------------------------------------- model

// accModelMsg is the model's view of one message of queue t/0.
type accModelMsg struct {
	acked     bool
	attempts  int           // deliveries so far (0: never delivered since the last restart/reset)
	visibleAt time.Duration // clock offset from which it may be delivered again
	handle    string        // the live handle ("" if none)
	stale     []string      // superseded handles
}

// TestAcceptRandomOpsMatchPlainModel drives the real store, offset.Manager and
// Service with random appends, non-FIFO pops, acks with live and stale
// handles, invisible-time changes, clock moves, restarts and offset resets,
// against a model of the contract: a delivered message was visible, Attempts
// is exact, an acked message never comes again, stale handles answer
// ErrStaleHandle and change nothing, the committed offset is the lowest
// unacked offset right after every ack, and nothing is ever lost.
func TestAcceptRandomOpsMatchPlainModel(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	defer st.Close()
	offs, err := offset.Open(offset.Options{})
	require.NoError(t, err)
	defer offs.Close()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		topic := fmt.Sprintf("m%d", runs) // a fresh topic per run on one shared store
		clk := newAccClock()
		start := clk.Now()
		opts := pop.Options{Now: clk.Now, Offsets: offs, Tick: time.Hour}
		svc := pop.New(st, opts)
		defer func() { _ = svc.Close() }()

		var msgs []*accModelMsg
		var oldHandles []string // from before a restart: Bad or Stale
		now := func() time.Duration { return clk.Now().Sub(start) }
		lowestUnacked := func() int64 {
			for i, m := range msgs {
				if !m.acked {
					return int64(i)
				}
			}
			return int64(len(msgs))
		}
		committed := func() int64 {
			c, ok := offs.Committed("g", topic, 0)
			if !ok {
				return 0
			}
			return c
		}
		live := func() []int {
			var out []int
			for i, m := range msgs {
				if m.handle != "" && !m.acked {
					out = append(out, i)
				}
			}
			return out
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 4).Draw(rt, "n")
				for i := 0; i < n; i++ {
					require.NoError(rt, st.Append(&store.Message{Topic: topic, Body: []byte(fmt.Sprint(len(msgs)))}))
					msgs = append(msgs, &accModelMsg{})
				}
			},
			"pop": func(rt *rapid.T) {
				r := accReq()
				r.Topic = topic
				r.Max = rapid.IntRange(1, 5).Draw(rt, "max")
				res, err := svc.Pop(context.Background(), r)
				require.NoError(rt, err)
				visible := 0
				for _, m := range msgs {
					if !m.acked && (m.attempts == 0 || m.visibleAt <= now()) {
						visible++
					}
				}
				require.LessOrEqual(rt, len(res.Messages), r.Max)
				if visible > 0 {
					require.NotEmpty(rt, res.Messages, "%d visible messages but the pop was empty", visible)
				}
				for _, d := range res.Messages {
					off := d.Message.QueueOffset
					require.Less(rt, off, int64(len(msgs)))
					m := msgs[off]
					require.False(rt, m.acked, "acked message %d delivered again", off)
					require.True(rt, m.attempts == 0 || m.visibleAt <= now(), "message %d delivered while invisible", off)
					require.Equal(rt, m.attempts+1, d.Attempts, "attempts of message %d", off)
					require.Equal(rt, fmt.Sprint(off), string(d.Message.Body))
					if m.handle != "" {
						m.stale = append(m.stale, m.handle)
					}
					m.attempts, m.handle, m.visibleAt = d.Attempts, d.Handle, now()+30*time.Second
				}
			},
			"ack": func(rt *rapid.T) {
				l := live()
				if len(l) == 0 {
					rt.Skip("nothing in flight")
				}
				off := rapid.SampledFrom(l).Draw(rt, "off")
				m := msgs[off]
				require.NoError(rt, svc.Ack(m.handle))
				m.acked, m.stale, m.handle = true, append(m.stale, m.handle), ""
				require.Equal(rt, lowestUnacked(), committed(), "committed offset right after the ack")
			},
			"stale": func(rt *rapid.T) {
				var cands []string
				for _, m := range msgs {
					cands = append(cands, m.stale...)
				}
				if len(cands) == 0 {
					rt.Skip("no stale handle")
				}
				h := rapid.SampledFrom(cands).Draw(rt, "h")
				before := committed()
				if rapid.Bool().Draw(rt, "ack") {
					require.ErrorIs(rt, svc.Ack(h), pop.ErrStaleHandle)
				} else {
					_, err := svc.ChangeInvisible(h, time.Hour)
					require.ErrorIs(rt, err, pop.ErrStaleHandle)
				}
				require.Equal(rt, before, committed())
			},
			"old": func(rt *rapid.T) {
				if len(oldHandles) == 0 {
					rt.Skip("no pre-restart handle")
				}
				h := rapid.SampledFrom(oldHandles).Draw(rt, "h")
				before := committed()
				err := svc.Ack(h)
				require.True(rt, errors.Is(err, pop.ErrStaleHandle) || errors.Is(err, pop.ErrBadHandle), "pre-restart handle: %v", err)
				require.Equal(rt, before, committed())
			},
			"change": func(rt *rapid.T) {
				l := live()
				if len(l) == 0 {
					rt.Skip("nothing in flight")
				}
				off := rapid.SampledFrom(l).Draw(rt, "off")
				d := rapid.SampledFrom([]time.Duration{10 * time.Second, 60 * time.Second}).Draw(rt, "d")
				m := msgs[off]
				nh, err := svc.ChangeInvisible(m.handle, d)
				require.NoError(rt, err)
				m.stale, m.handle, m.visibleAt = append(m.stale, m.handle), nh, now()+d
			},
			"advance": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(1, 6).Draw(rt, "k")) * 7 * time.Second)
			},
			"restart": func(rt *rapid.T) {
				require.NoError(rt, svc.Close())
				svc = pop.New(st, opts)
				c := committed()
				for i, m := range msgs {
					if m.handle != "" {
						oldHandles = append(oldHandles, m.handle)
					}
					oldHandles = append(oldHandles, m.stale...)
					require.True(rt, m.acked || int64(i) >= c, "unacked message %d behind the committed offset %d", i, c)
					if int64(i) >= c {
						*m = accModelMsg{} // delivered again, attempt counting starts over
					} else {
						*m = accModelMsg{acked: true}
					}
				}
			},
			"reset": func(rt *rapid.T) {
				to := rapid.IntRange(0, len(msgs)).Draw(rt, "to")
				_, err := offs.Reset("g", topic, 0, int64(to))
				require.NoError(rt, err)
				for i, m := range msgs {
					stale := m.stale
					if m.handle != "" {
						stale = append(stale, m.handle)
					}
					*m = accModelMsg{acked: i < to, stale: stale}
				}
			},
			"": func(rt *rapid.T) {
				require.LessOrEqual(rt, committed(), lowestUnacked(), "the committed offset passed an unacked message")
			},
		})

		// Nothing lost: after the invisible times end, popping drains every
		// unacked message.
		clk.Advance(time.Hour)
		drain := accReq()
		drain.Topic = topic
		for i := 0; i < len(msgs)+2; i++ {
			res, err := svc.Pop(context.Background(), drain)
			require.NoError(rt, err)
			for _, d := range res.Messages {
				require.False(rt, msgs[d.Message.QueueOffset].acked)
				require.NoError(rt, svc.Ack(d.Handle))
				msgs[d.Message.QueueOffset].acked = true
			}
		}
		for i, m := range msgs {
			require.True(rt, m.acked, "message %d lost", i)
		}
		require.Equal(rt, int64(len(msgs)), committed())
	})
}

// TestAcceptRandomFIFOOpsMatchPlainModel is the FIFO counterpart: random FIFO
// pops with a few attemptIds, acks with live and stale handles, clock moves,
// restarts and resets. Model: at most one in-flight batch, always the lowest
// unacked messages in order; other attemptIds get nothing until it is fully
// acked or its invisible time ends (then the next pop gets the same batch
// with Attempts+1); the batch's own attemptId gets the same batch with fresh
// handles and no attempt counted (and, as SQS does, a fresh invisible time —
// the contract leaves that open, the model follows what the service does).
func TestAcceptRandomFIFOOpsMatchPlainModel(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	defer st.Close()
	offs, err := offset.Open(offset.Options{})
	require.NoError(t, err)
	defer offs.Close()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		topic := fmt.Sprintf("m%d", runs) // a fresh topic per run on one shared store
		clk := newAccClock()
		opts := pop.Options{Now: clk.Now, Offsets: offs, Tick: time.Hour}
		svc := pop.New(st, opts)
		defer func() { _ = svc.Close() }()

		type fmsg struct {
			acked    bool
			attempts int
			handle   string
			stale    []string
		}
		maxBatch := rapid.IntRange(1, 4).Draw(rt, "max")
		var msgs []*fmsg
		var batch []int64 // unacked members of the in-flight batch, in order
		var owner string
		var blockEnd time.Time
		committed := func() int64 {
			c, ok := offs.Committed("g", topic, 0)
			if !ok {
				return 0
			}
			return c
		}
		lowestUnacked := func() int64 {
			for i, m := range msgs {
				if !m.acked {
					return int64(i)
				}
			}
			return int64(len(msgs))
		}
		dropBatch := func() {
			for _, m := range msgs {
				if m.handle != "" {
					m.stale = append(m.stale, m.handle)
					m.handle = ""
				}
			}
			batch, owner = nil, ""
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 4).Draw(rt, "n")
				for i := 0; i < n; i++ {
					require.NoError(rt, st.Append(&store.Message{Topic: topic, Body: []byte(fmt.Sprint(len(msgs)))}))
					msgs = append(msgs, &fmsg{})
				}
			},
			"pop": func(rt *rapid.T) {
				r := fifoReq(rapid.SampledFrom([]string{"A", "B", "C"}).Draw(rt, "attempt"))
				r.Topic = topic
				r.Max = maxBatch // a re-pop asking for fewer than the batch holds is left open by the contract
				res, err := svc.Pop(context.Background(), r)
				require.NoError(rt, err)
				now := clk.Now()
				var want []int64
				var wantAtt []int
				switch {
				case len(batch) > 0 && r.AttemptID == owner:
					want = batch
					for _, o := range batch {
						wantAtt = append(wantAtt, msgs[o].attempts)
					}
				case len(batch) > 0 && now.Before(blockEnd):
					// blocked
				case len(batch) > 0:
					want = batch
					for _, o := range batch {
						msgs[o].attempts++
						wantAtt = append(wantAtt, msgs[o].attempts)
					}
				default:
					for i, m := range msgs {
						if len(want) == r.Max {
							break
						}
						if !m.acked {
							want = append(want, int64(i))
							m.attempts = 1
							wantAtt = append(wantAtt, 1)
						}
					}
				}
				if want == nil {
					want = []int64{}
					wantAtt = []int{}
				}
				require.Equal(rt, want, offsetsOf(res), "attempt %s, owner %s, batch %v", r.AttemptID, owner, batch)
				require.Equal(rt, wantAtt, attemptsOf(res))
				if len(want) > 0 {
					batch, owner, blockEnd = append([]int64(nil), want...), r.AttemptID, now.Add(30*time.Second)
					for _, d := range res.Messages {
						m := msgs[d.Message.QueueOffset]
						if m.handle != "" {
							m.stale = append(m.stale, m.handle)
						}
						m.handle = d.Handle
					}
				}
			},
			"ack": func(rt *rapid.T) {
				if len(batch) == 0 {
					rt.Skip("no batch")
				}
				off := rapid.SampledFrom(batch).Draw(rt, "off")
				m := msgs[off]
				require.NoError(rt, svc.Ack(m.handle))
				m.acked, m.stale, m.handle = true, append(m.stale, m.handle), ""
				var rest []int64
				for _, o := range batch {
					if o != off {
						rest = append(rest, o)
					}
				}
				batch = rest
				if len(batch) == 0 {
					owner = ""
				}
				require.Equal(rt, lowestUnacked(), committed())
			},
			"stale": func(rt *rapid.T) {
				var cands []string
				for _, m := range msgs {
					cands = append(cands, m.stale...)
				}
				if len(cands) == 0 {
					rt.Skip("no stale handle")
				}
				h := rapid.SampledFrom(cands).Draw(rt, "h")
				before := committed()
				err := svc.Ack(h)
				require.True(rt, errors.Is(err, pop.ErrStaleHandle) || errors.Is(err, pop.ErrBadHandle), "superseded handle: %v", err)
				require.Equal(rt, before, committed())
			},
			"advance": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(1, 6).Draw(rt, "k")) * 7 * time.Second)
			},
			"restart": func(rt *rapid.T) {
				require.NoError(rt, svc.Close())
				svc = pop.New(st, opts)
				dropBatch()
				c := committed()
				for i, m := range msgs {
					require.True(rt, m.acked || int64(i) >= c)
					m.acked, m.attempts = int64(i) < c, 0
				}
			},
			"reset": func(rt *rapid.T) {
				to := rapid.IntRange(0, len(msgs)).Draw(rt, "to")
				_, err := offs.Reset("g", topic, 0, int64(to))
				require.NoError(rt, err)
				dropBatch()
				for i, m := range msgs {
					m.acked, m.attempts = i < to, 0
				}
			},
			"": func(rt *rapid.T) {
				require.LessOrEqual(rt, committed(), lowestUnacked())
			},
		})
	})
}

// lockedBuf is a goroutine-safe log sink.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Conventions: "Contention, takeover, expiry, recovery and every dropped or
// rejected request are logged with their keys."
func TestAcceptRejectionsAndContentionAreLoggedWithKeys(t *testing.T) {
	var buf lockedBuf
	e := newAccEnv(t, pop.Options{LockWait: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	e.appendN("orders", 0, 1)
	e.appendN("orders", 1, 1)
	bad := pop.Request{Group: "billing", Topic: "orders", ClientID: "c1", Max: 0}
	_, err := e.svc.Pop(context.Background(), bad)
	require.ErrorIs(t, err, pop.ErrInvalid)
	assert.ErrorIs(t, e.svc.Ack("forged"), pop.ErrBadHandle)

	f := fifoReq("att-7")
	f.Topic = "orders"
	f.Group = "billing"
	f.Max = 1
	require.Len(t, e.pop(f).Messages, 1)
	entered, release := e.src.holdNextRead()
	defer release()
	h := accReq()
	h.Group, h.Topic, h.QueueID = "billing", "orders", 1
	holder := e.popAsync(context.Background(), h)
	<-entered
	_, err = e.svc.Pop(context.Background(), f)
	require.ErrorIs(t, err, pop.ErrLockTimeout)
	release()
	waitOutcome(t, holder, 2*time.Second, "holder")

	out := buf.String()
	lines := strings.Split(out, "\n")
	has := func(words ...string) bool {
		for _, l := range lines {
			ok := true
			for _, w := range words {
				ok = ok && strings.Contains(l, w)
			}
			if ok {
				return true
			}
		}
		return false
	}
	assert.True(t, has("billing", "orders", "c1"), "rejected request logged with group, topic, client:\n%s", out)
	assert.True(t, has("ERROR") || has("WARN", "handle") || has("INFO", "handle"), "bad handle logged:\n%s", out)
	assert.True(t, has("billing", "orders", "att-7"), "lock wait/timeout logged with group, topic, attempt:\n%s", out)
}

// FIFO under concurrency: consumers with their own attemptIds race for one
// queue. At most one batch is in flight, so the acks, in the order they
// happen, are exactly 0, 1, 2, … — no message twice, none skipped.
func TestAcceptConcurrentFIFOConsumersKeepOneBatchInOrder(t *testing.T) {
	e := newAccEnv(t, pop.Options{LockWait: 5 * time.Second})
	const total = 120
	e.appendN("t", 0, total)
	var mu sync.Mutex
	var acked []int64
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			n := 0
			for {
				mu.Lock()
				done := len(acked) == total
				mu.Unlock()
				if done {
					return
				}
				r := fifoReq(fmt.Sprintf("c%d-%d", c, n))
				r.Max = 1 + c
				res, err := e.svc.Pop(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				if len(res.Messages) == 0 {
					continue
				}
				n++
				for _, d := range res.Messages {
					mu.Lock()
					if assert.NoError(t, e.svc.Ack(d.Handle)) {
						acked = append(acked, d.Message.QueueOffset)
					}
					mu.Unlock()
				}
			}
		}(c)
	}
	wg.Wait()
	want := make([]int64, total)
	for i := range want {
		want[i] = int64(i)
	}
	assert.Equal(t, want, acked)
	assert.Equal(t, int64(total), e.committed(0))
}
