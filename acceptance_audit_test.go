package brokercore_test

// Black-box acceptance tests of the composed core (issue 14): the wiring
// brokercore.Open promises, written against ARCHITECTURE.md only.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

var audT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// audOpts are Options with an injected clock, no fsync, a short scheduler
// tick and a pop wake-up tick so long that only an arrival can wake a poll.
func audOpts(clk *testkit.Clock) brokercore.Options {
	var o brokercore.Options
	o.Now = clk.Now
	o.Store.Sync = store.SyncNone
	o.Schedule.Tick = 2 * time.Millisecond
	o.Pop.Tick = time.Hour
	return o
}

func audOpen(t *testing.T, dir string, o brokercore.Options) *brokercore.Broker {
	t.Helper()
	b, err := brokercore.Open(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func audAppend(t *testing.T, b *brokercore.Broker, topic string, bodies ...string) {
	t.Helper()
	for _, s := range bodies {
		require.NoError(t, b.Store().Append(&store.Message{Topic: topic, Body: []byte(s)}))
	}
}

// audWaitWaiting waits until the pop service reports n long-polling waiters.
func audWaitWaiting(t *testing.T, svc *pop.Service, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return svc.Stats().Waiters >= n }, 10*time.Second, time.Millisecond)
}

type audPopResult struct {
	res     pop.Result
	err     error
	elapsed time.Duration
}

func audPopAsync(svc *pop.Service, req pop.Request) <-chan audPopResult {
	ch := make(chan audPopResult, 1)
	go func() {
		start := time.Now()
		res, err := svc.Pop(context.Background(), req)
		ch <- audPopResult{res, err, time.Since(start)}
	}()
	return ch
}

func audBodies(ms []*store.Message) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	return out
}

func audReadAll(t *testing.T, st *store.Store, topic string) []*store.Message {
	t.Helper()
	var out []*store.Message
	for off := st.MinOffset(topic, 0); off < st.MaxOffset(topic, 0); {
		ms, err := st.Read(topic, 0, off, 32)
		require.NoError(t, err)
		require.NotEmpty(t, ms)
		out = append(out, ms...)
		off = ms[len(ms)-1].QueueOffset + 1
	}
	return out
}

func TestAuditOpenEmptyDirInvalid(t *testing.T) {
	_, err := brokercore.Open("", brokercore.Options{})
	require.ErrorIs(t, err, brokercore.ErrInvalid)
}

// A plain append wakes a long poll that is already waiting: pop's own
// wake-up tick is an hour, so only the store's arrival hook can do it.
func TestAuditOpenArrivalWakesLongPoll(t *testing.T) {
	clk := testkit.NewClock(audT0)
	b := audOpen(t, t.TempDir(), audOpts(clk))
	ch := audPopAsync(b.Pop(), pop.Request{Group: "g", Topic: "orders", ClientID: "c", Poll: 30 * time.Second})
	audWaitWaiting(t, b.Pop(), 1)
	audAppend(t, b, "orders", "paid")
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.res.Messages, 1)
	assert.Equal(t, "paid", string(r.res.Messages[0].Message.Body))
	assert.Less(t, r.elapsed, 15*time.Second, "the arrival must wake the poll, not its timeout")
}

