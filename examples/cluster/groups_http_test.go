package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// groupsCluster is three nodes of the HTTP program (serve) with the queues
// sharded over groups raft groups, on 127.0.0.1, raft over one TCP
// listener per node.
func groupsCluster(t *testing.T, groups int) (nodes map[string]*server, addrs, raftAddrs map[string]string) {
	var lns []net.Listener
	var free []string
	for range 6 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		free = append(free, ln.Addr().String())
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	root := t.TempDir()
	addrs, raftAddrs = map[string]string{}, map[string]string{}
	var servers []raft.Server
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		addrs[id], raftAddrs[id] = free[i+2], free[i-1]
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(free[i-1])})
	}
	nodes = map[string]*server{}
	for i, srv := range servers {
		id := string(srv.ID)
		s, err := serve(replica.Config{ID: id, Dir: filepath.Join(root, id), RaftAddr: free[i], Addr: addrs[id],
			Bootstrap: servers, BootstrapAddrs: addrs,
			HeartbeatTimeout: 250 * time.Millisecond, ElectionTimeout: 250 * time.Millisecond, LeaderLeaseTimout: 250 * time.Millisecond,
			ApplyTimeout: 2 * time.Second, ScheduleTick: 10 * time.Millisecond, CommitEvery: 20 * time.Millisecond}, groups, false)
		require.NoError(t, err)
		nodes[id] = s
		t.Cleanup(func() { require.NoError(t, s.close()) })
	}
	return nodes, addrs, raftAddrs
}

// groupLeader waits until every node names the same leader of group g and
// it runs its services; it returns that leader's id.
func groupLeader(t *testing.T, nodes map[string]*server, g int) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		id = ""
		for nid, s := range nodes {
			if s.gs.IsLeader(g) {
				id = nid
			}
		}
		if id == "" {
			return false
		}
		for _, s := range nodes {
			if lid, _ := s.gs.Leader(g); lid != id {
				return false
			}
		}
		return true
	}, 15*time.Second, 5*time.Millisecond, "group %d has no leader all know", g)
	return id
}

