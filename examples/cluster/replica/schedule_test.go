package replica

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/testkit"
	"github.com/brokercore/brokercore/schedule"
	"github.com/stretchr/testify/require"
)

// bodies counts the bodies of topic/0 on a node.
func bodies(t testing.TB, n *Node, topic string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for off := int64(0); ; {
		msgs, err := n.Read(topic, 0, off, 1024)
		require.NoError(t, err)
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			out[string(m.Body)]++
			off = m.QueueOffset + 1
		}
	}
}

// produceDelayed produces to whoever leads, retrying on a leadership change
// (a delayed produce that failed was not acknowledged; the retry uses the
// same body, so a produce that did commit shows as a duplicate of the
// source, which the check below would catch as a double delivery —
// therefore the retry only happens when the source is not in the log).
func produceDelayed(t testing.TB, c *tcluster, body string, level int) {
	t.Helper()
	for i := 0; ; i++ {
		l := c.leader()
		_, err := l.ProduceDelayed(msg("real", 0, body), level)
		if err == nil {
			return
		}
		require.Less(t, i, 20, "delayed produce of %s keeps failing: %v", body, err)
		c.waitConverged()
		if bodiesIn(t, c.leader(), schedule.Topic, level-1)[body] > 0 {
			return // it committed after all
		}
	}
}

// produceTimer is produceDelayed for a timer (At).
func produceTimer(t testing.TB, c *tcluster, body string, at time.Time) {
	t.Helper()
	for i := 0; ; i++ {
		l := c.leader()
		_, err := l.ProduceAt(msg("real", 0, body), at)
		if err == nil {
			return
		}
		require.Less(t, i, 20, "timer produce of %s keeps failing: %v", body, err)
		c.waitConverged()
		if bodiesIn(t, c.leader(), schedule.TimerTopic, 0)[body] > 0 {
			return
		}
	}
}

func bodiesIn(t testing.TB, n *Node, topic string, queue int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for off := int64(0); ; {
		msgs, err := n.Read(topic, queue, off, 1024)
		require.NoError(t, err)
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			out[string(m.Body)]++
			off = m.QueueOffset + 1
		}
	}
}

// flap moves leadership: by transfer, or by cutting the leader off until
// the others elected one and healing it.
func flap(t testing.TB, c *tcluster, i int) {
	t.Helper()
	l := c.leader()
	if i%2 == 0 {
		if err := l.Raft().LeadershipTransfer().Error(); err != nil {
			t.Logf("flap %d: transfer: %v", i, err)
		}
	} else {
		c.isolate(l.ID())
		require.Eventually(t, func() bool {
			for _, n := range c.live() {
				if n != l && n.IsLeader() {
					return true
				}
			}
			return false
		}, 10*time.Second, 2*time.Millisecond)
		c.heal(l.ID())
	}
	c.leader()
}

// The field report's setup across real raft nodes: delayed messages come
// due while appends are slow and leadership flaps; each is delivered once
// cluster-wide, and a full restart of every node delivers none again.
func TestDelayedMessagesDeliveredOnceAcrossLeaderFlapsAndFullRestart(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
	var slow sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.Now = clock.Now
		cfg.Levels = "1s 2s 5s"
		cfg.beforePropose = func() { // the field report's slow append
			slow.Lock()
			d := time.Duration(rng.IntN(15)) * time.Millisecond
			slow.Unlock()
			time.Sleep(d)
		}
	})
	flaps, perRound := 30, 6
	if long() {
		flaps, perRound = 100, 20
	}
	want := 0
	for i := 0; i < flaps; i++ {
		for j := 0; j < perRound; j++ {
			produceDelayed(t, c, fmt.Sprintf("r%d-m%d", i, j), 1+j%3)
			want++
		}
		// and timers, due a little later than now
		produceTimer(t, c, fmt.Sprintf("r%d-timer", i), clock.Now().Add(time.Duration(300+i*37%900)*time.Millisecond))
		want++
		clock.Advance(700 * time.Millisecond) // earlier rounds come due meanwhile
		time.Sleep(5 * time.Millisecond)      // let a delivery be in flight
		flap(t, c, i)
	}
	clock.Advance(10 * time.Second)
	require.Eventually(t, func() bool { return len(bodies(t, c.leader(), "real")) == want }, 20*time.Second, 10*time.Millisecond)
	c.requireIdentical()
	requireOnce(t, c, want)

	// Full restart: every node down, every node up on its directory.
	for _, n := range c.live() {
		c.kill(n.ID())
	}
	for _, id := range c.ids {
		c.restart(id)
	}
	l := c.leader()
	clock.Advance(time.Minute)
	// The new leader's scheduler starts from the replicated progress: it
	// considers every level delivered up to the end of its queue.
	tm, err := l.services()
	require.NoError(t, err)
	for lvl, next := range tm.sched.Progress() {
		require.Equal(t, l.Store().MaxOffset(schedule.Topic, lvl-1), next, "level %d", lvl)
	}
	time.Sleep(20 * l.cfg.ScheduleTick) // give a wrong scheduler the chance to deliver again
	c.requireIdentical()
	requireOnce(t, c, want)
}