// The scheduler's deliveries (a timer and a delay level) are arrivals too.
func TestAuditOpenSchedulerDeliveryWakesLongPoll(t *testing.T) {
	clk := testkit.NewClock(audT0)
	b := audOpen(t, t.TempDir(), audOpts(clk))

	tm, err := b.Scheduler().At(&store.Message{Topic: "later", Body: []byte("timer")}, clk.Now().Add(time.Hour))
	require.NoError(t, err)
	require.NoError(t, b.Store().Append(tm))

	ch := audPopAsync(b.Pop(), pop.Request{Group: "g", Topic: "later", ClientID: "c", Poll: 30 * time.Second})
	audWaitWaiting(t, b.Pop(), 1)
	clk.Advance(time.Hour)
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.res.Messages, 1)
	assert.Equal(t, "timer", string(r.res.Messages[0].Message.Body))
	assert.Less(t, r.elapsed, 15*time.Second)

	dm, err := b.Scheduler().Delay(&store.Message{Topic: "delayed", Body: []byte("level")}, 1)
	require.NoError(t, err)
	require.NoError(t, b.Store().Append(dm))
	ch = audPopAsync(b.Pop(), pop.Request{Group: "g", Topic: "delayed", ClientID: "c", Poll: 30 * time.Second})
	audWaitWaiting(t, b.Pop(), 1)
	clk.Advance(time.Second)
	r = <-ch
	require.NoError(t, r.err)
	require.Len(t, r.res.Messages, 1)
	assert.Equal(t, "level", string(r.res.Messages[0].Message.Body))
	assert.Less(t, r.elapsed, 15*time.Second)
}

