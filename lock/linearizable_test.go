package lock

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
)

// The lock table is checked for linearizability with porcupine: workers
// call TryLock, Unlock, Holder and Sweep on one key while the fake clock
// they all read is advanced concurrently, and the recorded history must
// have an order, consistent with real time, in which a sequential model
// (one lease, one token counter, one clock) gives every answer seen —
// tokens and expiry times included, so a decision made on a stale clock
// reading shows up as an answer no instant of the history could give.

const linLive = 10 * time.Second

type linOpKind uint8

const (
	linLock linOpKind = iota
	linUnlock
	linHolder
	linSweep
	linAdvance
)

type linInput struct {
	kind   linOpKind
	client string
	d      time.Duration // linAdvance
}

type linOutput struct {
	ok      bool
	client  string
	token   uint64
	expires int64 // Unix nanoseconds
	n       int   // linSweep
}

// linState is the model: the clock, the token counter and the key's entry
// (holder "" = no entry; an expired entry stays until swept, as in the
// table, where it only matters to Sweep's count).
type linState struct {
	now     int64
	seq     uint64
	holder  string
	token   uint64
	expires int64
}

func (s linState) live() bool { return s.holder != "" && s.now < s.expires }

func linStep(state, input, output any) (bool, any) {
	s, in, out := state.(linState), input.(linInput), output.(linOutput)
	switch in.kind {
	case linAdvance:
		s.now += int64(in.d)
		return true, s
	case linLock:
		switch {
		case s.live() && s.holder != in.client:
			return !out.ok, s
		case s.live():
			s.expires = max(s.expires, s.now+int64(linLive))
		default:
			s.seq++
			s.holder, s.token, s.expires = in.client, s.seq, s.now+int64(linLive)
		}
		return out.ok && out.token == s.token && out.expires == s.expires, s
	case linUnlock:
		if s.live() && s.holder == in.client {
			s.holder = ""
			return out.ok, s
		}
		return !out.ok, s
	case linHolder:
		if !s.live() {
			return !out.ok, s
		}
		return out.ok && out.client == s.holder && out.token == s.token && out.expires == s.expires, s
	case linSweep:
		if s.holder != "" && !s.live() {
			s.holder = ""
			return out.n == 1, s
		}
		return out.n == 0, s
	}
	return false, s
}

var linModel = porcupine.Model{
	Init: func() any { return linState{now: linStart.UnixNano()} },
	Step: linStep,
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%+v -> %+v", input, output)
	},
}

var linStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// linRecorder records operations with logical call/return stamps.
type linRecorder struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (r *linRecorder) do(client int, in linInput, f func() linOutput) {
	call := r.clock.Add(1)
	out := f()
	ret := r.clock.Add(1)
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

func (r *linRecorder) apply(tb *Table, clk *testkit.Clock, worker int, in linInput) {
	g, q := "g", Queue{Topic: "t", QueueID: 0}
	r.do(worker, in, func() linOutput {
		switch in.kind {
		case linLock:
			l, ok := tb.TryLock(g, q, in.client)
			return linOutput{ok: ok, token: l.Token, expires: l.Expires.UnixNano()}
		case linUnlock:
			return linOutput{ok: tb.Unlock(g, q, in.client)}
		case linHolder:
			l, ok := tb.Holder(g, q)
			return linOutput{ok: ok, client: l.ClientID, token: l.Token, expires: l.Expires.UnixNano()}
		case linSweep:
			return linOutput{n: tb.Sweep()}
		default:
			clk.Advance(in.d)
			return linOutput{}
		}
	})
}

func linCheck(t *testing.T, ops []porcupine.Operation) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(linModel, ops, 10*time.Second)
	if res != porcupine.Ok {
		for _, op := range ops {
			t.Logf("client %d [%d,%d] %+v -> %+v", op.ClientId, op.Call, op.Return, op.Input, op.Output)
		}
		_ = info
	}
	require.Equal(t, porcupine.Ok, res, "the lock table's history is not linearizable")
}

// stallingClock reads the fake clock and, when armed, stalls before handing
// the reading back: a goroutine descheduled between reading the time and
// using it.
type stallingClock struct {
	clk     *testkit.Clock
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *stallingClock) Now() time.Time {
	now := s.clk.Now()
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.release
	}
	return now
}

// The defect as a script: a TryLock reads the clock, stalls while time
// moves past a lease length and another client locks and unlocks, then
// decides on its stale reading. Before the fix it returned a lease with a
// newer token than the other client's but an expiry from before it — an
// answer no instant gives (and a lease already expired when returned).
// With the clock read inside the key's critical step, the other client
// waits for the stalled one instead.
func TestTryLockStalledAfterReadingTheClockStaysLinearizable(t *testing.T) {
	clk := testkit.NewClock(linStart)
	sc := &stallingClock{clk: clk, entered: make(chan struct{}), release: make(chan struct{})}
	tb := New(Options{MaxLiveTime: linLive, Now: sc.Now})
	rec := &linRecorder{}

	sc.armed.Store(true)
	stalled := make(chan struct{})
	go func() {
		defer close(stalled)
		rec.apply(tb, clk, 1, linInput{kind: linLock, client: "c1"})
	}()
	<-sc.entered
	rec.apply(tb, clk, 0, linInput{kind: linAdvance, d: 2 * linLive})
	other := make(chan struct{})
	go func() {
		defer close(other)
		rec.apply(tb, clk, 2, linInput{kind: linLock, client: "c2"})
		rec.apply(tb, clk, 2, linInput{kind: linUnlock, client: "c2"})
	}()
	select { // the other client either runs now or waits for the stalled one
	case <-other:
	case <-time.After(100 * time.Millisecond):
	}
	close(sc.release)
	<-stalled
	<-other
	linCheck(t, rec.ops)
}

// Many random histories: 8 workers on one key, 3 clients, the fake clock
// advanced by the workers themselves in steps around the lease length.
func TestLockTableIsLinearizable(t *testing.T) {
	histories, perWorker := 300, 24
	if testing.Short() {
		histories = 50
	}
	for h := range histories {
		clk := testkit.NewClock(linStart)
		tb := New(Options{MaxLiveTime: linLive, Now: clk.Now})
		rec := &linRecorder{}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(h), uint64(w)))
				for range perWorker {
					in := linInput{client: fmt.Sprintf("c%d", rng.IntN(3))}
					switch r := rng.IntN(20); {
					case r < 9:
						in.kind = linLock
					case r < 14:
						in.kind = linUnlock
					case r < 16:
						in.kind = linHolder
					case r < 17:
						in.kind = linSweep
					default:
						in.kind = linAdvance
						in.d = time.Duration(rng.Int64N(int64(linLive)))
					}
					rec.apply(tb, clk, w, in)
				}
			})
		}
		wg.Wait()
		linCheck(t, rec.ops)
	}
}