// With -groups 2 a request is served by the leader of its queue's group: a
// node leading group 0 but not group 1 serves queue 0 and redirects queue 1
// to group 1's leader; pop handles, acks and offsets follow their queue.
func TestHTTPGroupsRouteByQueueAndRedirectToTheGroupsLeader(t *testing.T) {
	nodes, addrs, raftAddrs := groupsCluster(t, 2)
	l0 := groupLeader(t, nodes, 0)
	other := "n1"
	if l0 == other {
		other = "n2"
	}
	require.Eventually(t, func() bool {
		l1 := groupLeader(t, nodes, 1)
		if l1 != l0 {
			return true
		}
		_ = nodes[l1].gs.Group(1).Raft().LeadershipTransferToServer(raft.ServerID(other), raft.ServerAddress(raftAddrs[other])).Error()
		return false
	}, 20*time.Second, 10*time.Millisecond)
	l1 := groupLeader(t, nodes, 1)

	noFollow := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	produce := func(q int) *http.Response {
		resp, err := noFollow.Post("http://"+addrs[l0]+"/produce", "application/json",
			bytes.NewReader(fmt.Appendf(nil, `{"topic":"t","queue":%d,"messages":[{"body":"q%d"}]}`, q, q)))
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	require.Equal(t, http.StatusOK, produce(0).StatusCode, "l0 leads queue 0's group")
	resp := produce(1)
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
	require.Equal(t, "http://"+addrs[l1]+"/produce", resp.Header.Get("Location"), "queue 1 is group 1's, led by %s", l1)

	// Following redirects, everything works from any node.
	var out msgsResp
	for _, q := range []int{1, 3} {
		require.Equal(t, 200, post(t, addrs[l0], "/produce", produceReq{Topic: "t", Queue: q, Messages: []msgJSON{{Body: "x"}}}, &out), out.Error)
	}
	q := 3
	require.Equal(t, 200, post(t, addrs[l0], "/pop", popReq{Group: "g", Topic: "t", Queue: &q, Max: 8}, &out), out.Error)
	require.Len(t, out.Messages, 1)
	require.True(t, strings.HasPrefix(out.Messages[0].Handle, "g1."), out.Messages[0].Handle)
	var ok map[string]any
	require.Equal(t, 200, post(t, addrs[l0], "/ack", handleReq{Handle: out.Messages[0].Handle}, &ok), "%v", ok)
	require.Equal(t, 400, post(t, addrs[l1], "/pop", popReq{Group: "g", Topic: "t", Max: 8}, &ok), "a pop over all queues of two groups")
	require.Equal(t, 200, post(t, addrs[l0], "/offsets/reset", offsetReq{Group: "g", Topic: "t", Queue: 1, Offset: 1}, &ok), "%v", ok)
	require.Eventually(t, func() bool {
		var got struct {
			Offset    int64 `json:"offset"`
			Committed bool  `json:"committed"`
			RaftGroup int   `json:"raft_group"`
		}
		r, err := http.Get("http://" + addrs[l0] + "/offsets?group=g&topic=t&queue=1")
		require.NoError(t, err)
		defer r.Body.Close()
		require.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		return got.Committed && got.Offset == 1 && got.RaftGroup == 1
	}, 5*time.Second, 5*time.Millisecond)

	// /status names every group and its leader.
	r, err := http.Get("http://" + addrs[other] + "/status")
	require.NoError(t, err)
	var st statusJSON
	require.NoError(t, json.NewDecoder(r.Body).Decode(&st))
	r.Body.Close()
	require.Len(t, st.Groups, 2)
	require.Equal(t, l0, st.Groups[0].Leader)
	require.Equal(t, l1, st.Groups[1].Leader)
	require.Equal(t, 1, st.Groups[1].Group)
}

// -join with -groups 2 makes the new node a voter of both groups, through
// whichever node leads each.
func TestHTTPGroupsJoinAddsTheNodeToEveryGroup(t *testing.T) {
	var free []string
	var lns []net.Listener
	for range 4 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		free = append(free, ln.Addr().String())
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	root := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := func(i int) replica.Config {
		id := fmt.Sprintf("n%d", i+1)
		return replica.Config{ID: id, Dir: filepath.Join(root, id), RaftAddr: free[2*i], Addr: free[2*i+1], Logger: log,
			HeartbeatTimeout: 250 * time.Millisecond, ElectionTimeout: 250 * time.Millisecond, LeaderLeaseTimout: 250 * time.Millisecond}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- runNode(ctx, 2, cfg(0), "", false) }()
	voters := func(addr string) []int {
		r, err := http.Get("http://" + addr + "/status")
		if err != nil {
			return nil
		}
		defer r.Body.Close()
		var st statusJSON
		if json.NewDecoder(r.Body).Decode(&st) != nil {
			return nil
		}
		var out []int
		for _, g := range st.Groups {
			out = append(out, len(g.Voters))
		}
		return out
	}
	require.Eventually(t, func() bool { return slices.Equal(voters(free[1]), []int{1, 1}) }, 15*time.Second, 10*time.Millisecond)
	go func() { done <- runNode(ctx, 2, cfg(1), free[1], false) }()
	require.Eventually(t, func() bool {
		return slices.Equal(voters(free[1]), []int{2, 2}) && slices.Equal(voters(free[3]), []int{2, 2})
	}, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, <-done)
}

func groupsStatusOf(addr string) (statusJSON, error) {
	var s statusJSON
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/status")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

func httpProduceTo(addr string, q int, body string) error {
	b, _ := json.Marshal(produceReq{Topic: "t", Queue: q, Messages: []msgJSON{{Body: body}}})
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Post("http://"+addr+"/produce", "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("produce: %s", resp.Status)
	}
	return nil
}

func httpSeqsOf(addr string, q int) ([]int64, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s/read?topic=t&queue=%d&offset=0&max=1024", addr, q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r msgsResp
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	var out []int64
	for _, m := range r.Messages {
		s, err := strconv.ParseInt(m.Body, 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Three processes with -groups 2 over TCP: the process leading group 1 is
// killed with SIGKILL while both queues' groups take produces; queue 0's
// group (led elsewhere, or re-elected) and queue 1's resume, nothing
// acknowledged is lost or stored twice, and after a restart the three
// processes hold the same queues.
func TestThreeProcessesWithTwoGroupsSurviveAGroupLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	root := t.TempDir()
	var ps []*proc
	for i := 1; i <= 3; i++ {
		p := &proc{id: fmt.Sprintf("n%d", i), raft: freeAddr(t), http: freeAddr(t), dir: filepath.Join(root, fmt.Sprintf("n%d", i)), groups: 2}
		if i > 1 {
			p.join = ps[0].http
		}
		ps = append(ps, p)
	}
	defer func() {
		for _, p := range ps {
			_ = p.stop(syscall.SIGKILL)
			if p.log != nil {
				p.log.Close()
			}
		}
		if t.Failed() {
			for _, p := range ps {
				b, _ := os.ReadFile(filepath.Join(root, p.id+".log"))
				t.Logf("--- %s log:\n%s", p.id, tail(string(b), 40))
			}
		}
	}()
	voters := func(addr string) []int {
		s, err := groupsStatusOf(addr)
		if err != nil {
			return nil
		}
		var out []int
		for _, g := range s.Groups {
			out = append(out, len(g.Voters))
		}
		return out
	}
	ps[0].start(t)
	require.Eventually(t, func() bool { return slices.Equal(voters(ps[0].http), []int{1, 1}) }, 20*time.Second, 20*time.Millisecond)
	ps[1].start(t)
	ps[2].start(t)
	require.Eventually(t, func() bool { return slices.Equal(voters(ps[0].http), []int{3, 3}) }, 30*time.Second, 20*time.Millisecond)

	acked := map[int][]int64{}
	seq := int64(0)
	produce := func(n int) {
		for len(acked[0])+len(acked[1]) < n {
			seq++
			p := ps[int(seq)%3]
			if p.cmd == nil {
				continue
			}
			q := int(seq % 2)
			if err := httpProduceTo(p.http, q, strconv.FormatInt(seq, 10)); err == nil {
				acked[q] = append(acked[q], seq)
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	produce(60)
	s, err := groupsStatusOf(ps[1].http)
	require.NoError(t, err)
	var leader *proc
	for _, p := range ps {
		if p.id == s.Groups[1].Leader {
			leader = p
		}
	}
	require.NotNil(t, leader)
	_ = leader.stop(syscall.SIGKILL)
	killed := time.Now()
	produce(120)
	t.Logf("120 acknowledged, %v after the kill", time.Since(killed))

	leader.join = ""
	leader.start(t)
	for q := range 2 {
		var want []int64
		require.Eventually(t, func() bool {
			var err error
			if want, err = httpSeqsOf(ps[0].http, q); err != nil || len(want) < len(acked[q]) {
				return false
			}
			for _, p := range ps[1:] {
				got, err := httpSeqsOf(p.http, q)
				if err != nil || len(got) != len(want) {
					return false
				}
			}
			return true
		}, 30*time.Second, 50*time.Millisecond, "queue %d: the three processes did not converge", q)
		for _, p := range ps {
			got, err := httpSeqsOf(p.http, q)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s queue %d", p.id, q)
			requireAckedOnceInOrder(t, acked[q], got)
		}
	}
	for _, p := range ps {
		require.NoError(t, p.stop(syscall.SIGTERM), "%s exits cleanly on SIGTERM", p.id)
	}
}
