package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/stretchr/testify/require"
)

func post(t *testing.T, addr, path string, body any, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post("http://"+addr+path, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	return resp.StatusCode
}

type msgsResp struct {
	Messages []msgJSON `json:"messages"`
	Error    string    `json:"error"`
}

func TestHTTPFollowerRedirectsToLeaderAndTheAPIWorksEndToEnd(t *testing.T) {
	c, addrs := httpCluster(t)
	l := c.leader()
	require.Eventually(t, func() bool {
		for _, n := range c.live() {
			if n.LeaderAddr() != addrs[l.ID()] {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "every node knows the leader's HTTP address")
	var follower string
	for id := range addrs {
		if id != l.ID() {
			follower = id
		}
	}

	// Without following redirects a follower answers 307 to the leader.
	noFollow := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Post("http://"+addrs[follower]+"/produce", "application/json",
		bytes.NewReader([]byte(`{"topic":"t","queue":0,"messages":[{"body":"x"}]}`)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
	require.Equal(t, "http://"+addrs[l.ID()]+"/produce", resp.Header.Get("Location"))
	require.Equal(t, int64(0), c.node(follower).Store().Stats().LogNext, "nothing applied by the redirect")

	// The default client follows the redirect and re-sends the body.
	var pr msgsResp
	require.Equal(t, 200, post(t, addrs[follower], "/produce", produceReq{Topic: "t", Queue: 0,
		Messages: []msgJSON{{Body: "a"}, {Body: "b"}}}, &pr))
	require.Len(t, pr.Messages, 2)
	require.Equal(t, int64(1), pr.Messages[1].QueueOffset)

	var popped msgsResp
	q := 0
	require.Equal(t, 200, post(t, addrs[follower], "/pop", popReq{Group: "g", Topic: "t", Queue: &q, Max: 8}, &popped))
	require.Len(t, popped.Messages, 2)
	require.Equal(t, "a", popped.Messages[0].Body)
	var ch map[string]string
	require.Equal(t, 200, post(t, addrs[follower], "/change-invisible", handleReq{Handle: popped.Messages[1].Handle, InvisibleMS: 5000}, &ch))
	require.NotEmpty(t, ch["handle"])
	require.Equal(t, 200, post(t, addrs[follower], "/ack", handleReq{Handle: popped.Messages[0].Handle}, nil))
	require.Equal(t, 200, post(t, addrs[follower], "/ack", handleReq{Handle: ch["handle"]}, nil))
	var bad msgsResp
	require.Equal(t, 400, post(t, addrs[l.ID()], "/ack", handleReq{Handle: "forged"}, &bad))
	require.NotEmpty(t, bad.Error)

	// Delayed produce goes through the scheduler's topic.
	var dr msgsResp
	require.Equal(t, 200, post(t, addrs[follower], "/produce", produceReq{Topic: "t", Queue: 0, DelayLevel: 1,
		Messages: []msgJSON{{Body: "later"}}}, &dr))
	require.Equal(t, "SCHEDULE_TOPIC_XXXX", dr.Messages[0].Topic)

	// Bad input: clear errors, nothing changes.
	require.Equal(t, 400, post(t, addrs[l.ID()], "/produce", produceReq{Topic: "", Messages: []msgJSON{{Body: "x"}}}, &bad))
	require.Equal(t, 400, post(t, addrs[l.ID()], "/produce", map[string]any{"topic": "t", "bogus": 1}, &bad))
	require.Equal(t, 409, post(t, addrs[follower], "/members", memberReq{ID: follower, RaftAddr: follower}, &bad))
	require.Equal(t, 404, post(t, addrs[follower], "/members/remove", memberReq{ID: "n9"}, &bad))

	// Reads and status answer locally on every node.
	c.waitConverged()
	for id, addr := range addrs {
		resp, err := http.Get("http://" + addr + "/read?topic=t&queue=0&offset=0&max=10")
		require.NoError(t, err)
		var rr msgsResp
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&rr))
		resp.Body.Close()
		require.Len(t, rr.Messages, 2, "node %s", id)
		resp, err = http.Get("http://" + addr + "/status")
		require.NoError(t, err)
		var st replica.Status
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
		resp.Body.Close()
		require.Equal(t, id, st.ID)
		require.Equal(t, l.ID(), st.Leader)
		require.Positive(t, st.Term)
		require.Positive(t, st.AppliedIndex)
		require.Len(t, st.Voters, 3)
		if id == l.ID() {
			require.Equal(t, "Leader", st.Role)
		} else {
			require.Equal(t, "Follower", st.Role)
		}
	}
}

func TestHTTPStatusCodesForErrors(t *testing.T) {
	for err, code := range map[error]int{
		replica.ErrInvalid: 400, replica.ErrRejected: 400, replica.ErrNotLeader: 503, &replica.NotLeaderError{}: 503,
		replica.ErrNotCommitted: 503, replica.ErrDuplicateMember: 409,
		replica.ErrLastVoter: 409, replica.ErrUnknownMember: 404, replica.ErrUnreachable: 502, errors.New("x"): 500,
	} {
		require.Equal(t, code, statusOf(err), "%v", err)
	}
}

// The field report's produce that stopped every node for good: a topic of
// 300 bytes (the store holds at most 255), or one key of 1.1 MB (metadata
// is at most 1 MiB). The check before proposing is the library's own
// (brokercore.CheckProduce): the produce is refused with 400, nothing is
// proposed, and the cluster keeps working.
func TestHTTPProduceTheStoreWouldRefuseIsRejectedBeforeRaft(t *testing.T) {
	c, addrs := httpCluster(t)
	l := c.leader()
	before := l.Raft().LastIndex()
	var bad msgsResp
	require.Equal(t, 400, post(t, addrs[l.ID()], "/produce", produceReq{Topic: strings.Repeat("A", 300),
		Messages: []msgJSON{{Body: "x"}}}, &bad))
	require.NotEmpty(t, bad.Error)
	require.Equal(t, 400, post(t, addrs[l.ID()], "/produce", produceReq{Topic: "t",
		Messages: []msgJSON{{Body: "x", Keys: []string{strings.Repeat("k", 1100*1000)}}}}, &bad))
	require.Equal(t, 400, post(t, addrs[l.ID()], "/produce", produceReq{Topic: "%DLQ%g",
		Messages: []msgJSON{{Body: "x"}}}, &bad), "a reserved topic is not a client's")
	require.Equal(t, before, l.Raft().LastIndex(), "nothing proposed")

	var ok msgsResp
	require.Equal(t, 200, post(t, addrs[l.ID()], "/produce", produceReq{Topic: "t",
		Messages: []msgJSON{{Body: "good"}}}, &ok), "%s", ok.Error)
	c.waitConverged()
	for _, n := range c.live() {
		require.Empty(t, n.Status().Failed, "node %s", n.ID())
		require.Equal(t, int64(1), n.Store().Stats().LogNext)
	}
}

func TestHTTPPopAndResetRefuseBadNames(t *testing.T) {
	c, addrs := httpCluster(t)
	l := c.leader()
	before := l.Raft().LastIndex()
	var bad msgsResp
	require.Equal(t, 400, post(t, addrs[l.ID()], "/pop", popReq{Group: strings.Repeat("g", 300), Topic: "t"}, &bad))
	require.Equal(t, 400, post(t, addrs[l.ID()], "/pop", popReq{Group: "g", Topic: "a b"}, &bad))
	require.ErrorIs(t, l.ResetOffset(strings.Repeat("g", 300), "t", 0, 0), replica.ErrInvalid)
	require.Equal(t, before, l.Raft().LastIndex(), "nothing proposed")
}