// Offsets and scheduler progress persist under dir: after a reopen the
// group goes on where it acked, a delivered timer or delayed message is not
// delivered again, and a pending one is delivered once.
func TestAuditOpenPersistsAcrossReopen(t *testing.T) {
	clk := testkit.NewClock(audT0)
	dir := t.TempDir()
	o := audOpts(clk)
	b, err := brokercore.Open(dir, o)
	require.NoError(t, err)

	audAppend(t, b, "orders", "m0", "m1", "m2")
	res, err := b.Pop().Pop(context.Background(), pop.Request{Group: "g", Topic: "orders", ClientID: "c", Max: 2})
	require.NoError(t, err)
	require.Len(t, res.Messages, 2)
	for _, d := range res.Messages {
		require.NoError(t, b.Pop().Ack(d.Handle))
	}
	off, ok := b.Offsets().Committed("g", "orders", 0)
	require.True(t, ok)
	require.EqualValues(t, 2, off)

	sch := b.Scheduler()
	due, err := sch.At(&store.Message{Topic: "timers", Body: []byte("due")}, clk.Now().Add(time.Minute))
	require.NoError(t, err)
	pending, err := sch.At(&store.Message{Topic: "timers", Body: []byte("pending")}, clk.Now().Add(2*time.Hour))
	require.NoError(t, err)
	lvl, err := sch.Delay(&store.Message{Topic: "levels", Body: []byte("lvl0")}, 1)
	require.NoError(t, err)
	require.NoError(t, b.Store().Append(due, pending, lvl))
	clk.Advance(time.Minute)
	require.Eventually(t, func() bool {
		return b.Store().MaxOffset("timers", 0) == 1 && b.Store().MaxOffset("levels", 0) == 1
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, b.Close())

	b2 := audOpen(t, dir, o)
	off, ok = b2.Offsets().Committed("g", "orders", 0)
	require.True(t, ok)
	assert.EqualValues(t, 2, off)
	res, err = b2.Pop().Pop(context.Background(), pop.Request{Group: "g", Topic: "orders", ClientID: "c", Max: 32})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	assert.Equal(t, "m2", string(res.Messages[0].Message.Body))

	// Sync points: a fresh level-1 message and the pending timer. Each lane
	// delivers in order, so once they arrive, a repeat would have too.
	lvl1, err := b2.Scheduler().Delay(&store.Message{Topic: "levels", Body: []byte("lvl1")}, 1)
	require.NoError(t, err)
	require.NoError(t, b2.Store().Append(lvl1))
	clk.Advance(2 * time.Hour)
	require.Eventually(t, func() bool {
		return b2.Store().MaxOffset("timers", 0) >= 2 && b2.Store().MaxOffset("levels", 0) >= 2
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"due", "pending"}, audBodies(audReadAll(t, b2.Store(), "timers")))
	assert.Equal(t, []string{"lvl0", "lvl1"}, audBodies(audReadAll(t, b2.Store(), "levels")))
}

// A message that used up MaxAttempts lands in "%DLQ%"+group queue 0 and can
// be popped there like any other topic.
func TestAuditOpenDeadLettersPoppable(t *testing.T) {
	clk := testkit.NewClock(audT0)
	o := audOpts(clk)
	o.Pop.MaxAttempts = 1
	b := audOpen(t, t.TempDir(), o)
	audAppend(t, b, "orders", "poison")

	ctx := context.Background()
	req := pop.Request{Group: "billing", Topic: "orders", ClientID: "c", Invisible: 10 * time.Second}
	res, err := b.Pop().Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	clk.Advance(11 * time.Second)
	res, err = b.Pop().Pop(ctx, req)
	require.NoError(t, err)
	assert.Empty(t, res.Messages, "after MaxAttempts the message is dead-lettered, not redelivered")

	dlq := brokercore.DeadLetterPrefix + "billing"
	require.Equal(t, "%DLQ%billing", dlq)
	require.Eventually(t, func() bool { return b.Store().MaxOffset(dlq, 0) == 1 }, 10*time.Second, time.Millisecond)
	res, err = b.Pop().Pop(ctx, pop.Request{Group: "dlq-reader", Topic: dlq, ClientID: "ops"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	m := res.Messages[0].Message
	assert.Equal(t, "poison", string(m.Body))
	assert.Equal(t, dlq, m.Topic)
	assert.Equal(t, 0, m.QueueID)
	assert.Equal(t, "orders", m.Properties[brokercore.PropDLQOriginTopic])
	require.NoError(t, b.Pop().Ack(res.Messages[0].Handle))

	// The original group is past it: nothing is redelivered, and its
	// committed offset moved past the dead letter.
	clk.Advance(time.Hour)
	res, err = b.Pop().Pop(ctx, req)
	require.NoError(t, err)
	assert.Empty(t, res.Messages)
	off, _ := b.Offsets().Committed("billing", "orders", 0)
	assert.EqualValues(t, 1, off)
}

// Close is idempotent, waits for every goroutine it started and leaves
// every piece answering its ErrClosed.
func TestAuditBrokerCloseIdempotentAndClosed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clk := testkit.NewClock(audT0)
	b, err := brokercore.Open(t.TempDir(), audOpts(clk))
	require.NoError(t, err)
	audAppend(t, b, "orders", "m0", "m1")
	res, err := b.Pop().Pop(context.Background(), pop.Request{Group: "g", Topic: "orders", ClientID: "c"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	handle := res.Messages[0].Handle

	// A long poll in progress when Close begins ends with ErrClosed.
	ch := audPopAsync(b.Pop(), pop.Request{Group: "g2", Topic: "empty", ClientID: "c", Poll: 30 * time.Second})
	audWaitWaiting(t, b.Pop(), 1)

	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "Close is idempotent")
	r := <-ch
	require.ErrorIs(t, r.err, pop.ErrClosed)
	goleak.VerifyNone(t, goleak.IgnoreCurrent()) // nothing left running once Close returned

	require.ErrorIs(t, b.Store().Append(&store.Message{Topic: "orders", Body: []byte("x")}), store.ErrClosed)
	_, err = b.Store().Read("orders", 0, 0, 1)
	require.ErrorIs(t, err, store.ErrClosed)
	_, err = b.Pop().Pop(context.Background(), pop.Request{Group: "g", Topic: "orders", ClientID: "c"})
	require.ErrorIs(t, err, pop.ErrClosed)
	require.ErrorIs(t, b.Pop().Ack(handle), pop.ErrClosed)
	_, err = b.Pop().ChangeInvisible(handle, time.Minute)
	require.ErrorIs(t, err, pop.ErrClosed)
	require.ErrorIs(t, b.Offsets().Commit("g", "orders", 0, 1), offset.ErrClosed)
	_, err = b.Offsets().Reset("g", "orders", 0, 0)
	require.ErrorIs(t, err, offset.ErrClosed)
	_, err = b.Consumers().Register("g", consumer.Client{ChannelID: "ch", ClientID: "c"}, nil)
	require.ErrorIs(t, err, consumer.ErrClosed)

	_, ok := b.Locks().TryLock("g", lock.Queue{Topic: "orders"}, "c")
	assert.False(t, ok, "the lock table is closed")

	// The scheduler must not come back to life over a closed store.
	err = b.Scheduler().Start()
	require.ErrorIs(t, err, schedule.ErrClosed, "Start after the broker's Close must fail")
	_ = b.Scheduler().Stop()
	require.ErrorIs(t, b.Scheduler().Cancel("any"), schedule.ErrClosed)
	_, err = b.Scheduler().Delay(&store.Message{Topic: "orders"}, 1)
	require.ErrorIs(t, err, schedule.ErrClosed)
	_, err = b.Scheduler().At(&store.Message{Topic: "orders"}, time.Now().Add(time.Second))
	require.ErrorIs(t, err, schedule.ErrClosed)
}

// Options.Now and Options.Logger reach every piece whose own is nil.
func TestAuditOpenNowAndLoggerPropagate(t *testing.T) {
	clk := testkit.NewClock(audT0)
	var logs testkit.LogBuffer
	o := audOpts(clk)
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := audOpen(t, t.TempDir(), o)
	ctx := context.Background()

	// store: StoredAt
	audAppend(t, b, "orders", "m0")
	ms, err := b.Store().Read("orders", 0, 0, 1)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	assert.True(t, ms[0].StoredAt.Equal(audT0), "StoredAt %v", ms[0].StoredAt)

	// pop: invisible time runs on the injected clock
	req := pop.Request{Group: "g", Topic: "orders", ClientID: "c", Invisible: time.Minute}
	res, err := b.Pop().Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	clk.Advance(time.Minute + time.Second)
	res, err = b.Pop().Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	assert.Equal(t, 2, res.Messages[0].Attempts)

	// lock: lease expiry
	lease, ok := b.Locks().TryLock("g", lock.Queue{Topic: "orders", QueueID: 0}, "c")
	require.True(t, ok)
	assert.True(t, lease.Expires.After(clk.Now()) && lease.Expires.Before(clk.Now().Add(24*time.Hour)), "lease expires %v at clock %v", lease.Expires, clk.Now())
	clk.Advance(lock.DefaultMaxLiveTime + time.Second)
	_, ok = b.Locks().TryLock("g", lock.Queue{Topic: "orders", QueueID: 0}, "other")
	assert.True(t, ok, "the lease expired on the injected clock")

	// consumer: channel expiry
	_, err = b.Consumers().Register("g", consumer.Client{ChannelID: "ch1", ClientID: "c1"}, nil)
	require.NoError(t, err)
	clk.Advance(consumer.DefaultChannelExpiry + time.Second)
	assert.Equal(t, 1, b.Consumers().Scan())

	// logger: a rejected request is logged (at DEBUG) with its keys
	_, err = b.Pop().Pop(ctx, pop.Request{Group: "audit-group", Topic: "orders", ClientID: "c", Filter: "A &&"})
	require.ErrorIs(t, err, pop.ErrInvalid)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "audit-group") }, 5*time.Second, time.Millisecond,
		"the pop service logs through Options.Logger: %s", logs.String())
	assert.NotContains(t, lineOf(logs.String(), "audit-group"), "level=WARN")
	assert.NotContains(t, lineOf(logs.String(), "audit-group"), "level=INFO")
}

