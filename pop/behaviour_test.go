package pop

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

var bg = context.Background()

func req0(max int, inv time.Duration) Request {
	return Request{Group: "g", Topic: "T", ClientID: "c", QueueID: 0, Max: max, Invisible: inv}
}

func TestUnackedMessageReappearsAfterInvisibleTimeWithNextAttempt(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 3)
	s := New(src, Options{Now: clock.Now})
	defer s.Close()
	r, err := s.Pop(bg, req0(2, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offsetsOf(r))
	require.NoError(t, s.Ack(r.Messages[1].Handle))

	r2, err := s.Pop(bg, req0(2, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{2}, offsetsOf(r2), "0 is still invisible, 1 acked")
	require.NoError(t, s.Ack(r2.Messages[0].Handle))
	clock.Advance(9 * time.Second)
	r3, err := s.Pop(bg, req0(2, 10*time.Second))
	require.NoError(t, err)
	require.Empty(t, r3.Messages)
	clock.Advance(time.Second) // at once: no background loop involved
	r4, err := s.Pop(bg, req0(2, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(r4))
	require.Equal(t, []int{2}, attemptsOf(r4))
	require.ErrorIs(t, s.Ack(r.Messages[0].Handle), ErrStaleHandle, "superseded by the redelivery")
	require.NoError(t, s.Ack(r4.Messages[0].Handle))
	require.ErrorIs(t, s.Ack(r4.Messages[0].Handle), ErrStaleHandle, "already acked")
}

func TestAckCommitsLowestUnackedBeforeReturning(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 4)
	offs := NewMemoryOffsets()
	s := New(src, Options{Now: clock.Now, Offsets: offs})
	defer s.Close()
	r, err := s.Pop(bg, req0(4, time.Minute))
	require.NoError(t, err)
	require.NoError(t, s.Ack(r.Messages[2].Handle))
	_, ok := offs.Committed("g", "T", 0)
	require.False(t, ok, "offset 0 is unacked: nothing may be committed past it")
	require.NoError(t, s.Ack(r.Messages[0].Handle))
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, 1, c)
	require.NoError(t, s.Ack(r.Messages[1].Handle))
	c, _ = offs.Committed("g", "T", 0)
	require.EqualValues(t, 3, c, "skips the already acked 2")
}

type failingOffsets struct {
	*MemoryOffsets
	fail bool
}

func (f *failingOffsets) CommitFenced(g, t string, q int, off int64, ep uint64) error {
	if f.fail {
		return errors.New("disk full")
	}
	return f.MemoryOffsets.CommitFenced(g, t, q, off, ep)
}

func TestAckWhoseCommitFailsChangesNothing(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 1)
	offs := &failingOffsets{MemoryOffsets: NewMemoryOffsets(), fail: true}
	s := New(src, Options{Now: clock.Now, Offsets: offs})
	defer s.Close()
	r, err := s.Pop(bg, req0(1, time.Minute))
	require.NoError(t, err)
	err = s.Ack(r.Messages[0].Handle)
	require.ErrorContains(t, err, "disk full")
	offs.fail = false
	require.NoError(t, s.Ack(r.Messages[0].Handle), "the handle is still live")
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, 1, c)
}

func TestOffsetResetDropsStateAndOldProgressCannotCommitOverIt(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 6)
	offs := NewMemoryOffsets()
	s := New(src, Options{Now: clock.Now, Offsets: offs})
	defer s.Close()
	r, err := s.Pop(bg, req0(4, time.Minute))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 2, 3}, offsetsOf(r))

	offs.Reset("g", "T", 0, 1) // operator rewinds the group to offset 1

	// The old handles were popped before the reset: stale, and in
	// particular the ack of 0 (which would commit 1..4 progress) cannot
	// write over the reset.
	for _, d := range r.Messages {
		require.ErrorIs(t, s.Ack(d.Handle), ErrStaleHandle)
	}
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, 1, c)

	// The next pop restarts at the reset offset with fresh state.
	r2, err := s.Pop(bg, req0(3, time.Minute))
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, offsetsOf(r2))
	require.Equal(t, []int{1, 1, 1}, attemptsOf(r2))
	require.EqualValues(t, 1, s.Stats().Resets)
	ackAll(t, s, r2)
	c, _ = offs.Committed("g", "T", 0)
	require.EqualValues(t, 4, c)

	// A reset forward skips, too.
	offs.Reset("g", "T", 0, 5)
	r3, err := s.Pop(bg, req0(3, time.Minute))
	require.NoError(t, err)
	require.Equal(t, []int64{5}, offsetsOf(r3))
}

