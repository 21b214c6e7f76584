package pop_test

// Black-box acceptance tests of the pop contract in ARCHITECTURE.md ("## pop"
// and the conventions), written from the contract alone, on the real store and
// the real offset.Manager. One test per contract sentence; the comment above
// each test quotes the sentence it checks. The tests are split into
// acceptance_*_test.go files by idea; this file holds the shared helpers.

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// accClock is the test clock injected as Options.Now.
type accClock = testkit.Clock

func newAccClock() *accClock { return testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

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