func requireOnce(t testing.TB, c *tcluster, want int) {
	t.Helper()
	for _, n := range c.live() {
		src := 0
		sources := []map[string]int{bodiesIn(t, n, schedule.TimerTopic, 0)}
		for q := 0; q < 3; q++ {
			sources = append(sources, bodiesIn(t, n, schedule.Topic, q))
		}
		for _, m := range sources {
			for b, k := range m {
				require.Equal(t, 1, k, "node %s: source %s produced %d times", n.ID(), b, k)
				src++
			}
		}
		require.Equal(t, want, src, "node %s: sources", n.ID())
		got := bodies(t, n, "real")
		require.Len(t, got, want, "node %s", n.ID())
		for b, k := range got {
			require.Equal(t, 1, k, "node %s delivered %s %d times", n.ID(), b, k)
		}
	}
}

// A delayed message is not delivered before its time, whoever leads.
func TestDelayedMessageNotDeliveredEarlyAfterFailover(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
	c := newCluster(t, 3, func(cfg *Config) { cfg.Now = clock.Now; cfg.Levels = "10s" })
	produceDelayed(t, c, "x", 1)
	clock.Advance(9 * time.Second)
	old := c.leader()
	c.kill(old.ID())
	l := c.leader()
	time.Sleep(20 * l.cfg.ScheduleTick)
	require.Empty(t, bodies(t, l, "real"))
	clock.Advance(time.Second)
	require.Eventually(t, func() bool { return bodies(t, l, "real")["x"] == 1 }, 5*time.Second, 5*time.Millisecond)
}

// A cancel is part of the replicated progress: a new leader does not
// deliver a timer cancelled under the old one, and delivers the others.
func TestTimerCancelledOnOneLeaderStaysCancelledOnTheNext(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
	c := newCluster(t, 3, func(cfg *Config) { cfg.Now = clock.Now })
	l := c.leader()
	keep, err := l.ProduceAt(msg("real", 0, "keep"), clock.Now().Add(time.Minute))
	require.NoError(t, err)
	drop, err := l.ProduceAt(msg("real", 0, "drop"), clock.Now().Add(time.Minute))
	require.NoError(t, err)
	require.NotEqual(t, keep.Properties[schedule.PropUniqKey], drop.Properties[schedule.PropUniqKey])
	require.NoError(t, l.CancelTimer(drop.Properties[schedule.PropUniqKey]))
	c.kill(l.ID())
	nl := c.leader()
	clock.Advance(2 * time.Minute)
	require.Eventually(t, func() bool { return bodies(t, nl, "real")["keep"] == 1 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(20 * nl.cfg.ScheduleTick)
	require.Equal(t, map[string]int{"keep": 1}, bodies(t, nl, "real"))
	require.ErrorIs(t, nl.CancelTimer(drop.Properties[schedule.PropUniqKey]), schedule.ErrCancelled)
}
