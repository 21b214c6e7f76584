package brokercore_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

const (
	group = "g"
	topic = "orders"
)

func newClock() *testkit.Clock { return testkit.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)) }

// testOptions are fast Options on a fake clock: no fsync, a short scheduler
// tick, one one-second delay level.
func testOptions(clk *testkit.Clock) brokercore.Options {
	var o brokercore.Options
	o.Now = clk.Now
	o.Store.Sync = store.SyncNone
	o.Schedule.Levels = "1s"
	o.Schedule.Tick = 2 * time.Millisecond
	o.Offset.FlushEvery = offset.FlushEveryCommit
	return o
}

func openBroker(t *testing.T, dir string, opts brokercore.Options) *brokercore.Broker {
	t.Helper()
	b, err := brokercore.Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func msg(body string) *store.Message {
	return &store.Message{Topic: topic, Body: []byte(body), Properties: map[string]string{"k": "v"}}
}

// popAsync starts a long-polling pop and returns its result channel.
func popAsync(b *brokercore.Broker, req pop.Request) <-chan popAnswer {
	ch := make(chan popAnswer, 1)
	go func() {
		res, err := b.Pop().Pop(context.Background(), req)
		ch <- popAnswer{res, err}
	}()
	return ch
}

type popAnswer struct {
	res pop.Result
	err error
}

func await(t *testing.T, ch <-chan popAnswer) popAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("long poll was never woken")
		return popAnswer{}
	}
}

func bodies(res pop.Result) []string {
	var out []string
	for _, d := range res.Messages {
		out = append(out, string(d.Message.Body))
	}
	return out
}

func TestOpenWiresStoreArrivalsToLongPolls(t *testing.T) {
	b := openBroker(t, t.TempDir(), testOptions(newClock()))
	ch := popAsync(b, pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 1, Invisible: time.Minute, Poll: time.Minute})
	require.NoError(t, b.Store().Append(msg("hello")))
	a := await(t, ch)
	require.NoError(t, a.err)
	assert.Equal(t, []string{"hello"}, bodies(a.res))
}

func TestOpenWakesLongPollsWithSchedulerDeliveries(t *testing.T) {
	clk := newClock()
	b := openBroker(t, t.TempDir(), testOptions(clk))
	d, err := b.Scheduler().Delay(msg("later"), 1)
	require.NoError(t, err)
	require.NoError(t, b.Store().Append(d))

	ch := popAsync(b, pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 1, Invisible: time.Minute, Poll: time.Minute})
	select {
	case a := <-ch:
		t.Fatalf("delivered before its delay: %+v", a)
	case <-time.After(20 * time.Millisecond): // several scheduler ticks on a still clock
	}
	clk.Advance(2 * time.Second)
	a := await(t, ch)
	require.NoError(t, a.err)
	assert.Equal(t, []string{"later"}, bodies(a.res))
}

// An offset reset is a wake-up source: a pop long-polling a queue whose
// messages were all acked wakes when a reset makes them deliverable again,
// not when its Poll ends.
func TestOpenWakesLongPollsOnOffsetReset(t *testing.T) {
	b := openBroker(t, t.TempDir(), testOptions(newClock()))
	for _, body := range []string{"a", "b"} {
		require.NoError(t, b.Store().Append(msg(body)))
	}
	req := pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 2, Invisible: time.Minute}
	res, err := b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, bodies(res))
	for _, d := range res.Messages {
		require.NoError(t, b.Pop().Ack(d.Handle))
	}
	req.Poll = time.Minute
	ch := popAsync(b, req)
	require.Eventually(t, func() bool { return b.Pop().Stats().Waiters == 1 }, 5*time.Second, time.Millisecond)
	_, err = b.Offsets().Reset(group, topic, 0, 0)
	require.NoError(t, err)
	a := await(t, ch)
	require.NoError(t, a.err)
	assert.Equal(t, []string{"a", "b"}, bodies(a.res))
}

