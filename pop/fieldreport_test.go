package pop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fieldReportOutcome is what the 16 concurrent retries of the field report
// (apache/rocketmq#10827) saw.
type fieldReportOutcome struct {
	empty, errs int
	results     []Result
}

// popper is what the field report scenario drives: the Service, or the
// broken design's fake around it.
type popper interface {
	Pop(ctx context.Context, req Request) (Result, error)
	Stats() Stats
}

// failFastService is the broken design of apache/rocketmq#10827 as a
// test-local fake: RocketMQ's PopConsumerService.popAsync takes the
// group@topic lock with tryLock and answers empty at once when it is held,
// for FIFO retries with an attempt id too. It serializes the pops of the
// scenario's single group@topic with its own lock in front of the Service.
type failFastService struct {
	*Service
	mu sync.Mutex // the group@topic lock
}

func (f *failFastService) Pop(ctx context.Context, req Request) (Result, error) {
	if !f.mu.TryLock() {
		return Result{}, nil // fail fast: the empty answer the client takes for a success
	}
	defer f.mu.Unlock()
	return f.Service.Pop(ctx, req)
}

// runFieldReport plays the field report's steps 1–4 on src: a first FIFO
// pop with attempt X whose response is lost, another pop of the same
// group@topic holding the lock on a slow read, and 16 concurrent retries
// with X. failFast says s is the broken design's fake.
func runFieldReport(t *testing.T, s popper, failFast bool, gateRead func() func(), entered <-chan int) fieldReportOutcome {
	t.Helper()
	ctx := context.Background()
	fifo := Request{Group: "g", Topic: "T", ClientID: "A", QueueID: 0, Max: 2, Invisible: time.Minute, FIFO: true, AttemptID: "X"}

	// Step 1: client A pops with attempt X; the response is lost.
	first, err := s.Pop(ctx, fifo)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offsetsOf(first))
	require.Equal(t, []int{1, 1}, attemptsOf(first))

	// Step 2: another pop of the same group@topic (queue 1) holds the
	// group@topic lock on a slow read.
	release := gateRead()
	defer release()
	holderDone := make(chan Result, 1)
	go func() {
		r, err := s.Pop(ctx, Request{Group: "g", Topic: "T", ClientID: "B", QueueID: 1, Max: 1, Invisible: time.Minute})
		assert.NoError(t, err)
		holderDone <- r
	}()
	<-entered // the holder is inside its slow read, holding the lock

	// Step 3: 16 concurrent retries with X collide with the lock.
	var (
		mu  sync.Mutex
		out fieldReportOutcome
		wg  sync.WaitGroup
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Pop(ctx, fifo)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				out.errs++
			case len(r.Messages) == 0:
				out.empty++
			default:
				out.results = append(out.results, r)
			}
		}()
	}
	if !failFast {
		// They queue for the lock and sleep: no spin — nobody tries the
		// lock again while the holder keeps it.
		waitFor(t, "16 retries queued for the lock", func() bool { return s.Stats().LockWaits == 16 })
		tries := s.Stats().LockContended
		time.Sleep(20 * time.Millisecond) // a spinning retry would try thousands of times meanwhile
		require.Equal(t, tries, s.Stats().LockContended, "busy spin on the lock")
		require.EqualValues(t, 16, tries)
	} else {
		wg.Wait()
	}
	release() // the slow read finishes; the holder hands the lock over
	wg.Wait()
	hr := <-holderDone
	require.Len(t, hr.Messages, 1, "the holder's own pop succeeded")
	return out
}

