package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

var testSecret = []byte("http-auth-test-cluster-secret")

// secretNode is one node of the HTTP program (serve) with a cluster
// secret, raft on loopback TCP; it returns its HTTP address once it leads.
func secretNode(t *testing.T, log *slog.Logger) (*server, string) {
	raftAddr, httpAddr := freeAddr(t), freeAddr(t)
	s, err := serve(replica.Config{ID: "n1", Dir: filepath.Join(t.TempDir(), "n1"), RaftAddr: raftAddr, Addr: httpAddr,
		Bootstrap: []raft.Server{{ID: "n1", Address: raft.ServerAddress(raftAddr)}}, ClusterSecret: testSecret, Logger: log,
		HeartbeatTimeout: 250 * time.Millisecond, ElectionTimeout: 250 * time.Millisecond, LeaderLeaseTimout: 250 * time.Millisecond,
		ApplyTimeout: 2 * time.Second, CommitEvery: 20 * time.Millisecond}, 1, false)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.close()) })
	require.Eventually(t, func() bool { return s.gs.IsLeader(0) }, 15*time.Second, 5*time.Millisecond)
	return s, httpAddr
}

// The finding: with a cluster secret on the raft port, the HTTP API still
// let anyone who reached it change membership and move a group's offsets.
// Unsigned, each is refused with 401 and changes nothing.
func TestUnsignedMembershipAndOffsetResetAreRefusedWithASecret(t *testing.T) {
	logs := &lockedBuffer{}
	s, addr := secretNode(t, slog.New(slog.NewTextHandler(logs, nil)))
	before := s.gs.Group(0).Raft().LastIndex()
	var bad msgsResp
	require.Equal(t, 401, post(t, addr, "/offsets/reset", offsetReq{Group: "g", Topic: "t", Queue: 0, Offset: 5}, &bad))
	require.NotEmpty(t, bad.Error)
	require.Equal(t, 401, post(t, addr, "/members", memberReq{ID: "evil", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:1"}, &bad))
	require.Equal(t, 401, post(t, addr, "/members/remove", memberReq{ID: "n1"}, &bad))
	_, committed := s.gs.Committed("g", "t", 0)
	require.False(t, committed, "no offset reset")
	require.Len(t, s.gs.Status()[0].Voters, 1)
	require.Equal(t, before, s.gs.Group(0).Raft().LastIndex(), "nothing proposed")
	st, err := groupsStatusOf(addr)
	require.NoError(t, err)
	require.Equal(t, uint64(3), st.HTTPRefused)
	require.Equal(t, 3, strings.Count(logs.String(), `level=WARN msg="cluster: http request refused" remote=127.0.0.1:`), logs.String())
	require.Contains(t, logs.String(), "POST /members/remove: request not authenticated")

	// Signed with the secret, the same reset goes through; data endpoints
	// need no proof.
	code, answer := signedPost(t, addr, "/offsets/reset", mustJSON(t, offsetReq{Group: "g", Topic: "t", Queue: 0, Offset: 0}), httpKey(testSecret), time.Now())
	require.Equal(t, 200, code, answer)
	require.Equal(t, 200, post(t, addr, "/produce", produceReq{Topic: "t", Messages: []msgJSON{{Body: "x"}}}, nil))
}

// Without a secret an HTTP address beyond loopback is refused, as the
// raft port's is (-insecure-raft); with one it is refused too, since the
// data endpoints stay open; -insecure-http allows either.
func TestHTTPAddrBeyondLoopbackNeedsTheInsecureFlag(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // runNode returns as soon as it is up
	cfg := func(secret []byte) replica.Config {
		return replica.Config{ID: "n1", Dir: t.TempDir(), RaftAddr: freeAddr(t), Addr: "0.0.0.0:0", ClusterSecret: secret,
			Logger: slog.New(slog.DiscardHandler)}
	}
	require.ErrorIs(t, runNode(ctx, 1, cfg(nil), "", false), ErrInsecureHTTP)
	require.ErrorIs(t, runNode(ctx, 1, cfg(testSecret), "", false), ErrInsecureHTTP)
	require.NoError(t, runNode(ctx, 1, cfg(nil), "", true))
	for addr, want := range map[string]bool{"127.0.0.1:8001": true, "[::1]:8001": true, "localhost:8001": true,
		"0.0.0.0:8001": false, ":8001": false, "10.0.0.1:8001": false, "[::]:8001": false, "bogus": false} {
		require.Equal(t, want, checkHTTPAddr(addr, nil, false) == nil, addr)
	}
	// The flag's command line: refused at start, exit status 1.
	require.Equal(t, 1, run([]string{"-id", "n1", "-raft-addr", "127.0.0.1:0", "-http-addr", "0.0.0.0:0", "-data", t.TempDir()}))
}

// lockedBuffer is a log's output that handlers may write concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// rawPost posts body to addr with the given X-Cluster-Auth values and
// answers the status and body (the default client follows redirects and
// re-sends the header).
func rawPost(t *testing.T, addr, path string, body []byte, proofs ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	require.NoError(t, err)
	for _, p := range proofs {
		req.Header.Add(authHeader, p)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

// signedPost posts body to addr signed for it, and signs every redirect
// it follows anew for the node it goes to, as postSigned does.
func signedPost(t *testing.T, addr, path string, body, key []byte, at time.Time) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	require.NoError(t, err)
	sign(req, key, body, at)
	c := http.Client{CheckRedirect: func(next *http.Request, via []*http.Request) error {
		sign(next, key, body, at)
		return nil
	}}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

// testClock is the HTTP API's clock in a test: it moves only when told.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// Every malformed, forged, stale or replayed proof on a membership change
// or an offset reset is refused with 401 and changes nothing; after each,
// a signed reset through a follower (redirected to the leader, which
// verifies too) still works and /status answers with the refusal counted.
func TestHTTPAuthRefusesHostileProofsAndKeepsServing(t *testing.T) {
	clk := newTestClock()
	c, addrs := httpClusterWith(t, testSecret, clk.Now)
	l := c.leader()
	require.Eventually(t, func() bool {
		for _, n := range c.live() {
			if n.LeaderAddr() != addrs[l.ID()] {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "every node knows the leader's HTTP address")
	leader := addrs[l.ID()]
	var follower string
	for id, a := range addrs {
		if id != l.ID() {
			follower = a
		}
	}
	key := httpKey(testSecret)
	sig := func(k []byte, path string, body []byte, at time.Time) string {
		return signProof(k, leader, http.MethodPost, path, body, at)
	}
	reset := mustJSON(t, offsetReq{Group: "g", Topic: "t", Queue: 0, Offset: 7})
	evil := mustJSON(t, memberReq{ID: "evil1", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:1"})
	remove := mustJSON(t, memberReq{ID: followerID(addrs, follower)})
	good := sig(key, "/offsets/reset", reset, clk.Now())
	f := strings.Split(good, ":") // version, time, nonce, mac
	with := func(i int, v string) string {
		g := append([]string(nil), f...)
		g[i] = v
		return strings.Join(g, ":")
	}
	stale := sig(key, "/offsets/reset", reset, clk.Now().Add(-authSkew-time.Millisecond))
	early := sig(key, "/offsets/reset", reset, clk.Now().Add(authSkew+time.Millisecond))
	big := mustJSON(t, offsetReq{Group: strings.Repeat("g", authMaxBody), Topic: "t"})
	timer, err := l.ProduceAt(&store.Message{Topic: "t", Body: []byte("later")}, time.Now().Add(48*time.Hour))
	require.NoError(t, err)
	cancel := mustJSON(t, map[string]any{"uniq_key": timer.Properties[schedule.PropUniqKey], "queue": 0})

	health := 0
	healthy := func(name string) {
		t.Helper()
		health++
		body := mustJSON(t, offsetReq{Group: "health", Topic: "t", Queue: 0, Offset: int64(health)})
		code, answer := signedPost(t, follower, "/offsets/reset", body, key, clk.Now())
		require.Equal(t, 200, code, "%s: signed reset after it: %s", name, answer)
		require.Eventually(t, func() bool { off, ok := l.Committed("health", "t", 0); return ok && off == int64(health) },
			10*time.Second, 5*time.Millisecond, name)
		st, err := groupsStatusOf(leader)
		require.NoError(t, err, name)
		require.Len(t, st.Voters, 3, name)
	}
	healthy("start")

	cases := []struct {
		name   string
		why    string // in the refusal
		path   string
		body   []byte
		proofs []string
	}{
		{"no proof", "0 X-Cluster-Auth", "/offsets/reset", reset, nil},
		{"empty proof", "not a v2", "/offsets/reset", reset, []string{""}},
		{"garbage", "not a v2", "/offsets/reset", reset, []string{"hello"}},
		{"other version", "not a v2", "/offsets/reset", reset, []string{with(0, "v1")}},
		{"made for another node", "made for another node", "/offsets/reset", reset, []string{signProof(key, follower, http.MethodPost, "/offsets/reset", reset, clk.Now())}},
		{"made for the node by another name", "made for another node", "/offsets/reset", reset, []string{signProof(key, strings.Replace(leader, "127.0.0.1", "localhost", 1), http.MethodPost, "/offsets/reset", reset, clk.Now())}},
		{"made for no node", "made for another node", "/offsets/reset", reset, []string{signProof(key, "", http.MethodPost, "/offsets/reset", reset, clk.Now())}},
		{"two proofs", "2 X-Cluster-Auth", "/offsets/reset", reset, []string{good, good}},
		{"upper-case mac", "bad nonce or mac", "/offsets/reset", reset, []string{with(3, strings.ToUpper(f[3]))}},
		{"short mac", "bad nonce or mac", "/offsets/reset", reset, []string{with(3, f[3][:62])}},
		{"long mac", "bad nonce or mac", "/offsets/reset", reset, []string{good + "00"}},
		{"short nonce", "bad nonce or mac", "/offsets/reset", reset, []string{with(2, f[2][2:])}},
		{"time in the future's far end", "proof time", "/offsets/reset", reset, []string{with(1, "9223372036854775807")}},
		{"extra field", "not a v2", "/offsets/reset", reset, []string{good + ":00"}},
		{"non-hex nonce", "bad nonce or mac", "/offsets/reset", reset, []string{with(2, "zz"+f[2][2:])}},
		{"negative time", "bad time", "/offsets/reset", reset, []string{with(1, "-1")}},
		{"time with leading zero", "bad time", "/offsets/reset", reset, []string{with(1, "0"+f[1])}},
		{"time overflow", "bad time", "/offsets/reset", reset, []string{with(1, "99999999999999999999")}},
		{"huge proof", "proof of", "/offsets/reset", reset, []string{good + strings.Repeat("a", 16<<10)}},
		{"stale by 1 ms past the window", "proof time 30001 ms", "/offsets/reset", reset, []string{stale}},
		{"from 1 ms beyond the window ahead", "proof time -30001 ms", "/offsets/reset", reset, []string{early}},
		{"another secret", "wrong proof", "/offsets/reset", reset, []string{sig(httpKey([]byte("another-cluster-secret!")), "/offsets/reset", reset, clk.Now())}},
		{"the secret itself as key", "wrong proof", "/offsets/reset", reset, []string{sig(testSecret, "/offsets/reset", reset, clk.Now())}},
		{"the raft port's key", "wrong proof", "/offsets/reset", reset, []string{sig(replica.DeriveKey(testSecret, "brokercore raft v1"), "/offsets/reset", reset, clk.Now())}},
		{"another body", "wrong proof", "/offsets/reset", mustJSON(t, offsetReq{Group: "g", Topic: "t", Queue: 0, Offset: 8}), []string{good}},
		{"another path", "wrong proof", "/members", evil, []string{sig(key, "/members/remove", evil, clk.Now())}},
		{"another query", "wrong proof", "/offsets/reset?x=1", reset, []string{good}},
		{"body over the bound", "body over", "/offsets/reset", big, []string{sig(key, "/offsets/reset", big, clk.Now())}},
		{"add an unreachable voter, forged", "wrong proof", "/members", evil, []string{sig(httpKey([]byte("guessed-secret-guessed")), "/members", evil, clk.Now())}},
		{"remove a live voter, unsigned", "0 X-Cluster-Auth", "/members/remove", remove, nil},
		{"cancel a timer, unsigned", "0 X-Cluster-Auth", "/cancel", cancel, nil},
		{"cancel a timer with a reset's proof", "wrong proof", "/cancel", cancel, []string{good}},
		{"cancel a timer, forged", "wrong proof", "/cancel", cancel, []string{sig(httpKey([]byte("guessed-secret-guessed")), "/cancel", cancel, clk.Now())}},
		{"cancel a timer, made for another node", "made for another node", "/cancel", cancel, []string{signProof(key, follower, http.MethodPost, "/cancel", cancel, clk.Now())}},
		{"cancel a timer, stale", "proof time 30001 ms", "/cancel", cancel, []string{sig(key, "/cancel", cancel, clk.Now().Add(-authSkew-time.Millisecond))}},
	}
	refused := uint64(0)
	for _, tc := range cases {
		before := l.Raft().LastIndex()
		code, answer := rawPost(t, leader, tc.path, tc.body, tc.proofs...)
		require.Equal(t, 401, code, "%s: %s", tc.name, answer)
		require.Contains(t, answer, ErrHTTPAuth.Error(), tc.name)
		require.Contains(t, answer, tc.why, tc.name)
		require.Equal(t, before, l.Raft().LastIndex(), "%s: nothing proposed", tc.name)
		_, moved := l.Committed("g", "t", 0)
		require.False(t, moved, tc.name)
		refused++
		st, err := groupsStatusOf(leader)
		require.NoError(t, err)
		require.Equal(t, refused, st.HTTPRefused, tc.name)
		healthy(tc.name)
	}

	// A proof accepted once is refused when replayed, on the same node.
	code, answer := rawPost(t, leader, "/offsets/reset", reset, good)
	require.Equal(t, 200, code, answer)
	code, answer = rawPost(t, leader, "/offsets/reset", mustJSON(t, offsetReq{Group: "g", Topic: "t", Queue: 0, Offset: 7}), good)
	require.Equal(t, 401, code, "replay: %s", answer)
	require.Contains(t, answer, "replay")
	healthy("replay")

	// The node's clock decides staleness: a proof 30 s old is still good,
	// one the clock moved past is not.
	at := clk.Now()
	p := sig(key, "/offsets/reset", reset, at)
	clk.Add(authSkew + time.Millisecond)
	code, _ = rawPost(t, leader, "/offsets/reset", reset, p)
	require.Equal(t, 401, code, "the clock moved past the proof's window")
	code, answer = signedPost(t, leader, "/offsets/reset", reset, key, clk.Now().Add(-authSkew))
	require.Equal(t, 200, code, "at the window's edge: %s", answer)
	healthy("clock")

	// Signed, the cancel goes through (redirected from a follower, signed
	// anew for the leader); it was pending until then.
	code, answer = signedPost(t, follower, "/cancel", cancel, key, clk.Now())
	require.Equal(t, 200, code, "the timer was still pending: %s", answer)

	// The data path needs no proof (loopback only without -insecure-http).
	require.Equal(t, 200, post(t, follower, "/produce", produceReq{Topic: "t", Messages: []msgJSON{{Body: "x"}}}, nil))
}

func followerID(addrs map[string]string, addr string) string {
	for id, a := range addrs {
		if a == addr {
			return id
		}
	}
	return ""
}

func FuzzParseProof(f *testing.F) {
	key := httpKey(testSecret)
	f.Add(signProof(key, "127.0.0.1:8001", "POST", "/members", []byte(`{"id":"n2"}`), time.Unix(1, 0)))
	f.Add("v2:0:" + strings.Repeat("0", 32) + ":" + strings.Repeat("f", 64))
	f.Add("v2:-1:" + strings.Repeat("0", 32) + ":" + strings.Repeat("f", 64))
	f.Add("v1:0:" + strings.Repeat("0", 32) + ":" + strings.Repeat("f", 64)) // the unbound format
	f.Add("v2:::")
	f.Add("")
	f.Fuzz(func(t *testing.T, h string) {
		p, err := parseProof(h)
		if err != nil {
			require.ErrorIs(t, err, ErrHTTPAuth)
			return
		}
		require.Equal(t, h, p.String(), "one spelling per proof")
		require.Len(t, p.mac, 32)
		_, err = hex.DecodeString(p.nonce)
		require.NoError(t, err)
	})
}