func TestOpenAppendsDeadLettersToAPoppableTopic(t *testing.T) {
	clk := newClock()
	opts := testOptions(clk)
	opts.Pop.MaxAttempts = 1
	b := openBroker(t, t.TempDir(), opts)
	m := msg("poison")
	m.Tags = "TagA"
	m.Keys = []string{"order-1"}
	m.QueueID = 3
	require.NoError(t, b.Store().Append(m))

	req := pop.Request{Group: group, ClientID: "c1", Topic: topic, QueueID: 3, Max: 1, Invisible: time.Second}
	res, err := b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	clk.Advance(2 * time.Second) // its only delivery's invisible time ends unacked
	res, err = b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	require.Empty(t, res.Messages, "a message past MaxAttempts is not delivered again")

	dlq := brokercore.DeadLetterPrefix + group
	require.Equal(t, int64(1), b.Store().MaxOffset(dlq, 0))
	res, err = b.Pop().Pop(context.Background(), pop.Request{Group: "ops", ClientID: "c2", Topic: dlq, Max: 1, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	got := res.Messages[0].Message
	assert.Equal(t, "poison", string(got.Body))
	assert.Equal(t, "TagA", got.Tags)
	assert.Equal(t, []string{"order-1"}, got.Keys)
	assert.Equal(t, "v", got.Properties["k"], "the message's own properties are kept")
	assert.Equal(t, topic, got.Properties[brokercore.PropDLQOriginTopic])
	assert.Equal(t, "3", got.Properties[brokercore.PropDLQOriginQueue])
	assert.Equal(t, "0", got.Properties[brokercore.PropDLQOriginOffset])
	require.NoError(t, b.Pop().Ack(res.Messages[0].Handle))
}

func TestOpenWithNoDeadLettersRedeliversPastMaxAttempts(t *testing.T) {
	clk := newClock()
	opts := testOptions(clk)
	opts.Pop.MaxAttempts = 1
	opts.NoDeadLetters = true
	b := openBroker(t, t.TempDir(), opts)
	require.NoError(t, b.Store().Append(msg("poison")))

	req := pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 1, Invisible: time.Second}
	for attempt := 1; attempt <= 5; attempt++ {
		res, err := b.Pop().Pop(context.Background(), req)
		require.NoError(t, err)
		require.Len(t, res.Messages, 1, "delivery %d: never dead-lettered", attempt)
		assert.Equal(t, "poison", string(res.Messages[0].Message.Body))
		clk.Advance(2 * time.Second) // its invisible time ends unacked
	}
	assert.Zero(t, b.Store().MaxOffset(brokercore.DeadLetterTopic(group), 0), "nothing is appended to the dead-letter topic")
	assert.Zero(t, b.Pop().Stats().DeadLettered)
}

func TestOpenRefusesNoDeadLettersWithADeadLetterFunc(t *testing.T) {
	opts := testOptions(newClock())
	opts.NoDeadLetters = true
	opts.Pop.DeadLetter = func(string, *store.Message) error { return nil }
	dir := t.TempDir()
	b, err := brokercore.Open(dir, opts)
	require.ErrorIs(t, err, brokercore.ErrInvalid)
	require.Nil(t, b)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a refused Open creates nothing")
}

func TestDeadLetterMessageCopiesWithoutTouchingTheOriginal(t *testing.T) {
	m := msg("x")
	m.Properties[brokercore.PropUniqKey] = "U1"
	m.QueueID, m.QueueOffset, m.LogOffset = 2, 7, 99
	dl := brokercore.DeadLetterMessage("grp", m)
	assert.Equal(t, "%DLQ%grp", dl.Topic)
	assert.Equal(t, 0, dl.QueueID)
	assert.Zero(t, dl.QueueOffset)
	assert.Zero(t, dl.LogOffset)
	assert.Equal(t, "U1", dl.Properties[brokercore.PropDLQOriginMessageID])
	assert.Equal(t, "7", dl.Properties[brokercore.PropDLQOriginOffset])
	assert.Len(t, m.Properties, 2, "the original's properties are unchanged")
	dl.Body[0] = 'y'
	assert.Equal(t, "x", string(m.Body))
}

func TestReopenKeepsOffsetsAndSchedulerProgress(t *testing.T) {
	dir, clk := t.TempDir(), newClock()
	opts := testOptions(clk)
	opts.Offset.FlushEvery = 0 // the default: Close must write the file
	b, err := brokercore.Open(dir, opts)
	require.NoError(t, err)
	for _, s := range []string{"a", "b"} {
		require.NoError(t, b.Store().Append(msg(s)))
	}
	d, err := b.Scheduler().Delay(msg("delayed"), 1)
	require.NoError(t, err)
	require.NoError(t, b.Store().Append(d))
	clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return b.Store().MaxOffset(topic, 0) == 3 }, 10*time.Second, time.Millisecond)

	req := pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 32, Invisible: time.Minute}
	res, err := b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "delayed"}, bodies(res))
	for _, dv := range res.Messages {
		require.NoError(t, b.Pop().Ack(dv.Handle))
	}
	require.NoError(t, b.Close())

	b = openBroker(t, dir, opts)
	off, ok := b.Offsets().Committed(group, topic, 0)
	require.True(t, ok)
	assert.Equal(t, int64(3), off)
	time.Sleep(20 * time.Millisecond) // several scheduler ticks: a re-delivery would show
	assert.Equal(t, int64(3), b.Store().MaxOffset(topic, 0), "the delayed message is not delivered again")
	res, err = b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	assert.Empty(t, res.Messages)
}

