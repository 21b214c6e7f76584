package main

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// noRedirect posts with the given proofs and does not follow a redirect:
// the answer is the addressed node's own.
func noRedirect(t *testing.T, addr, path string, body []byte, proofs ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	require.NoError(t, err)
	for _, p := range proofs {
		req.Header.Add(authHeader, p)
	}
	c := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

// A proof is bound to the node it was made for: one recorded on its way
// to the leader A, replayed within its 30 s to B once B leads, is refused
// there (B's replay cache never saw it) and moves nothing.
func TestHTTPAuthProofRecordedForOneNodeIsRefusedByTheNextLeader(t *testing.T) {
	clk := newTestClock()
	c, addrs := httpClusterWith(t, testSecret, clk.Now)
	a := c.leader()
	key := httpKey(testSecret)
	reset := mustJSON(t, offsetReq{Group: "g", Topic: "t", Queue: 0, Offset: 3})
	recorded := signFor(t, key, addrs[a.ID()], "/offsets/reset", reset, clk.Now())
	code, answer := noRedirect(t, addrs[a.ID()], "/offsets/reset", reset, recorded)
	require.Equal(t, 200, code, answer)
	require.Eventually(t, func() bool { off, ok := a.Committed("g", "t", 0); return ok && off == 3 }, 10*time.Second, 5*time.Millisecond)

	// The operator moves the group on; then A loses the lead.
	moved := mustJSON(t, offsetReq{Group: "g", Topic: "t", Queue: 0, Offset: 9})
	code, answer = noRedirect(t, addrs[a.ID()], "/offsets/reset", moved, signFor(t, key, addrs[a.ID()], "/offsets/reset", moved, clk.Now()))
	require.Equal(t, 200, code, answer)
	require.NoError(t, a.Raft().LeadershipTransfer().Error())
	var b string
	require.Eventually(t, func() bool {
		for _, n := range c.live() {
			if n.ID() != a.ID() && n.IsLeader() {
				b = n.ID()
				return true
			}
		}
		return false
	}, 15*time.Second, 5*time.Millisecond, "another node leads")
	before := c.node(b).Raft().LastIndex()

	code, answer = noRedirect(t, addrs[b], "/offsets/reset", reset, recorded)
	require.Equal(t, 401, code, "the proof made for %s replayed to the new leader %s: %s", a.ID(), b, answer)
	require.Contains(t, answer, "wrong proof")
	require.Equal(t, before, c.node(b).Raft().LastIndex(), "nothing proposed")
	off, _ := c.node(b).Committed("g", "t", 0)
	require.Equal(t, int64(9), off, "the group was rewound by a replay")

	// Made for B, the same reset is accepted there.
	code, answer = noRedirect(t, addrs[b], "/offsets/reset", reset, signFor(t, key, addrs[b], "/offsets/reset", reset, clk.Now()))
	require.Equal(t, 200, code, answer)
}

// signFor is a proof for the node at authority.
func signFor(t *testing.T, key []byte, authority, path string, body []byte, at time.Time) string {
	t.Helper()
	return signProof(key, authority, http.MethodPost, path, body, at)
}
