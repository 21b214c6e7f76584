package pop

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedOffsets is an Offsets whose CommitFenced can be held (a slow fsync)
// and records every commit in order.
type gatedOffsets struct {
	*MemoryOffsets
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{}
	commits map[int][]int64
}

func (g *gatedOffsets) CommitFenced(group, topic string, q int, off int64, epoch uint64) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		g.entered <- struct{}{}
		<-gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commits[q] = append(g.commits[q], off)
	return g.MemoryOffsets.CommitFenced(group, topic, q, off, epoch)
}

// TestSlowCommitDoesNotHoldTheGroupTopicMutex: an Offsets that writes and
// fsyncs a file on every commit must not stall the pops, acks and changes
// of the same group@topic while it works.
func TestSlowCommitDoesNotHoldTheGroupTopicMutex(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 4)
	src.append("T", 1, 1)
	offs := &gatedOffsets{MemoryOffsets: NewMemoryOffsets(), entered: make(chan struct{}, 1), commits: map[int][]int64{}}
	s := New(src, Options{Now: newFakeClock().Now, Offsets: offs})
	defer s.Close()
	r, err := s.Pop(bg, req0(4, time.Minute))
	require.NoError(t, err)
	require.Len(t, r.Messages, 4)

	gate := make(chan struct{})
	offs.mu.Lock()
	offs.gate = gate
	offs.mu.Unlock()
	acked := make(chan error, 1)
	go func() { acked <- s.Ack(r.Messages[0].Handle) }()
	<-offs.entered // the commit is in progress, as slow as it likes

	done := make(chan struct{})
	go func() {
		defer close(done)
		other := req0(1, time.Minute)
		other.QueueID = 1
		p, err := s.Pop(bg, other)
		require.NoError(t, err)
		require.Len(t, p.Messages, 1)
		_, err = s.ChangeInvisible(r.Messages[1].Handle, time.Hour)
		require.NoError(t, err)
		require.NoError(t, s.Ack(r.Messages[3].Handle)) // not the lowest: no commit of its own
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a pop, change or ack waited for another ack's commit")
	}
	offs.mu.Lock()
	offs.gate = nil
	offs.mu.Unlock()
	close(gate)
	require.NoError(t, <-acked)
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, 1, c)
}

// TestConcurrentAcksCommitInOrder: commits leave the mutex but never
// overtake each other: the committed offsets of a queue only grow.
func TestConcurrentAcksCommitInOrder(t *testing.T) {
	const n = 400
	src := newMemSource()
	src.append("T", 0, n)
	offs := &gatedOffsets{MemoryOffsets: NewMemoryOffsets(), commits: map[int][]int64{}}
	s := New(src, Options{Now: newFakeClock().Now, Offsets: offs})
	defer s.Close()
	handles := popHandles(t, s, n)
	ackConcurrently(t, s, handles, 8)
	got := offs.commits[0]
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1], got[i], "commit %d went backwards or repeated: %v", i, got[i-1:i+1])
	}
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, n, c)
}

// TestNeverAckedHeadKeepsTheInFlightTableSmall: one message at the head of
// a queue is never acked while thousands behind it are popped and acked;
// the queue's state holds that one entry, not the backlog behind it.
func TestNeverAckedHeadKeepsTheInFlightTableSmall(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 10_001)
	s := New(src, Options{Now: newFakeClock().Now})
	defer s.Close()
	head, err := s.Pop(bg, req0(1, time.Hour))
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(head))
	popAndAck(t, s, 10_000)
	gt, _ := s.gts.Load(gtKey{"g", "T"})
	gt.mu.Lock()
	defer gt.mu.Unlock()
	qs := gt.core.queues[0]
	require.Equal(t, 1, qs.pending())
	require.Equal(t, 1, qs.nHidden)
	require.LessOrEqual(t, len(qs.order)-qs.head, 64+2, "settled offsets are compacted away")
	require.LessOrEqual(t, len(qs.slab), 2*MaxBatch, "slab slots are reused")
	require.EqualValues(t, 0, qs.low(), "the commit waits for the head")
}

// TestAckedInOrderTheOrderListDoesNotGrowWithThePopped: popped and acked
// in order, low() walks order's head past the settled offsets; the
// dropped prefix must be given back, not kept (it grew by one offset per
// message popped, forever: 16 MB per million messages).
func TestAckedInOrderTheOrderListDoesNotGrowWithThePopped(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 10_000)
	s := New(src, Options{Now: newFakeClock().Now})
	defer s.Close()
	popAndAck(t, s, 10_000)
	gt, _ := s.gts.Load(gtKey{"g", "T"})
	gt.mu.Lock()
	defer gt.mu.Unlock()
	qs := gt.core.queues[0]
	require.Zero(t, qs.pending())
	require.LessOrEqual(t, cap(qs.order), 4*64, "order keeps the whole history of popped offsets")
}