func TestReceiptHandlesFromBeforeAReopenAreStaleNotForged(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(newClock())
	b, err := brokercore.Open(dir, opts)
	require.NoError(t, err)
	require.NoError(t, b.Store().Append(msg("a")))
	res, err := b.Pop().Pop(context.Background(), pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 1, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.NoError(t, b.Close())

	b = openBroker(t, dir, opts)
	err = b.Pop().Ack(res.Messages[0].Handle)
	assert.ErrorIs(t, err, pop.ErrStaleHandle)
}

func TestOpenRefusesAHandleKeyOfTheWrongLength(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, brokercore.HandleKeyFile), []byte("short"), 0o600))
	_, err := brokercore.Open(dir, testOptions(newClock()))
	require.ErrorIs(t, err, brokercore.ErrCorrupt)
	got, rerr := os.ReadFile(filepath.Join(dir, brokercore.HandleKeyFile))
	require.NoError(t, rerr)
	assert.Equal(t, "short", string(got), "the key file is left as it was")

	// The pieces opened before the failure were closed again: the store's
	// directory lock is free for the next Open.
	require.NoError(t, os.Remove(filepath.Join(dir, brokercore.HandleKeyFile)))
	openBroker(t, dir, testOptions(newClock()))
}

func TestOpenRejectsBadDirectories(t *testing.T) {
	_, err := brokercore.Open("", brokercore.Options{})
	require.ErrorIs(t, err, brokercore.ErrInvalid)

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	_, err = brokercore.Open(file, brokercore.Options{})
	require.Error(t, err)
	_, err = brokercore.Open(filepath.Join(file, "sub"), brokercore.Options{})
	require.Error(t, err)
}

func TestOpenNamesThePieceThatFailed(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, brokercore.OffsetsFile), []byte("garbage"), 0o600))
	_, err := brokercore.Open(dir, testOptions(newClock()))
	require.ErrorIs(t, err, offset.ErrCorrupt)
	assert.Contains(t, err.Error(), "offsets")
	openBroker(t, t.TempDir(), testOptions(newClock())) // nothing of the failed Open leaks (goleak)
}

func TestOpenTwiceOnOneDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	openBroker(t, dir, testOptions(newClock()))
	_, err := brokercore.Open(dir, testOptions(newClock()))
	require.Error(t, err)
}

func TestCloseIsIdempotentAndEveryPieceAnswersErrClosed(t *testing.T) {
	b, err := brokercore.Open(t.TempDir(), testOptions(newClock()))
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())

	assert.ErrorIs(t, b.Store().Append(msg("x")), store.ErrClosed)
	_, err = b.Pop().Pop(context.Background(), pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 1})
	assert.ErrorIs(t, err, pop.ErrClosed)
	assert.ErrorIs(t, b.Offsets().Commit(group, topic, 0, 1), offset.ErrClosed)
	_, err = b.Consumers().RegisterWithoutSub(group, consumerClient())
	assert.ErrorIs(t, err, consumer.ErrClosed)
	_, ok := b.Locks().TryLock(group, lock.Queue{Topic: topic}, "c1")
	assert.False(t, ok, "the lock table refuses after Close")
	assert.False(t, b.Scheduler().Stats().Running)
	assert.ErrorIs(t, b.Transactions().Commit(0), txn.ErrClosed)
}

func TestCloseEndsLongPollsAndWaitsForThem(t *testing.T) {
	b, err := brokercore.Open(t.TempDir(), testOptions(newClock()))
	require.NoError(t, err)
	ch := popAsync(b, pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 1, Invisible: time.Minute, Poll: time.Hour})
	require.Eventually(t, func() bool { return b.Pop().Stats().Waiters > 0 }, 10*time.Second, time.Millisecond)
	require.NoError(t, b.Close())
	a := await(t, ch)
	assert.ErrorIs(t, a.err, pop.ErrClosed)
}