func TestInitialOffsetLatestSkipsOldMessages(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 3)
	s := New(src, Options{Now: clock.Now, InitialOffset: Latest})
	defer s.Close()
	r, err := s.Pop(bg, req0(3, time.Minute))
	require.NoError(t, err)
	require.Empty(t, r.Messages)
	src.append("T", 0, 1)
	r, err = s.Pop(bg, req0(3, time.Minute))
	require.NoError(t, err)
	require.Equal(t, []int64{3}, offsetsOf(r))
}

func TestDeadLetterAfterMaxAttemptsRetriesFailingCallWithoutLosingMessage(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 2)
	var mu sync.Mutex
	fail := true
	var got []int64
	s := New(src, Options{Now: clock.Now, MaxAttempts: 2, DeadLetterRetry: 5 * time.Second,
		DeadLetter: func(group string, m *store.Message) error {
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, "g", group)
			if fail {
				return errors.New("dlq unavailable")
			}
			got = append(got, m.QueueOffset)
			return nil
		}})
	defer s.Close()
	r, err := s.Pop(bg, req0(1, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int{1}, attemptsOf(r))
	clock.Advance(10 * time.Second)
	r, err = s.Pop(bg, req0(1, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(r))
	require.Equal(t, []int{2}, attemptsOf(r))
	clock.Advance(10 * time.Second)

	// Delivered MaxAttempts times and invisible again: dead letter, which
	// fails; the message is kept (not delivered, not lost) and retried.
	r, err = s.Pop(bg, req0(1, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{1}, offsetsOf(r), "the queue goes on")
	require.NoError(t, s.Ack(r.Messages[0].Handle))
	require.EqualValues(t, 1, s.Stats().DeadLetterFailures)
	clock.Advance(5 * time.Second)
	r, err = s.Pop(bg, req0(1, 10*time.Second))
	require.NoError(t, err)
	require.Empty(t, r.Messages, "never redelivered after MaxAttempts")
	require.EqualValues(t, 2, s.Stats().DeadLetterFailures)

	mu.Lock()
	fail = false
	mu.Unlock()
	clock.Advance(5 * time.Second)
	r, err = s.Pop(bg, req0(1, 10*time.Second))
	require.NoError(t, err)
	require.Empty(t, r.Messages)
	require.Equal(t, []int64{0}, got)
	require.EqualValues(t, 1, s.Stats().DeadLettered)
	c, _ := s.offsets.Committed("g", "T", 0)
	require.EqualValues(t, 2, c, "the dead-lettered message is done")
}

func TestNilDeadLetterKeepsRedelivering(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 1)
	s := New(src, Options{Now: clock.Now, MaxAttempts: 2})
	defer s.Close()
	for i := 1; i <= 4; i++ {
		r, err := s.Pop(bg, req0(1, time.Second))
		require.NoError(t, err)
		require.Equal(t, []int{i}, attemptsOf(r))
		clock.Advance(time.Second)
	}
}

func TestInvisibleIsClampedAndTheClampIsVisible(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 3)
	s := New(src, Options{Now: clock.Now, MinInvisible: 2 * time.Second, MaxInvisible: time.Minute})
	defer s.Close()
	r, err := s.Pop(bg, req0(1, time.Millisecond))
	require.NoError(t, err)
	require.True(t, r.Clamped)
	require.Equal(t, 2*time.Second, r.Invisible)
	r, err = s.Pop(bg, req0(1, time.Hour))
	require.NoError(t, err)
	require.True(t, r.Clamped)
	require.Equal(t, time.Minute, r.Invisible)
	r, err = s.Pop(bg, req0(1, 30*time.Second))
	require.NoError(t, err)
	require.False(t, r.Clamped)
	require.Equal(t, 30*time.Second, r.Invisible)
	clock.Advance(2 * time.Second)
	r, err = s.Pop(bg, req0(1, 30*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(r), "the clamped 2 s applied")
	require.EqualValues(t, 2, s.Stats().Clamped)
}

func TestBadRequestIsRejectedAndChangesNothing(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 1)
	s := New(src, Options{Now: clock.Now})
	defer s.Close()
	ok := req0(1, time.Minute)
	bad := map[string]func(*Request){
		"empty group":    func(r *Request) { r.Group = "" },
		"empty topic":    func(r *Request) { r.Topic = "" },
		"empty client":   func(r *Request) { r.ClientID = "" },
		"max -1":         func(r *Request) { r.Max = -1 },
		"max 33":         func(r *Request) { r.Max = 33 },
		"neg invisible":  func(r *Request) { r.Invisible = -time.Second },
		"neg poll":       func(r *Request) { r.Poll = -time.Second },
		"queue -2":       func(r *Request) { r.QueueID = -2 },
		"huge group":     func(r *Request) { r.Group = strings.Repeat("g", 5000) },
		"fifo max -1":    func(r *Request) { r.FIFO, r.AttemptID, r.Max = true, "X", -1 },
		"bad filter":     func(r *Request) { r.Filter = "A ||" },
		"neg poll fifo":  func(r *Request) { r.FIFO, r.AttemptID, r.Poll = true, "X", -1 },
		"empty group q1": func(r *Request) { r.Group, r.QueueID = "", AllQueues },
	}
	for name, mut := range bad {
		r := ok
		mut(&r)
		_, err := s.Pop(bg, r)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
	require.EqualValues(t, len(bad), s.Stats().Invalid)
	require.Zero(t, s.Stats().Pops)
	r, err := s.Pop(bg, ok)
	require.NoError(t, err)
	require.Equal(t, []int{1}, attemptsOf(r), "nothing was popped by the bad requests")

	_, err = s.ChangeInvisible(r.Messages[0].Handle, -time.Second)
	require.ErrorIs(t, err, ErrInvalid)
	require.NoError(t, s.Ack(r.Messages[0].Handle), "the handle survived the bad change")

	// A topic or queue with nothing in it is not an error.
	r, err = s.Pop(bg, Request{Group: "g", Topic: "nothing", ClientID: "c", QueueID: 7, Max: 1})
	require.NoError(t, err)
	require.Empty(t, r.Messages)
}

func TestBadAndForgedHandlesAreRejectedAndChangeNothing(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 1)
	s := New(src, Options{Now: clock.Now, HandleKey: []byte("key-1")})
	defer s.Close()
	r, err := s.Pop(bg, req0(1, time.Minute))
	require.NoError(t, err)
	h := r.Messages[0].Handle

	forger := New(src, Options{Now: clock.Now, HandleKey: []byte("key-2")})
	defer forger.Close()
	fr, err := forger.Pop(bg, req0(1, time.Minute))
	require.NoError(t, err)

	tampered := []byte(h)
	tampered[len(tampered)/2] ^= 1
	if tampered[len(tampered)/2] == '-' || tampered[len(tampered)/2] == '_' {
		tampered[len(tampered)/2] = 'A'
	}
	for _, bad := range []string{"", "x", "!!!!", h[:len(h)-1], string(tampered), fr.Messages[0].Handle, strings.Repeat("A", 10000)} {
		require.ErrorIs(t, s.Ack(bad), ErrBadHandle, "%q", bad)
		_, err := s.ChangeInvisible(bad, time.Minute)
		require.ErrorIs(t, err, ErrBadHandle)
	}
	require.NoError(t, s.Ack(h), "the real handle is untouched")
}