func lineOf(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// A plain Commit on a group pop serves is not overwritten backwards by
// pop's acks, and pop continues from it.
func TestAuditOffsetCommitOnPopServedGroupNotOverwritten(t *testing.T) {
	clk := testkit.NewClock(audT0)
	b := audOpen(t, t.TempDir(), audOpts(clk))
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		audAppend(t, b, "orders", "m"+string(rune('0'+i)))
	}
	res, err := b.Pop().Pop(ctx, pop.Request{Group: "g", Topic: "orders", ClientID: "c", Max: 3})
	require.NoError(t, err)
	require.Len(t, res.Messages, 3)
	require.NoError(t, b.Offsets().Commit("g", "orders", 0, 8))
	for _, d := range res.Messages {
		_ = b.Pop().Ack(d.Handle) // stale or not: it must not move the offset back
	}
	off, ok := b.Offsets().Committed("g", "orders", 0)
	require.True(t, ok)
	assert.EqualValues(t, 8, off)

	res, err = b.Pop().Pop(ctx, pop.Request{Group: "g", Topic: "orders", ClientID: "c", Max: 32})
	require.NoError(t, err)
	require.Len(t, res.Messages, 2)
	assert.EqualValues(t, 8, res.Messages[0].Message.QueueOffset)
	for _, d := range res.Messages {
		require.NoError(t, b.Pop().Ack(d.Handle))
	}
	off, _ = b.Offsets().Committed("g", "orders", 0)
	assert.EqualValues(t, 10, off)
}