// A delivery the scheduler makes while Close runs either lands before the
// store closes (the scheduler stops first) or not at all.
func TestCloseStopsTheSchedulerBeforeTheStore(t *testing.T) {
	dir, clk := t.TempDir(), newClock()
	opts := testOptions(clk)
	b, err := brokercore.Open(dir, opts)
	require.NoError(t, err)
	for i := range 50 {
		d, err := b.Scheduler().Delay(msg(string(rune('a'+i%26))), 1)
		require.NoError(t, err)
		require.NoError(t, b.Store().Append(d))
	}
	clk.Advance(2 * time.Second)
	require.NoError(t, b.Close())
	assert.Zero(t, b.Scheduler().Stats().Retried, "no delivery ran into a closed store")

	b = openBroker(t, dir, opts)
	require.Eventually(t, func() bool { return b.Store().MaxOffset(topic, 0) == 50 }, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, int64(50), b.Store().MaxOffset(topic, 0), "each delayed message delivered once")
}

func TestOpenPropagatesNowToEveryPiece(t *testing.T) {
	clk := newClock()
	b := openBroker(t, t.TempDir(), testOptions(clk))
	m := msg("x")
	require.NoError(t, b.Store().Append(m))
	assert.True(t, m.StoredAt.Equal(clk.Now()), "store")
	l, ok := b.Locks().TryLock(group, lock.Queue{Topic: topic}, "c1")
	require.True(t, ok)
	assert.True(t, l.Expires.Equal(clk.Now().Add(lock.DefaultMaxLiveTime)), "lock")
	_, err := b.Consumers().RegisterWithoutSub(group, consumerClient())
	require.NoError(t, err)
	c, ok := b.Consumers().FindClient(group, "c1")
	require.True(t, ok)
	assert.True(t, c.LastSeen.Equal(clk.Now()), "consumer")
}

func TestOpenPropagatesTheLoggerWithPackageNames(t *testing.T) {
	var sink testkit.LogBuffer
	opts := testOptions(newClock())
	opts.Logger = slogJSON(&sink)
	b := openBroker(t, t.TempDir(), opts)
	b.Locks().TryLock("", lock.Queue{Topic: topic}, "c1") // rejected: logged by lock
	_, _ = b.Consumers().RegisterWithoutSub("", consumerClient())
	_, err := b.Pop().Pop(context.Background(), pop.Request{Topic: topic, ClientID: "c1"}) // no group
	require.ErrorIs(t, err, pop.ErrInvalid)
	require.NoError(t, b.Close())
	for _, pkg := range []string{"store", "pop", "offset", "schedule", "lock", "consumer"} {
		assert.Contains(t, sink.String(), `"pkg":"`+pkg+`"`, pkg)
	}
}

func TestHousekeepingSweepsLocksAndScansConsumers(t *testing.T) {
	clk := newClock()
	opts := testOptions(clk)
	opts.LockSweepEvery = time.Millisecond
	opts.ConsumerScanEvery = time.Millisecond
	b := openBroker(t, t.TempDir(), opts)
	_, ok := b.Locks().TryLock(group, lock.Queue{Topic: topic}, "c1")
	require.True(t, ok)
	_, err := b.Consumers().RegisterWithoutSub(group, consumerClient())
	require.NoError(t, err)

	clk.Advance(time.Hour) // past every lease and channel expiry
	require.Eventually(t, func() bool {
		return b.Locks().Stats().Expired == 1 && b.Consumers().Stats().Expired == 1
	}, 10*time.Second, time.Millisecond)
}

func TestNegativePeriodsTurnHousekeepingOff(t *testing.T) {
	clk := newClock()
	opts := testOptions(clk)
	opts.LockSweepEvery = -1
	opts.ConsumerScanEvery = -1
	b := openBroker(t, t.TempDir(), opts)
	_, ok := b.Locks().TryLock(group, lock.Queue{Topic: topic}, "c1")
	require.True(t, ok)
	clk.Advance(time.Hour)
	time.Sleep(10 * time.Millisecond)
	assert.Zero(t, b.Locks().Stats().Expired)
	assert.Equal(t, 1, b.Locks().Sweep(), "the host sweeps on demand")
}

func TestOpenKeepsWhatTheHostSet(t *testing.T) {
	var got []string
	opts := testOptions(newClock())
	opts.Pop.MaxAttempts = 1
	opts.Pop.DeadLetter = func(g string, m *store.Message) error {
		got = append(got, g+":"+string(m.Body))
		return nil
	}
	own := pop.NewMemoryOffsets()
	opts.Pop.Offsets = own
	clk := newClock()
	opts.Now = clk.Now
	b := openBroker(t, t.TempDir(), opts)
	require.NoError(t, b.Store().Append(msg("p")))
	req := pop.Request{Group: group, ClientID: "c1", Topic: topic, Max: 1, Invisible: time.Second}
	res, err := b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	clk.Advance(2 * time.Second)
	_, err = b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, []string{"g:p"}, got)
	assert.Zero(t, b.Store().MaxOffset(brokercore.DeadLetterPrefix+group, 0))
	_, committed := b.Offsets().Committed(group, topic, 0)
	assert.False(t, committed, "pop commits to the host's Offsets, not the broker's")
	off, ok := own.Committed(group, topic, 0)
	assert.True(t, ok)
	assert.Equal(t, int64(1), off)
}