func TestChangeInvisibleReturnsNewHandleAndOldGoesStale(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 1)
	s := New(src, Options{Now: clock.Now})
	defer s.Close()
	r, err := s.Pop(bg, req0(1, 10*time.Second))
	require.NoError(t, err)
	old := r.Messages[0].Handle
	nh, err := s.ChangeInvisible(old, time.Minute)
	require.NoError(t, err)
	require.NotEqual(t, old, nh)
	require.ErrorIs(t, s.Ack(old), ErrStaleHandle)
	_, err = s.ChangeInvisible(old, time.Minute)
	require.ErrorIs(t, err, ErrStaleHandle)
	clock.Advance(30 * time.Second)
	r2, err := s.Pop(bg, req0(1, 10*time.Second))
	require.NoError(t, err)
	require.Empty(t, r2.Messages, "extended")
	clock.Advance(30 * time.Second)
	r2, err = s.Pop(bg, req0(1, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int{2}, attemptsOf(r2), "a change is not a delivery")
	require.ErrorIs(t, s.Ack(nh), ErrStaleHandle)
}

func TestFIFOBlocksOtherAttemptsAndChangeInvisibleExtendsTheBlock(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	src.append("T", 0, 4)
	s := New(src, Options{Now: clock.Now})
	defer s.Close()
	fifo := func(attempt string) Request {
		return Request{Group: "g", Topic: "T", ClientID: "c", QueueID: 0, Max: 2, Invisible: 10 * time.Second, FIFO: true, AttemptID: attempt}
	}
	r, err := s.Pop(bg, fifo("X"))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offsetsOf(r))
	require.NoError(t, s.Ack(r.Messages[0].Handle))

	// Non-FIFO pops of the same queue are not blocked by order, but FIFO
	// pops with other attempt ids are.
	rY, err := s.Pop(bg, fifo("Y"))
	require.NoError(t, err)
	require.Empty(t, rY.Messages)
	nh, err := s.ChangeInvisible(r.Messages[1].Handle, time.Minute)
	require.NoError(t, err)
	clock.Advance(30 * time.Second)
	rY, err = s.Pop(bg, fifo("Y"))
	require.NoError(t, err)
	require.Empty(t, rY.Messages, "the change extended the block")
	clock.Advance(30 * time.Second)
	rY, err = s.Pop(bg, fifo("Y"))
	require.NoError(t, err)
	require.Equal(t, []int64{1}, offsetsOf(rY), "the same (remaining) batch again")
	require.Equal(t, []int{2}, attemptsOf(rY))
	require.ErrorIs(t, s.Ack(nh), ErrStaleHandle)
	ackAll(t, s, rY)
	rZ, err := s.Pop(bg, fifo("Z"))
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, offsetsOf(rZ))
}