// An offset beyond the queue's end is refused by Commit and Reset alike,
// with the same error, and changes nothing.
func TestAuditOffsetBeyondEndRefusedByCommitAndReset(t *testing.T) {
	clk := testkit.NewClock(audT0)
	b := audOpen(t, t.TempDir(), audOpts(clk))
	for i := 0; i < 5; i++ {
		audAppend(t, b, "orders", "m")
	}
	offs := b.Offsets()
	require.NoError(t, offs.Commit("g", "orders", 0, 3))
	epoch := offs.Epoch("g", "orders", 0)

	errCommit := offs.Commit("g", "orders", 0, 99)
	_, errReset := offs.Reset("g", "orders", 0, 99)
	require.Error(t, errCommit)
	require.Error(t, errReset)
	assert.ErrorIs(t, errCommit, offset.ErrBeyondEnd)
	assert.ErrorIs(t, errReset, offset.ErrBeyondEnd)
	var e1, e2 *offset.EndError
	if assert.True(t, errors.As(errCommit, &e1)) && assert.True(t, errors.As(errReset, &e2)) {
		assert.EqualValues(t, 5, e1.Max)
		assert.EqualValues(t, 5, e2.Max)
	}
	off, _ := offs.Committed("g", "orders", 0)
	assert.EqualValues(t, 3, off)
	assert.Equal(t, epoch, offs.Epoch("g", "orders", 0))

	// the end itself is fine for both
	require.NoError(t, offs.Commit("g", "orders", 0, 5))
	_, err := offs.Reset("g", "orders", 0, 5)
	require.NoError(t, err)
}

// A piece's own Now wins over Options.Now.
func TestAuditOpenOwnNowWins(t *testing.T) {
	clk := testkit.NewClock(audT0)
	own := testkit.NewClock(audT0.Add(24 * time.Hour))
	o := audOpts(clk)
	o.Store.Now = own.Now
	b := audOpen(t, t.TempDir(), o)
	audAppend(t, b, "orders", "m0")
	ms, err := b.Store().Read("orders", 0, 0, 1)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	assert.True(t, ms[0].StoredAt.Equal(own.Now()), "StoredAt %v", ms[0].StoredAt)
}

// Options.Logger reaches the scheduler (it logs its start) and the lock
// table (it logs contention with its keys).
func TestAuditOpenLoggerReachesSchedulerAndLocks(t *testing.T) {
	clk := testkit.NewClock(audT0)
	var logs testkit.LogBuffer
	o := audOpts(clk)
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := audOpen(t, t.TempDir(), o)
	q := lock.Queue{Topic: "orders", QueueID: 3}
	_, ok := b.Locks().TryLock("lockgroup", q, "holder")
	require.True(t, ok)
	_, ok = b.Locks().TryLock("lockgroup", q, "intruder")
	require.False(t, ok)
	require.Eventually(t, func() bool {
		s := logs.String()
		return strings.Contains(s, "schedule") && strings.Contains(s, "lockgroup")
	}, 5*time.Second, time.Millisecond, "logs: %s", logs.String())
}

