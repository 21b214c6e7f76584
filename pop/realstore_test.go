package pop

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

// realStore opens a store.Store in dir with SyncNone whose OnAppend wakes
// whatever Service *hook points at.
func realStore(t testing.TB, dir string, hook *atomic.Pointer[Service]) *store.Store {
	t.Helper()
	st, err := store.Open(dir, store.Options{Sync: store.SyncNone, OnAppend: func(topic string, q int, _ int64) {
		if s := hook.Load(); s != nil {
			s.Arrived(topic, q)
		}
	}})
	require.NoError(t, err)
	return st
}

func appendN(t testing.TB, st *store.Store, topic string, queue, n int) {
	t.Helper()
	msgs := make([]*store.Message, n)
	for i := range msgs {
		msgs[i] = &store.Message{Topic: topic, QueueID: queue, Body: []byte("hello")}
	}
	require.NoError(t, st.Append(msgs...))
}

// gatedSource wraps a Source; reads of a gated queue signal entered and
// block until released — a slow read under the group@topic lock.
type gatedSource struct {
	Source
	mu      sync.Mutex
	gates   map[int]chan struct{}
	entered chan int
}

func newGatedSource(src Source) *gatedSource {
	return &gatedSource{Source: src, gates: map[int]chan struct{}{}, entered: make(chan int, 64)}
}

func (g *gatedSource) gate(queue int) func() {
	ch := make(chan struct{})
	g.mu.Lock()
	g.gates[queue] = ch
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			delete(g.gates, queue)
			g.mu.Unlock()
			close(ch)
		})
	}
}

func (g *gatedSource) Read(topic string, queue int, offset int64, max int) ([]*store.Message, error) {
	g.mu.Lock()
	ch := g.gates[queue]
	g.mu.Unlock()
	if ch != nil {
		g.entered <- queue
		<-ch
	}
	return g.Source.Read(topic, queue, offset, max)
}

func TestFIFORetryWaitsForLockOnRealStore(t *testing.T) {
	var hook atomic.Pointer[Service]
	st := realStore(t, t.TempDir(), &hook)
	defer st.Close()
	appendN(t, st, "T", 0, 4)
	appendN(t, st, "T", 1, 1)
	src := newGatedSource(st)
	s := New(src, Options{Now: newFakeClock().Now, LockWait: 30 * time.Second})
	hook.Store(s)
	defer s.Close()

	out := runFieldReport(t, s, false, func() func() { return src.gate(1) }, src.entered)
	require.Zero(t, out.empty)
	require.Zero(t, out.errs)
	require.Len(t, out.results, 16)
	for _, r := range out.results {
		require.Equal(t, []int64{0, 1}, offsetsOf(r))
		require.Equal(t, []int{1, 1}, attemptsOf(r))
	}
}

func TestFieldReportChainWithFailFastFIFORetryOnRealStore(t *testing.T) {
	var hook atomic.Pointer[Service]
	st := realStore(t, t.TempDir(), &hook)
	defer st.Close()
	appendN(t, st, "T", 0, 4)
	appendN(t, st, "T", 1, 1)
	src := newGatedSource(st)
	svc := New(src, Options{Now: newFakeClock().Now, LockWait: 30 * time.Second})
	defer svc.Close()
	s := &failFastService{Service: svc}
	out := runFieldReport(t, s, true, func() func() { return src.gate(1) }, src.entered)
	require.Equal(t, 16, out.empty, "the broken design answers every colliding retry empty")
}