// The reproduction on the composed broker: a host commits 8 on a
// queue pop serves, then pop's next ack would have committed 2 over it.
func TestPlainCommitOnAPopServedQueueIsNotOverwrittenByItsAcks(t *testing.T) {
	b := openBroker(t, t.TempDir(), testOptions(newClock()))
	for i := range 10 {
		require.NoError(t, b.Store().Append(msg(string(rune('a'+i)))))
	}
	req := pop.Request{Group: group, Topic: topic, ClientID: "c1", Max: 2, Invisible: time.Minute}
	res, err := b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 2)

	require.NoError(t, b.Offsets().Commit(group, topic, 0, 8))
	for _, d := range res.Messages {
		err := b.Pop().Ack(d.Handle)
		require.Error(t, err, "an ack from before the commit cannot write its progress over it")
	}
	off, _ := b.Offsets().Committed(group, topic, 0)
	assert.Equal(t, int64(8), off)
	res, err = b.Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, []string{"i", "j"}, bodies(res), "pop restarts at the committed offset")
}

func TestOffsetsBeyondAQueuesEndAreRefusedByCommitAndReset(t *testing.T) {
	b := openBroker(t, t.TempDir(), testOptions(newClock()))
	for range 5 {
		require.NoError(t, b.Store().Append(msg("x")))
	}
	errCommit := b.Offsets().Commit(group, topic, 0, 99)
	_, errReset := b.Offsets().Reset(group, topic, 0, 99)
	require.ErrorIs(t, errCommit, offset.ErrBeyondEnd)
	require.ErrorIs(t, errReset, offset.ErrBeyondEnd)
	_, ok := b.Offsets().Committed(group, topic, 0)
	assert.False(t, ok)
	require.NoError(t, b.Offsets().Commit(group, topic, 0, 5))
}

// Timers (schedule.At) and their cancels live under dir too: across a
// reopen a delivered timer is not delivered again, a cancelled one never,
// and a pending one once, when due.
func TestReopenKeepsTimersAndCancels(t *testing.T) {
	dir, clk := t.TempDir(), newClock()
	opts := testOptions(clk)
	b, err := brokercore.Open(dir, opts)
	require.NoError(t, err)
	at := func(body string, d time.Duration) *store.Message {
		m, err := b.Scheduler().At(msg(body), clk.Now().Add(d))
		require.NoError(t, err)
		require.NoError(t, b.Store().Append(m))
		return m
	}
	at("soon", time.Second)
	cancelled := at("cancelled", time.Minute)
	at("later", time.Hour)
	require.NoError(t, b.Scheduler().Cancel(cancelled.Properties[brokercore.PropUniqKey]))
	clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return b.Store().MaxOffset(topic, 0) == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, b.Close())

	b = openBroker(t, dir, opts)
	clk.Advance(2 * time.Hour)
	require.Eventually(t, func() bool { return b.Store().MaxOffset(topic, 0) >= 2 }, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // several scheduler ticks: a repeat would show
	msgs, err := b.Store().Read(topic, 0, 0, 10)
	require.NoError(t, err)
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Body))
	}
	assert.Equal(t, []string{"soon", "later"}, got)
}

func TestStatsGatherEveryPiece(t *testing.T) {
	b := openBroker(t, t.TempDir(), testOptions(newClock()))
	require.NoError(t, b.Store().Append(msg("x")))
	_, ok := b.Locks().TryLock(group, lock.Queue{Topic: topic}, "c1")
	require.True(t, ok)
	res, err := b.Pop().Pop(context.Background(), pop.Request{Group: group, Topic: topic, ClientID: "c1"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.NoError(t, b.Pop().Ack(res.Messages[0].Handle))

	s := b.Stats()
	assert.Equal(t, uint64(1), s.Store.Messages)
	assert.Equal(t, uint64(1), s.Pop.Acks)
	assert.Equal(t, uint64(1), s.Offset.Commits)
	assert.Equal(t, uint64(1), s.Lock.Locked)
	assert.True(t, s.Schedule.Running)
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &top))
	for _, k := range []string{"store", "pop", "offset", "schedule", "lock", "consumer"} {
		assert.Contains(t, top, k)
	}
}