func TestAllQueuesRotatesFairly(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	for q := range 4 {
		src.append("T", q, 10)
	}
	s := New(src, Options{Now: clock.Now})
	defer s.Close()
	seen := map[int]int{}
	for range 8 {
		r, err := s.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", QueueID: AllQueues, Max: 1, Invisible: time.Minute})
		require.NoError(t, err)
		require.Len(t, r.Messages, 1)
		seen[r.Messages[0].Message.QueueID]++
	}
	require.Equal(t, map[int]int{0: 2, 1: 2, 2: 2, 3: 2}, seen)
	r, err := s.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", QueueID: AllQueues, Max: 32, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, r.Messages, 32, "a batch spans queues")
}

func TestFIFOAllQueuesSameAttemptRepopsOnlyItsBatches(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	for q := range 3 {
		src.append("T", q, 2)
	}
	s := New(src, Options{Now: clock.Now})
	defer s.Close()
	req := Request{Group: "g", Topic: "T", ClientID: "c", QueueID: AllQueues, Max: 3, Invisible: time.Minute, FIFO: true, AttemptID: "X"}
	r1, err := s.Pop(bg, req)
	require.NoError(t, err)
	require.Len(t, r1.Messages, 3)
	key := func(r Result) map[[2]int64]int {
		m := map[[2]int64]int{}
		for _, d := range r.Messages {
			m[[2]int64{int64(d.Message.QueueID), d.Message.QueueOffset}] = d.Attempts
		}
		return m
	}
	for range 3 {
		r2, err := s.Pop(bg, req)
		require.NoError(t, err)
		require.Equal(t, key(r1), key(r2))
	}
}
