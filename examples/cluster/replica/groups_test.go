package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/brokertest"
	"github.com/brokercore/brokercore/examples/cluster/internal/testkit"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// gcluster is several raft groups over the same three members n1..n3, each
// group a tcluster on its own in-memory transports (as separate as the
// groups OpenGroups runs over one listener). member(id) is the Groups of one
// member: its node of every group, which is what OpenGroups builds.
type gcluster struct {
	t      testing.TB
	groups []*tcluster
}

func newGroupsCluster(t testing.TB, groups int, tweak func(g int, c *Config)) *gcluster {
	gc := &gcluster{t: t}
	for g := range groups {
		gc.groups = append(gc.groups, newCluster(t, 3, func(c *Config) {
			c.DeadLetterQueue = g
			if tweak != nil {
				tweak(g, c)
			}
		}))
	}
	return gc
}

// member is id's Groups (nil nodes for the groups where it is down).
func (gc *gcluster) member(id string) *Groups {
	gs := &Groups{}
	for _, c := range gc.groups {
		gs.nodes = append(gs.nodes, c.node(id))
	}
	return gs
}

func (gc *gcluster) kill(id string) {
	for _, c := range gc.groups {
		c.kill(id)
	}
}

func (gc *gcluster) restart(id string) {
	for _, c := range gc.groups {
		c.restart(id)
	}
}

// leader is the member leading group g.
func (gc *gcluster) leader(g int) *Groups { return gc.member(gc.groups[g].leader().ID()) }

// spread moves group g's leadership to member n<g%3+1>, so that the groups
// have different leaders.
func (gc *gcluster) spread() {
	gc.t.Helper()
	for g, c := range gc.groups {
		want := fmt.Sprintf("n%d", g%3+1)
		require.Eventually(gc.t, func() bool {
			l := c.leader()
			if l.ID() == want {
				return true
			}
			_ = l.Raft().LeadershipTransferToServer(raft.ServerID(want), raft.ServerAddress(want)).Error()
			return false
		}, 20*time.Second, 5*time.Millisecond, "group %d does not move to %s", g, want)
	}
}

// TestGroupOfRoutesEveryQueueToExactlyOneGroup: the routing rule is q mod N,
// the same from every member's Groups.
func TestGroupOfRoutesEveryQueueToExactlyOneGroup(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7, MaxGroups} {
		for _, q := range []int{0, 1, 2, 3, 5, 8, 255, 256, 1000, store.MaxQueueID} {
			g := GroupOf(q, n)
			require.Equal(t, q%n, g, "queue %d of %d groups", q, n)
			require.True(t, g >= 0 && g < n)
		}
		require.Zero(t, GroupOf(-1, n))
	}
	gc := newGroupsCluster(t, 3, nil)
	for q := range 12 {
		want := gc.member("n1").GroupOf(q)
		for _, id := range []string{"n2", "n3"} {
			require.Equal(t, want, gc.member(id).GroupOf(q))
		}
	}
}

// produceTo produces one message to queue q through whoever leads its
// group, retrying a produce refused before it was proposed (not leader) or
// not committed; it returns once one was acknowledged.
func produceTo(t testing.TB, gc *gcluster, topic string, q int, body string) {
	t.Helper()
	g := GroupOf(q, len(gc.groups))
	for i := 0; ; i++ {
		_, err := gc.leader(g).Produce(msg(topic, q, body))
		if err == nil {
			return
		}
		require.Less(t, i, 50, "produce %s to queue %d: %v", body, q, err)
	}
}

// acked is what was acknowledged, per queue.
type acked struct {
	mu sync.Mutex
	m  map[int]map[string]bool
}

func (a *acked) add(q int, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[int]map[string]bool{}
	}
	if a.m[q] == nil {
		a.m[q] = map[string]bool{}
	}
	a.m[q][body] = true
}