// A plain Commit backwards on a group pop serves takes effect: pop goes on
// from there (it is applied as a reset), and it is persisted across a reopen.
func TestAuditOffsetCommitBackwardsOnPopServedGroup(t *testing.T) {
	clk := testkit.NewClock(audT0)
	dir := t.TempDir()
	o := audOpts(clk)
	b, err := brokercore.Open(dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	audAppend(t, b, "orders", "m0", "m1", "m2", "m3", "m4")
	res, err := b.Pop().Pop(ctx, pop.Request{Group: "g", Topic: "orders", ClientID: "c", Max: 32})
	require.NoError(t, err)
	require.Len(t, res.Messages, 5)
	for _, d := range res.Messages {
		require.NoError(t, b.Pop().Ack(d.Handle))
	}
	require.NoError(t, b.Offsets().Commit("g", "orders", 0, 1))
	res, err = b.Pop().Pop(ctx, pop.Request{Group: "g", Topic: "orders", ClientID: "c", Max: 1})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	assert.EqualValues(t, 1, res.Messages[0].Message.QueueOffset)
	off, _ := b.Offsets().Committed("g", "orders", 0)
	assert.EqualValues(t, 1, off)
	require.NoError(t, b.Close())

	b2 := audOpen(t, dir, o)
	off, _ = b2.Offsets().Committed("g", "orders", 0)
	assert.EqualValues(t, 1, off)
	// a handle from before the restart is stale, not forged
	assert.ErrorIs(t, b2.Pop().Ack(res.Messages[0].Handle), pop.ErrStaleHandle)
	res, err = b2.Pop().Pop(ctx, pop.Request{Group: "g", Topic: "orders", ClientID: "c", Max: 32})
	require.NoError(t, err)
	require.Len(t, res.Messages, 4)
	assert.EqualValues(t, 1, res.Messages[0].Message.QueueOffset)
}

// A queue never written ends at 0: any positive offset is beyond its end,
// for Commit, CommitFenced and Reset alike.
func TestAuditOffsetBeyondEndOfEmptyQueue(t *testing.T) {
	clk := testkit.NewClock(audT0)
	b := audOpen(t, t.TempDir(), audOpts(clk))
	offs := b.Offsets()
	assert.ErrorIs(t, offs.Commit("g", "nosuch", 0, 1), offset.ErrBeyondEnd)
	assert.ErrorIs(t, offs.CommitFenced("g", "nosuch", 0, 1, 0), offset.ErrBeyondEnd)
	_, err := offs.Reset("g", "nosuch", 0, 1)
	assert.ErrorIs(t, err, offset.ErrBeyondEnd)
	_, ok := offs.Committed("g", "nosuch", 0)
	assert.False(t, ok, "nothing was stored")
	require.NoError(t, offs.Commit("g", "nosuch", 0, 0))
}

// Dead letters survive a reopen and stay poppable; a dead-lettered message
// is dead-lettered once.
func TestAuditOpenDeadLettersAcrossReopen(t *testing.T) {
	clk := testkit.NewClock(audT0)
	dir := t.TempDir()
	o := audOpts(clk)
	o.Pop.MaxAttempts = 2
	b, err := brokercore.Open(dir, o)
	require.NoError(t, err)
	audAppend(t, b, "orders", "p0", "p1")
	ctx := context.Background()
	req := pop.Request{Group: "g", Topic: "orders", ClientID: "c", Max: 32, Invisible: 10 * time.Second}
	for i := 0; i < 2; i++ {
		res, err := b.Pop().Pop(ctx, req)
		require.NoError(t, err)
		require.Len(t, res.Messages, 2)
		clk.Advance(11 * time.Second)
	}
	res, err := b.Pop().Pop(ctx, req)
	require.NoError(t, err)
	assert.Empty(t, res.Messages)
	clk.Advance(time.Hour)
	res, err = b.Pop().Pop(ctx, req)
	require.NoError(t, err)
	assert.Empty(t, res.Messages)
	require.NoError(t, b.Close())

	b2 := audOpen(t, dir, o)
	dlq := brokercore.DeadLetterTopic("g")
	assert.EqualValues(t, 2, b2.Store().MaxOffset(dlq, 0), "each dead letter appended once")
	res, err = b2.Pop().Pop(ctx, pop.Request{Group: "ops", Topic: dlq, ClientID: "c", Max: 32})
	require.NoError(t, err)
	assert.Equal(t, []string{"p0", "p1"}, []string{string(res.Messages[0].Message.Body), string(res.Messages[1].Message.Body)})
	res, err = b2.Pop().Pop(ctx, req)
	require.NoError(t, err)
	assert.Empty(t, res.Messages, "the origin group does not get them back after the reopen")
}

// Lock sweeps and consumer scans run on their period, reading the injected
// clock; negative periods turn them off.
func TestAuditOpenHousekeepingOnPeriod(t *testing.T) {
	clk := testkit.NewClock(audT0)
	o := audOpts(clk)
	o.LockSweepEvery = time.Millisecond
	o.ConsumerScanEvery = time.Millisecond
	b := audOpen(t, t.TempDir(), o)
	_, ok := b.Locks().TryLock("g", lock.Queue{Topic: "orders"}, "c")
	require.True(t, ok)
	_, err := b.Consumers().Register("g", consumer.Client{ChannelID: "ch", ClientID: "c"}, nil)
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond) // many periods: nothing expired yet on the injected clock
	assert.EqualValues(t, 1, b.Locks().Stats().Entries)
	assert.Len(t, b.Consumers().Clients("g"), 1)
	clk.Advance(consumer.DefaultChannelExpiry + time.Second)
	require.Eventually(t, func() bool {
		return b.Locks().Stats().Expired == 1 && len(b.Consumers().Clients("g")) == 0
	}, 10*time.Second, time.Millisecond)

	o.LockSweepEvery, o.ConsumerScanEvery = -1, -1
	b2 := audOpen(t, t.TempDir(), o)
	_, ok = b2.Locks().TryLock("g", lock.Queue{Topic: "orders"}, "c")
	require.True(t, ok)
	clk.Advance(time.Hour)
	time.Sleep(20 * time.Millisecond)
	assert.Zero(t, b2.Locks().Stats().Expired, "a negative period never sweeps")
}