// TestRestartRedeliversEveryUnackedMessage rules out loss across a host
// restart: the committed offset never passes an unacked message.
func TestRestartRedeliversEveryUnackedMessage(t *testing.T) {
	dir := t.TempDir()
	var hook atomic.Pointer[Service]
	st := realStore(t, dir, &hook)
	appendN(t, st, "T", 0, 10)
	appendN(t, st, "T", 1, 4)
	offs := NewMemoryOffsets() // the host's persisted offsets
	clock := newFakeClock()
	s := New(st, Options{Now: clock.Now, Offsets: offs, HandleKey: []byte("k")})
	hook.Store(s)

	r, err := s.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", QueueID: 0, Max: 10, Invisible: time.Hour})
	require.NoError(t, err)
	require.Len(t, r.Messages, 10)
	for _, i := range []int{0, 1, 5, 9} {
		require.NoError(t, s.Ack(r.Messages[i].Handle))
	}
	f, err := s.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", QueueID: 1, Max: 2, Invisible: time.Hour, FIFO: true, AttemptID: "X"})
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offsetsOf(f))
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, 2, c, "2 is unacked")

	// The host restarts: new store instance, new Service, same offsets.
	hook.Store(nil)
	require.NoError(t, s.Close())
	require.NoError(t, st.Close())
	st = realStore(t, dir, &hook)
	defer st.Close()
	s2 := New(st, Options{Now: clock.Now, Offsets: offs, HandleKey: []byte("k")})
	hook.Store(s2)
	defer s2.Close()

	for _, d := range append(r.Messages, f.Messages...) {
		err := s2.Ack(d.Handle)
		require.ErrorIs(t, err, ErrStaleHandle, "old handles are stale after a restart")
	}
	r2, err := s2.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", QueueID: 0, Max: 32, Invisible: time.Hour})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3, 4, 5, 6, 7, 8, 9}, offsetsOf(r2), "every unacked message again (5 too: at-least-once)")
	f2, err := s2.Pop(bg, Request{Group: "g", Topic: "T", ClientID: "c", QueueID: 1, Max: 2, Invisible: time.Hour, FIFO: true, AttemptID: "Y"})
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offsetsOf(f2), "the FIFO batch again, in order")
}

func TestArrivalFromRealStoreWakesLongPoll(t *testing.T) {
	var hook atomic.Pointer[Service]
	st := realStore(t, t.TempDir(), &hook)
	defer st.Close()
	s := New(st, Options{})
	hook.Store(s)
	defer s.Close()
	ch := longPoll(s, Request{Group: "g", Topic: "T", ClientID: "c", QueueID: AllQueues, Max: 4, Invisible: time.Minute, Poll: time.Minute})
	waitFor(t, "pop waiting", func() bool { return s.Stats().Waiters == 1 })
	appendN(t, st, "T", 2, 3)
	o := recvWithin(t, ch)
	require.NoError(t, o.err)
	require.Equal(t, []int64{0, 1, 2}, offsetsOf(o.r))
}

var _ Source = (*store.Store)(nil)

// TestRetentionPastTheNextOffsetSkipsAheadAndSettlesWhatIsGone: the store
// retained segments the group had not read yet; the pop skips to the new
// MinOffset (logged). In-flight entries keep offsets, not bodies (issue
// 15): those whose messages retention removed cannot be delivered again,
// so they are settled (logged at WARN) instead of wedging the commit, and
// the commit moves past the retained range.
func TestRetentionPastTheNextOffsetSkipsAheadAndSettlesWhatIsGone(t *testing.T) {
	var hook atomic.Pointer[Service]
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone, SegmentSize: 4096, MaxBytes: 1, RetainEvery: -1})
	require.NoError(t, err)
	defer st.Close()
	for range 40 {
		appendN(t, st, "T", 0, 10)
	}
	clock := newFakeClock()
	offs := NewMemoryOffsets()
	s := New(st, Options{Now: clock.Now, Offsets: offs})
	hook.Store(s)
	defer s.Close()
	r, err := s.Pop(bg, req0(2, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offsetsOf(r))

	n, err := st.Retain()
	require.NoError(t, err)
	require.Positive(t, n)
	min := st.MinOffset("T", 0)
	require.Greater(t, min, int64(2))

	r2, err := s.Pop(bg, req0(2, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{min, min + 1}, offsetsOf(r2))
	clock.Advance(10 * time.Second)
	r3, err := s.Pop(bg, req0(2, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{min, min + 1}, offsetsOf(r3), "what retention removed is settled, what is left redelivered")
	require.Equal(t, []int{2, 2}, attemptsOf(r3))
	ackAll(t, s, r3)
	c, _ := offs.Committed("g", "T", 0)
	require.Equal(t, min+2, c, "the commit moved past the retained range")
}