// requireRouted checks that the groups' replicas are identical and that on
// every live member each queue's messages are in its group's store only,
// every acknowledged one among them (a retried produce may be there twice).
func requireRouted(t testing.TB, gc *gcluster, topic string, queues int, want *acked) {
	t.Helper()
	for _, c := range gc.groups {
		c.requireIdentical()
	}
	for _, n := range gc.groups[0].live() {
		gs := gc.member(n.ID())
		for q := range queues {
			for g := range gs.N() {
				got := bodiesIn(t, gs.Group(g), topic, q)
				if g != gs.GroupOf(q) {
					require.Empty(t, got, "member %s queue %d in group %d", n.ID(), q, g)
					continue
				}
				for body := range want.m[q] {
					require.Positive(t, got[body], "member %s queue %d lost acknowledged %s", n.ID(), q, body)
				}
			}
		}
	}
}

// A follower of a group answers that group's *NotLeaderError, naming the
// group's leader, even when it leads another group.
func TestGroupsFollowerNamesItsGroupsLeader(t *testing.T) {
	gc := newGroupsCluster(t, 2, func(g int, c *Config) {
		c.Addr = "addr-" + c.ID
		c.BootstrapAddrs = map[string]string{"n1": "addr-n1", "n2": "addr-n2", "n3": "addr-n3"}
	})
	gc.spread() // group 0 on n1, group 1 on n2
	gs := gc.member("n1")
	_, err := gs.Produce(msg("t", 1, "x")) // queue 1: group 1, led by n2
	var nl *NotLeaderError
	require.ErrorAs(t, err, &nl)
	require.Equal(t, 1, nl.Group)
	require.Equal(t, "n2", nl.LeaderID)
	require.Equal(t, "addr-n2", nl.LeaderAddr)
	_, err = gs.Produce(msg("t", 0, "y")) // n1 leads group 0
	require.NoError(t, err)
	_, err = gs.Produce(msg("t", 0, "a"), msg("t", 1, "b"))
	require.ErrorIs(t, err, ErrInvalid, "one batch, two groups")
	_, err = gs.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", QueueID: pop.AllQueues})
	require.ErrorIs(t, err, ErrInvalid)
}

// tryProduce produces once through whoever leads q's group now (no
// assertion: producer goroutines use it).
func tryProduce(gc *gcluster, topic string, q int, body string) error {
	g := GroupOf(q, len(gc.groups))
	for _, n := range gc.groups[g].live() {
		if n.IsLeader() {
			_, err := gc.member(n.ID()).Produce(msg(topic, q, body))
			return err
		}
	}
	return ErrNotLeader
}

// A leader killed takes down its groups' leadership only: the groups led
// elsewhere keep their leader and term and go on acknowledging; the killed
// group's queues resume under a new leader; nothing acknowledged is lost.
//
// The test asserts no other election happens, so its leases are long: a
// leader stalled by a loaded machine under -race must not step down on its
// own (that would be the machine, not the kill).
func TestGroupsLeaderKillStopsOnlyItsGroup(t *testing.T) {
	gc := newGroupsCluster(t, 3, func(_ int, c *Config) {
		steadyConfig(c)
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimout = 2*time.Second, 2*time.Second, 1500*time.Millisecond
	})
	gc.spread() // group g led by n<g+1>
	const queues = 6
	var want acked
	produce := func(q int, body string) {
		t.Helper()
		produceTo(t, gc, "t", q, body)
		want.add(q, body)
	}
	for q := range queues {
		produce(q, fmt.Sprintf("before-%d", q))
	}
	terms := map[int]uint64{}
	for g := 1; g < 3; g++ {
		terms[g] = gc.groups[g].leader().Raft().CurrentTerm()
	}

	// Producers on every queue while n1 (group 0's leader) dies.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for q := range queues {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("during-%d-%d", q, i)
				if err := tryProduce(gc, "t", q, body); err == nil {
					want.add(q, body)
				} else {
					runtime.Gosched()
				}
			}
		})
	}
	gc.kill("n1")
	// Groups 1 and 2 serve at once, under the leader and term they had.
	for g := 1; g < 3; g++ {
		l := gc.groups[g].leader()
		require.Equal(t, fmt.Sprintf("n%d", g+1), l.ID())
		_, err := gc.member(l.ID()).Produce(msg("t", g, "right-after-kill"))
		require.NoError(t, err)
		want.add(g, "right-after-kill") // queue g is in group g
		require.Equal(t, terms[g], l.Raft().CurrentTerm(), "group %d had an election", g)
	}
	// Group 0's queues resume under n2 or n3.
	require.NotEqual(t, "n1", gc.groups[0].leader().ID())
	for _, q := range []int{0, 3} {
		produce(q, fmt.Sprintf("after-%d", q))
	}
	close(stop)
	wg.Wait()
	requireRouted(t, gc, "t", queues, &want)

	gc.restart("n1")
	for q := range queues {
		produce(q, fmt.Sprintf("back-%d", q))
	}
	requireRouted(t, gc, "t", queues, &want)
}