// Close under load: producers, long-polling consumers and the scheduler's
// deliveries running; every call ends with success or its ErrClosed, and
// nothing is left running.
func TestAuditBrokerCloseUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clk := testkit.NewClock(audT0)
	b, err := brokercore.Open(t.TempDir(), audOpts(clk))
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 2; w++ {
		wg.Add(2)
		go func() { // producer of plain and timer messages
			defer wg.Done()
			for i := 0; ; i++ {
				m := &store.Message{Topic: "orders", Body: []byte("x")}
				if i%2 == 0 {
					tm, err := b.Scheduler().At(m, clk.Now())
					if err != nil {
						if !errors.Is(err, schedule.ErrClosed) {
							errs <- err
						}
						return
					}
					m = tm
				}
				if err := b.Store().Append(m); err != nil {
					if !errors.Is(err, store.ErrClosed) {
						errs <- err
					}
					return
				}
			}
		}()
		go func() { // consumer
			defer wg.Done()
			for {
				res, err := b.Pop().Pop(context.Background(), pop.Request{Group: "g", Topic: "orders", ClientID: "c", Max: 8, Poll: time.Second})
				if err != nil {
					if !errors.Is(err, pop.ErrClosed) {
						errs <- err
					}
					return
				}
				for _, d := range res.Messages {
					if err := b.Pop().Ack(d.Handle); err != nil && !errors.Is(err, pop.ErrClosed) && !errors.Is(err, pop.ErrStaleHandle) {
						errs <- err
						return
					}
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return b.Store().MaxOffset("orders", 0) > 200 }, 10*time.Second, time.Millisecond)
	require.NoError(t, b.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
}

// An Open that fails part-way closes what it opened: nothing keeps running
// and the directory can be opened again once the cause is gone.
func TestAuditOpenFailureCleansUp(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clk := testkit.NewClock(audT0)
	dir := t.TempDir()
	b, err := brokercore.Open(dir, audOpts(clk))
	require.NoError(t, err)
	require.NoError(t, b.Close())

	progress := filepath.Join(dir, brokercore.ScheduleDir, brokercore.ProgressFile)
	good, err := os.ReadFile(progress)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(progress, []byte("garbage, not progress"), 0o644))
	_, err = brokercore.Open(dir, audOpts(clk))
	require.Error(t, err)
	assert.ErrorIs(t, err, schedule.ErrCorrupt)
	goleak.VerifyNone(t, goleak.IgnoreCurrent())

	require.NoError(t, os.WriteFile(progress, good, 0o644))
	b, err = brokercore.Open(dir, audOpts(clk))
	require.NoError(t, err, "the failed Open released the store")
	require.NoError(t, b.Close())

	key := filepath.Join(dir, brokercore.HandleKeyFile)
	require.NoError(t, os.WriteFile(key, []byte("short"), 0o600))
	_, err = brokercore.Open(dir, audOpts(clk))
	assert.ErrorIs(t, err, brokercore.ErrCorrupt)
}

// Errors returned to the caller are logged at DEBUG, never at INFO or above
// (WARN is for what the caller cannot see).
func TestAuditReturnedErrorsLoggedAtDebug(t *testing.T) {
	clk := testkit.NewClock(audT0)
	var logs testkit.LogBuffer
	o := audOpts(clk)
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := audOpen(t, t.TempDir(), o)
	ctx := context.Background()
	audAppend(t, b, "orders", "m0")
	res, err := b.Pop().Pop(ctx, pop.Request{Group: "g", Topic: "orders", ClientID: "c"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	h := res.Messages[0].Handle
	require.NoError(t, b.Pop().Ack(h))
	start := len(logs.String())

	require.ErrorIs(t, b.Pop().Ack(h), pop.ErrStaleHandle)
	require.ErrorIs(t, b.Pop().Ack("forged"), pop.ErrBadHandle)
	_, err = b.Pop().Pop(ctx, pop.Request{Group: "g", Topic: "orders", ClientID: "c", Filter: "||"})
	require.ErrorIs(t, err, pop.ErrInvalid)
	_, err = b.Pop().Pop(ctx, pop.Request{Group: "", Topic: "orders", ClientID: "c"})
	require.ErrorIs(t, err, pop.ErrInvalid)
	require.ErrorIs(t, b.Offsets().Commit("g", "orders", 0, 99), offset.ErrBeyondEnd)
	_, err = b.Offsets().Reset("g", "orders", 0, 99)
	require.ErrorIs(t, err, offset.ErrBeyondEnd)
	require.ErrorIs(t, b.Scheduler().Cancel("nope"), schedule.ErrTimerNotFound)
	_, err = b.Scheduler().At(&store.Message{Topic: "x"}, clk.Now().Add(2*schedule.DefaultMaxTimerDelay))
	require.ErrorIs(t, err, schedule.ErrInvalid)
	require.ErrorIs(t, b.Store().Append(&store.Message{Topic: ""}), store.ErrInvalid)

	debug := 0
	for _, l := range strings.Split(logs.String()[start:], "\n") {
		if l == "" {
			continue
		}
		if strings.Contains(l, "level=DEBUG") {
			debug++
		}
		for _, lvl := range []string{"level=INFO", "level=WARN", "level=ERROR"} {
			assert.NotContains(t, l, lvl, "an error the caller got was logged above DEBUG")
		}
	}
	assert.GreaterOrEqual(t, debug, 8, "each rejected call is logged (at DEBUG): %s", logs.String()[start:])
}

// Close from several goroutines at once: every call returns the same
// result after everything stopped.
func TestAuditBrokerConcurrentClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clk := testkit.NewClock(audT0)
	b, err := brokercore.Open(t.TempDir(), audOpts(clk))
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.Close()
			// once any Close has returned, the store is closed
			if e := b.Store().Append(&store.Message{Topic: "t"}); !errors.Is(e, store.ErrClosed) {
				errs[i] = fmt.Errorf("append after Close returned: %v", e)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
}
