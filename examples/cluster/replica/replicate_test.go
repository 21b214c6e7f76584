package replica

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// produceLoop produces single messages with fresh sequence numbers to
// whoever leads, never retrying a number, and records the acknowledged
// ones in acknowledgement order.
type produceLoop struct {
	c       *tcluster
	topic   string
	seq     atomic.Int64
	mu      sync.Mutex
	acked   []int64
	ackedAt []time.Time
	ackedBy []string
	stop    chan struct{}
	done    chan struct{}
}

func startProducing(c *tcluster, topic string) *produceLoop {
	p := &produceLoop{c: c, topic: topic, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			var l *Node
			for _, n := range c.live() {
				if n.IsLeader() {
					l = n
					break
				}
			}
			if l == nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			s := p.seq.Add(1)
			if _, err := l.Produce(msg(topic, 0, strconv.FormatInt(s, 10))); err == nil {
				p.mu.Lock()
				p.acked = append(p.acked, s)
				p.ackedAt = append(p.ackedAt, time.Now())
				p.ackedBy = append(p.ackedBy, l.ID())
				p.mu.Unlock()
			}
		}
	}()
	return p
}

func (p *produceLoop) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// firstAckAfter is the first acknowledgement after t by a node other than
// not.
func (p *produceLoop) firstAckAfter(t time.Time, not string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, at := range p.ackedAt {
		if at.After(t) && p.ackedBy[i] != not {
			return at, true
		}
	}
	return time.Time{}, false
}

func (p *produceLoop) halt() []int64 {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.acked...)
}

// seqs reads every message of topic/0 from a node.
func seqs(t testing.TB, n *Node, topic string) []int64 {
	t.Helper()
	var out []int64
	for off := int64(0); ; {
		msgs, err := n.Read(topic, 0, off, 1024)
		require.NoError(t, err)
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			s, err := strconv.ParseInt(string(m.Body), 10, 64)
			require.NoError(t, err)
			out = append(out, s)
			off = m.QueueOffset + 1
		}
	}
}

// requireAckedOnceInOrder: every acknowledged sequence number is in got
// exactly once, and they appear in acknowledgement order.
func requireAckedOnceInOrder(t testing.TB, acked, got []int64) {
	t.Helper()
	pos := map[int64]int{}
	for i, s := range got {
		_, dup := pos[s]
		require.False(t, dup, "sequence %d stored twice", s)
		pos[s] = i
	}
	last := -1
	for _, s := range acked {
		i, ok := pos[s]
		require.True(t, ok, "acknowledged sequence %d lost", s)
		require.Greater(t, i, last, "acknowledged sequence %d out of order", s)
		last = i
	}
}

func TestLeaderKilledMidProduceKeepsEveryAcknowledgedMessageInOrderOnce(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := c.leader()
	p := startProducing(c, "orders")
	require.Eventually(t, func() bool { return p.count() >= 200 }, 10*time.Second, time.Millisecond)
	killedAt := time.Now()
	c.kill(old.ID())
	var resumed time.Time
	require.Eventually(t, func() bool {
		var ok bool
		resumed, ok = p.firstAckAfter(killedAt, old.ID())
		return ok
	}, 10*time.Second, time.Millisecond, "produce did not resume on a new leader")
	t.Logf("failover: first acknowledged produce %v after the kill", resumed.Sub(killedAt))
	n := p.count()
	require.Eventually(t, func() bool { return p.count() >= n+200 }, 10*time.Second, time.Millisecond)
	acked := p.halt()

	l := c.leader()
	require.NotEqual(t, old.ID(), l.ID())
	requireAckedOnceInOrder(t, acked, seqs(t, l, "orders"))

	// The killed node comes back, catches up and holds the same log.
	c.restart(old.ID())
	c.requireIdentical()
	requireAckedOnceInOrder(t, acked, seqs(t, c.node(old.ID()), "orders"))
}

func TestIsolatedLeaderAcknowledgesNothingAndRejoins(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.ApplyTimeout = 500 * time.Millisecond })
	old := c.leader()
	_, err := old.Produce(msg("t", 0, "before"))
	require.NoError(t, err)

	c.isolate(old.ID())
	// From the moment it is cut off, nothing it is asked to write is
	// acknowledged — neither while it still believes it leads nor after.
	var refused atomic.Int64
	stopOld := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stopOld:
				return
			default:
			}
			_, err := old.Produce(msg("t", 0, fmt.Sprintf("isolated-%d", i)))
			if err == nil {
				t.Errorf("isolated leader acknowledged isolated-%d", i)
				return
			}
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNotCommitted) {
				t.Errorf("unexpected error: %v", err)
			}
			refused.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// The majority elects a leader of its own and goes on.
	var l *Node
	require.Eventually(t, func() bool {
		for _, n := range c.live() {
			if n != old && n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)
	for i := 0; i < 50; i++ {
		_, err := l.Produce(msg("t", 0, fmt.Sprintf("majority-%d", i)))
		require.NoError(t, err)
	}
	// No split brain: the cut-off node stepped down by itself.
	require.Eventually(t, func() bool { return !old.IsLeader() }, 5*time.Second, 5*time.Millisecond)
	close(stopOld)
	wg.Wait()
	require.Positive(t, refused.Load())

	c.heal(old.ID())
	c.requireIdentical()
	for _, n := range c.live() {
		msgs, err := n.Read("t", 0, 0, 1024)
		require.NoError(t, err)
		require.Len(t, msgs, 51, "node %s", n.ID())
		for _, m := range msgs {
			require.False(t, strings.HasPrefix(string(m.Body), "isolated-"), "node %s holds %q", n.ID(), m.Body)
		}
	}
}

func TestBatchIsOneEntryWithLeaderTimestamps(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	batch := []*store.Message{msg("a", 0, "1"), msg("b", 3, "2"), msg("a", 0, "3")}
	out, err := l.Produce(batch...)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 0, 1}, []int64{out[0].QueueOffset, out[1].QueueOffset, out[2].QueueOffset})
	require.Equal(t, out[0].StoredAt, out[2].StoredAt, "one batch, one timestamp")
	c.requireIdentical()
}

func TestFollowerRefusesWritesAndAppliesNothingLocally(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	for _, n := range c.live() {
		if n == l {
			continue
		}
		before := n.Store().Stats().LogNext
		_, err := n.Produce(msg("t", 0, "x"))
		require.ErrorIs(t, err, ErrNotLeader)
		// A follower names the leader once it heard from it: the leader
		// commits with one follower's answer, the other may be a beat late.
		require.Eventually(t, func() bool { _, id := n.Raft().LeaderWithID(); return id != "" }, 5*time.Second, time.Millisecond)
		_, err = n.Produce(msg("t", 0, "x"))
		require.ErrorIs(t, err, ErrNotLeader)
		require.Contains(t, err.Error(), l.ID(), "the error names the leader")
		require.Equal(t, before, n.Store().Stats().LogNext)
	}
	c.requireIdentical()
	msgs, err := l.Read("t", 0, 0, 10)
	require.NoError(t, err)
	require.Empty(t, msgs)
}

func TestProduceRejectsBadInputWithoutProposing(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	idx := l.Raft().LastIndex()
	for _, bad := range [][]*store.Message{nil, {msg("", 0, "x")}, {msg("t", -1, "x")}, {nil}} {
		_, err := l.Produce(bad...)
		require.ErrorIs(t, err, ErrInvalid)
	}
	require.Equal(t, idx, l.Raft().LastIndex(), "nothing was proposed")
}