// Membership is per group: a fourth member joins group 1 only, and leaves
// it, while group 0 keeps its three voters.
func TestGroupsMembershipPerGroup(t *testing.T) {
	gc := newGroupsCluster(t, 2, nil)
	produceTo(t, gc, "t", 1, "before")
	c1 := gc.groups[1]
	c1.addID("n4")
	c1.start("n4", false)
	gs := gc.leader(1)
	require.ErrorIs(t, gs.AddMember(2, "n4", "n4", ""), ErrInvalid, "no group 2")
	require.NoError(t, gs.AddMember(1, "n4", "n4", ""))
	voters := func(g int) []string { return gc.groups[g].leader().Status().Voters }
	require.Len(t, voters(1), 4)
	require.Len(t, voters(0), 3)
	produceTo(t, gc, "t", 1, "after")
	c1.requireIdentical()
	require.Len(t, bodiesIn(t, c1.node("n4"), "t", 1), 2)

	// A member that is not group 1's leader is refused with group 1's leader.
	for _, id := range []string{"n1", "n2", "n3"} {
		if m := gc.member(id); !m.IsLeader(1) {
			var nl *NotLeaderError
			require.ErrorAs(t, m.RemoveMember(1, "n4"), &nl)
			require.Equal(t, 1, nl.Group)
			require.Equal(t, c1.leader().ID(), nl.LeaderID)
		}
	}
	require.NoError(t, gc.leader(1).RemoveMember(1, "n4"))
	require.Len(t, voters(1), 3)
	require.ErrorIs(t, gc.leader(0).RemoveMember(0, "n4"), ErrUnknownMember)
	require.Len(t, voters(0), 3)
}

// Each group's leader runs a scheduler over its group's store: delayed
// messages of a queue are delivered in that queue's group only, once each,
// also when a group's leader dies with messages due.
func TestGroupsSchedulerPerGroupDeliversItsQueuesOnce(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
	gc := newGroupsCluster(t, 2, func(_ int, c *Config) { c.Now = clock.Now; c.Levels = "1s 5s" })
	gc.spread()
	const queues = 4
	want := map[string]int{} // body -> queue
	for round := range 3 {
		for q := range queues {
			body := fmt.Sprintf("r%d-q%d", round, q)
			g := GroupOf(q, 2)
			for i := 0; ; i++ {
				_, err := gc.leader(g).ProduceDelayed(msg("real", q, body), 1+round%2)
				if err == nil {
					break
				}
				require.Less(t, i, 50, "delayed produce %s: %v", body, err)
			}
			want[body] = q
		}
		if round == 1 {
			gc.kill(gc.groups[0].leader().ID()) // group 0's leader dies; its messages are due soon
		}
		clock.Advance(3 * time.Second)
	}
	clock.Advance(10 * time.Second)
	delivered := func(n *Node, q int) map[string]int { return bodiesIn(t, n, "real", q) }
	for g, c := range gc.groups {
		require.Eventually(t, func() bool {
			l := c.leader()
			got := 0
			for q := range queues {
				got += len(delivered(l, q))
			}
			return got == queues/2*3
		}, 20*time.Second, 5*time.Millisecond, "group %d", g)
		c.requireIdentical()
	}
	for g, c := range gc.groups {
		for _, n := range c.live() {
			for q := range queues {
				got := delivered(n, q)
				if GroupOf(q, 2) != g {
					require.Empty(t, got, "group %d holds deliveries of queue %d", g, q)
					continue
				}
				require.Len(t, got, 3, "member %s queue %d", n.ID(), q)
				for body, k := range got {
					require.Equal(t, 1, k, "member %s delivered %s %d times", n.ID(), body, k)
					require.Equal(t, q, want[body])
				}
			}
		}
	}
}

