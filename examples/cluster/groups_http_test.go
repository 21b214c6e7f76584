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
	"path/filepath"
	"slices"
	"strings"
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
			HeartbeatTimeout: 250 * time.Millisecond, ElectionTimeout: 250 * time.Millisecond, LeaderLeaseTimout: 125 * time.Millisecond,
			ApplyTimeout: 2 * time.Second, ScheduleTick: 10 * time.Millisecond, CommitEvery: 20 * time.Millisecond}, groups)
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
			HeartbeatTimeout: 250 * time.Millisecond, ElectionTimeout: 250 * time.Millisecond, LeaderLeaseTimout: 125 * time.Millisecond}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- runNode(ctx, 2, cfg(0), "") }()
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
	go func() { done <- runNode(ctx, 2, cfg(1), free[1]) }()
	require.Eventually(t, func() bool {
		return slices.Equal(voters(free[1]), []int{2, 2}) && slices.Equal(voters(free[3]), []int{2, 2})
	}, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, <-done)
}