// TestConcurrentAcksCommitInOrderWithMemoryOffsets is
// TestConcurrentAcksCommitInOrder for the Service's own MemoryOffsets,
// whose commits run under the group@topic mutex (no commitMu): a watcher
// sees the committed offset only grow, every Ack that moved the low-water
// mark finds it committed when it returns, and all of them end at n.
func TestConcurrentAcksCommitInOrderWithMemoryOffsets(t *testing.T) {
	const n = 400
	src := newMemSource()
	src.append("T", 0, n)
	offs := NewMemoryOffsets()
	s := New(src, Options{Now: newFakeClock().Now, Offsets: offs})
	defer s.Close()
	require.True(t, s.commitLocked)
	handles := popHandles(t, s, n)
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		var last int64
		for {
			c, _ := offs.Committed("g", "T", 0)
			if c < last {
				t.Errorf("committed offset went back from %d to %d", last, c)
				return
			}
			last = c
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	ackConcurrently(t, s, handles, 8)
	close(stop)
	watch.Wait()
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, n, c)
	// In order, one at a time: each ack's own commit is visible on return.
	src.append("T", 0, 10)
	r, err := s.Pop(bg, req0(10, time.Hour))
	require.NoError(t, err)
	for i, d := range r.Messages {
		require.NoError(t, s.Ack(d.Handle))
		c, _ := offs.Committed("g", "T", 0)
		require.EqualValues(t, n+i+1, c)
	}
}

// TestMemoryOffsetsAnswerEachKeyThroughTheRecentRecord: MemoryOffsets
// keeps the record it used last to skip hashing; interleaved keys, resets
// and fenced commits must each still see their own record.
func TestMemoryOffsetsAnswerEachKeyThroughTheRecentRecord(t *testing.T) {
	o := NewMemoryOffsets()
	require.NoError(t, o.CommitFenced("g", "T", 0, 5, 0))
	require.NoError(t, o.CommitFenced("g", "T", 1, 7, 0))
	require.Zero(t, o.Epoch("g", "U", 0), "a key never seen")
	off, ok := o.Committed("g", "U", 0)
	require.False(t, ok)
	require.Zero(t, off)
	require.EqualValues(t, 1, o.Reset("g", "T", 0, 2))
	require.Zero(t, o.Epoch("g", "T", 1), "the other queue's epoch did not move")
	require.EqualValues(t, 1, o.Epoch("g", "T", 0))
	require.ErrorIs(t, o.CommitFenced("g", "T", 0, 9, 0), ErrStaleEpoch)
	require.ErrorIs(t, o.CommitFenced("h", "T", 0, 9, 1), ErrStaleEpoch, "an unknown key is at epoch 0")
	require.NoError(t, o.CommitFenced("g", "T", 1, 8, 0))
	off, _ = o.Committed("g", "T", 0)
	require.EqualValues(t, 2, off, "the refused commit stored nothing")
	require.NoError(t, o.CommitFenced("g", "T", 0, 3, 1))
	for q, want := range []int64{3, 8} {
		off, ok := o.Committed("g", "T", q)
		require.True(t, ok)
		require.EqualValues(t, want, off)
	}
	// Epoch without the lock races with Reset only through the atomic.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 100 {
			o.Reset("g", "T", 0, 0)
		}
	}()
	var last uint64
	for range 1000 {
		e := o.Epoch("g", "T", 0)
		require.GreaterOrEqual(t, e, last)
		last = e
	}
	wg.Wait()
	require.EqualValues(t, 101, o.Epoch("g", "T", 0))
}

// TestGetFindsEveryOffsetBehindAStuckHead: with a never-settled head and
// a long run of offsets behind it (some settled, some never added), get
// finds exactly the live ones, whether they are among the last refs it
// looks at first or further back.
func TestGetFindsEveryOffsetBehindAStuckHead(t *testing.T) {
	q := newQueueState(0, 1, 0, 0)
	live := map[int64]bool{}
	for off := int64(0); off < 3000; off += 3 { // offsets 1, 2 mod 3 never added
		q.add(off, 0)
		live[off] = true
	}
	for off := int64(3); off < 3000; off += 9 { // settled: its ref stays until compaction
		q.settle(q.get(off))
		delete(live, off)
	}
	require.Greater(t, len(q.order)-q.head, 4*recentRefs)
	for off := int64(-1); off <= 3001; off++ {
		e := q.get(off)
		if !live[off] {
			require.Nil(t, e, "offset %d", off)
			continue
		}
		require.NotNil(t, e, "offset %d", off)
		require.Equal(t, off, e.off)
	}
}

// popHandles pops batches from queue 0 of "T" until it holds at least n
// handles, and returns them in pop order.
func popHandles(t *testing.T, s *Service, n int) []string {
	t.Helper()
	var handles []string
	for len(handles) < n {
		r, err := s.Pop(bg, req0(MaxBatch, time.Hour))
		require.NoError(t, err)
		require.NotEmpty(t, r.Messages)
		for _, d := range r.Messages {
			handles = append(handles, d.Handle)
		}
	}
	return handles
}

// ackConcurrently acks handles from workers goroutines at once, worker w
// taking every workers-th handle from the w-th, and waits for them.
func ackConcurrently(t *testing.T, s *Service, handles []string, workers int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(handles); i += workers {
				if !assert.NoError(t, s.Ack(handles[i])) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// popAndAck pops batches from queue 0 of "T" and acks them until n
// messages were acked.
func popAndAck(t *testing.T, s *Service, n int) {
	t.Helper()
	for acked := 0; acked < n; {
		r, err := s.Pop(bg, req0(MaxBatch, time.Hour))
		require.NoError(t, err)
		require.NotEmpty(t, r.Messages)
		ackAll(t, s, r)
		acked += len(r.Messages)
	}
}