// TestFIFORetryWaitsForLockInsteadOfReturningEmpty is the field report
// (apache/rocketmq#10827) step by step. Checked against the broken design:
// run on failFastService (the fake of RocketMQ's fail-fast lock) it fails
// at once with "empty responses: should be zero, but was 16";
// TestFieldReportChainWithFailFastFIFORetry keeps that check running.
func TestFIFORetryWaitsForLockInsteadOfReturningEmpty(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 4)
	src.append("T", 1, 1)
	clock := newFakeClock()
	s := New(src, Options{Now: clock.Now, LockWait: 30 * time.Second})
	defer s.Close()

	out := runFieldReport(t, s, false, func() func() { return src.gate(1) }, src.entered)

	// All 16 got the same batch: zero empty responses, zero errors, and no
	// attempt counted.
	require.Zero(t, out.empty, "empty responses")
	require.Zero(t, out.errs, "errors")
	require.Len(t, out.results, 16)
	for _, r := range out.results {
		require.Equal(t, []int64{0, 1}, offsetsOf(r))
		require.Equal(t, []int{1, 1}, attemptsOf(r))
	}
	st := s.Stats()
	require.EqualValues(t, 16, st.LockWaits)
	require.Zero(t, st.LockTimeouts)

	// Step 5 of the report must not strand the queue: a new attempt id Y
	// stays blocked while X's batch is unacked ...
	ctx := context.Background()
	reqY := Request{Group: "g", Topic: "T", ClientID: "A", QueueID: 0, Max: 2, Invisible: time.Minute, FIFO: true, AttemptID: "Y"}
	r, err := s.Pop(ctx, reqY)
	require.NoError(t, err)
	require.Empty(t, r.Messages, "Y is blocked by X's batch")

	// ... and exactly the final retry's handles ack (the others were
	// superseded by it); the ack unblocks the queue for Y.
	acked := 0
	for _, res := range out.results {
		err0 := s.Ack(res.Messages[0].Handle)
		if err0 != nil {
			require.ErrorIs(t, err0, ErrStaleHandle)
			continue
		}
		require.NoError(t, s.Ack(res.Messages[1].Handle))
		acked++
	}
	require.Equal(t, 1, acked)
	r, err = s.Pop(ctx, reqY)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, offsetsOf(r))
	require.Equal(t, []int{1, 1}, attemptsOf(r))
}

// TestFieldReportChainWithFailFastFIFORetry shows that the test above fails
// on the broken design: on failFastService (RocketMQ's fail-fast lock: the
// FIFO retry answers empty at once when the lock is held), the retries
// come back empty — the client would rotate its attempt id — and the new
// attempt id is blocked by the unacked batch of X that no one can ack any
// more: the queue is stuck for a whole invisible time.
func TestFieldReportChainWithFailFastFIFORetry(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 4)
	src.append("T", 1, 1)
	clock := newFakeClock()
	svc := New(src, Options{Now: clock.Now, LockWait: 30 * time.Second})
	defer svc.Close()
	s := &failFastService{Service: svc}

	out := runFieldReport(t, s, true, func() func() { return src.gate(1) }, src.entered)
	require.Equal(t, 16, out.empty, "the broken design answers every colliding retry empty")
	require.Empty(t, out.results)

	r, err := s.Pop(context.Background(), Request{Group: "g", Topic: "T", ClientID: "A", QueueID: 0, Max: 2,
		Invisible: time.Minute, FIFO: true, AttemptID: "Y"})
	require.NoError(t, err)
	require.Empty(t, r.Messages, "the rotated attempt id is stuck behind X's batch")
}

func TestFIFORetryLockWaitRunsOutWithErrorNotEmpty(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 2)
	src.append("T", 1, 1)
	s := New(src, Options{Now: newFakeClock().Now, LockWait: 20 * time.Millisecond})
	defer s.Close()
	ctx := context.Background()
	fifo := Request{Group: "g", Topic: "T", ClientID: "A", QueueID: 0, Max: 2, Invisible: time.Minute, FIFO: true, AttemptID: "X"}
	_, err := s.Pop(ctx, fifo)
	require.NoError(t, err)

	release := src.gate(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := s.Pop(ctx, Request{Group: "g", Topic: "T", ClientID: "B", QueueID: 1, Max: 1})
		assert.NoError(t, err)
	}()
	<-src.entered
	_, err = s.Pop(ctx, fifo) // LockWait (Poll 0) runs out
	require.ErrorIs(t, err, ErrLockTimeout)

	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	f2 := fifo
	f2.Poll = time.Hour
	_, err = s.Pop(cctx, f2) // ctx runs out
	require.ErrorIs(t, err, ErrLockTimeout)
	require.True(t, errors.Is(err, context.DeadlineExceeded))

	// A contended non-FIFO pop never waits: empty at once.
	r, err := s.Pop(ctx, Request{Group: "g", Topic: "T", ClientID: "C", QueueID: 0, Max: 1})
	require.NoError(t, err)
	require.Empty(t, r.Messages)

	release()
	<-done
	require.EqualValues(t, 2, s.Stats().LockTimeouts)
	// The timed-out retries changed nothing: X still re-pops its batch
	// with the first attempt count.
	r, err = s.Pop(ctx, fifo)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offsetsOf(r))
	require.Equal(t, []int{1, 1}, attemptsOf(r))
}