// Snapshots are per group: one group compacts its raft log and a member
// that was down catches up in it from a snapshot, while the other group's
// log is untouched and the member catches up in it from the log.
func TestGroupsSnapshotPerGroup(t *testing.T) {
	gc := newGroupsCluster(t, 2, func(_ int, c *Config) { compactingConfig(c) })
	gc.kill("n3")
	var want acked
	for i := range 100 {
		q := 2*(i%2) + 1 // queues 1 and 3: group 1
		produceTo(t, gc, "t", q, fmt.Sprintf("m%d", i))
		want.add(q, fmt.Sprintf("m%d", i))
	}
	produceTo(t, gc, "t", 0, "g0")
	want.add(0, "g0")
	gc.groups[1].waitConverged()
	for _, n := range gc.groups[1].live() {
		require.NoError(t, n.Raft().Snapshot().Error())
		first, err := n.logs.FirstIndex()
		require.NoError(t, err)
		require.Greater(t, first, uint64(50), "group 1 on %s compacted", n.ID())
	}
	for _, n := range gc.groups[0].live() {
		first, err := n.logs.FirstIndex()
		require.NoError(t, err)
		require.Equal(t, uint64(1), first, "group 0 on %s kept its log", n.ID())
	}
	gc.restart("n3")
	require.Eventually(t, func() bool { return gc.groups[1].node("n3").fsm.restored() > 0 }, 10*time.Second, 5*time.Millisecond)
	for q := range 2 { // (a restored replica counts as converged from its next entry on)
		produceTo(t, gc, "t", q, "after")
		want.add(q, "after")
	}
	requireRouted(t, gc, "t", 4, &want)
	require.Zero(t, gc.groups[0].node("n3").fsm.restored(), "group 0 caught up from its log")
}

// freeAddrs picks n free 127.0.0.1 ports (brokertest.FreeAddr).
func freeAddrs(t testing.TB, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = brokertest.FreeAddr(t)
	}
	return out
}

// OpenGroups: three members of three groups over TCP, one listener each;
// every queue lands in its group's directory on every member, and after a
// restart of every member the same; a directory refuses another number of
// groups.
func TestOpenGroupsOverOneListenerKeepsRoutingAcrossRestart(t *testing.T) {
	const groups, queues = 3, 9
	addrs := freeAddrs(t, 3)
	root := t.TempDir()
	var servers []raft.Server
	cfgs := make([]Config, 3)
	for i := range cfgs {
		id := fmt.Sprintf("n%d", i+1)
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addrs[i])})
		cfgs[i] = Config{ID: id, Dir: filepath.Join(root, id), RaftAddr: addrs[i], Addr: "addr-" + id}
		fastConfig(&cfgs[i])
	}
	members := make([]*Groups, 3)
	open := func() {
		for i := range cfgs {
			cfg := cfgs[i]
			cfg.Bootstrap = servers
			gs, err := OpenGroups(cfg, groups)
			require.NoError(t, err)
			members[i] = gs
		}
	}
	closeAll := func() {
		for _, gs := range members {
			if gs != nil {
				require.NoError(t, gs.Close())
			}
		}
	}
	t.Cleanup(closeAll)
	open()
	leaderOf := func(g int) *Groups {
		var l *Groups
		require.Eventually(t, func() bool {
			for _, gs := range members {
				if gs.IsLeader(g) {
					l = gs
					return true
				}
			}
			return false
		}, 15*time.Second, 5*time.Millisecond, "group %d has no leader", g)
		return l
	}
	produceAll := func(tag string) {
		for q := range queues {
			for i := 0; ; i++ {
				_, err := leaderOf(GroupOf(q, groups)).Produce(msg("t", q, tag))
				if err == nil {
					break
				}
				require.Less(t, i, 50, "%v", err)
			}
		}
	}
	check := func(per int) {
		for _, gs := range members {
			for q := range queues {
				for g := range groups {
					require.Eventually(t, func() bool {
						msgs, err := gs.Group(g).Read("t", q, 0, 100)
						require.NoError(t, err)
						if g == GroupOf(q, groups) {
							return len(msgs) == per
						}
						return len(msgs) == 0
					}, 10*time.Second, 5*time.Millisecond, "member %s queue %d group %d", gs.Group(0).ID(), q, g)
				}
			}
		}
	}
	produceAll("first")
	check(1)
	for g := range groups {
		_, err := os.Stat(filepath.Join(cfgs[0].Dir, fmt.Sprintf("group-%d", g), "node.json"))
		require.NoError(t, err)
	}
	// A member not leading a group names its leader's client address.
	l0 := leaderOf(0)
	for _, gs := range members {
		if gs != l0 {
			_, err := gs.Produce(msg("t", 0, "x"))
			var nl *NotLeaderError
			require.ErrorAs(t, err, &nl)
			require.Equal(t, 0, nl.Group)
			require.Equal(t, "addr-"+l0.Group(0).ID(), nl.LeaderAddr)
		}
	}

	closeAll()
	members = make([]*Groups, 3)
	_, err := OpenGroups(cfgs[0], 2)
	require.ErrorIs(t, err, ErrForeignDataDir, "3 groups' directory opened with 2")
	_, err = OpenGroups(cfgs[0], 1)
	require.ErrorIs(t, err, ErrForeignDataDir, "3 groups' directory opened with 1")
	open()
	produceAll("second")
	check(2)
}

// One group is a Node's directory: OpenGroups(cfg, 1) opens what Open made,
// and a Node's directory refuses several groups.
func TestOpenGroupsOfOneIsANode(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{ID: "n1", Dir: dir, RaftAddr: freeAddrs(t, 1)[0]}
	fastConfig(&cfg)
	cfg.Bootstrap = []raft.Server{{ID: "n1", Address: raft.ServerAddress(cfg.RaftAddr)}}
	n, err := Open(cfg)
	require.NoError(t, err)
	require.Eventually(t, n.IsLeader, 10*time.Second, 5*time.Millisecond)
	_, err = n.Produce(msg("t", 3, "x"))
	require.NoError(t, err)
	require.NoError(t, n.Close())

	_, err = OpenGroups(cfg, 2)
	require.ErrorIs(t, err, ErrForeignDataDir)
	gs, err := OpenGroups(cfg, 1)
	require.NoError(t, err)
	defer gs.Close()
	require.Eventually(t, func() bool { return gs.IsLeader(0) }, 10*time.Second, 5*time.Millisecond)
	msgs, err := gs.Read("t", 3, 0, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	_, err = os.Stat(groupsPath(dir))
	require.True(t, errors.Is(err, os.ErrNotExist), "one group writes no groups.json")
	_, err = OpenGroups(cfg, 0)
	require.ErrorIs(t, err, ErrInvalid)
}

// Pop handles name their group: Ack and ChangeInvisible go to it, and a
// handle naming no group is refused.
func TestGroupsPopHandlesNameTheirGroup(t *testing.T) {
	gc := newGroupsCluster(t, 2, nil)
	produceTo(t, gc, "t", 1, "x")
	gs := gc.leader(1)
	res, err := gs.Pop(context.Background(), pop.Request{Group: "g", Topic: "t", QueueID: 1, Max: 1, ClientID: "c"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	h := res.Messages[0].Handle
	g, _, err := gs.HandleGroup(h)
	require.NoError(t, err)
	require.Equal(t, 1, g)
	h, err = gs.ChangeInvisible(h, time.Minute)
	require.NoError(t, err)
	require.NoError(t, gs.Ack(h))
	for _, bad := range []string{"x", "g2.abc", "g-1.abc", "g01.abc", ".abc"} {
		require.ErrorIs(t, gs.Ack(bad), pop.ErrBadHandle, bad)
	}
	// A dead letter of group 1 goes to queue 1 of the dead-letter topic:
	// its queue routes to its group.
	l := gc.groups[1].leader()
	require.NoError(t, l.deadLetter("g", msg("t", 1, "dead")))
	require.Equal(t, map[string]int{"dead": 1}, bodiesIn(t, l, DeadLetterPrefix+"g", 1))
	require.Equal(t, 1, gs.GroupOf(1))
}
