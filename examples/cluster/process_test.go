package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokercore/brokercore/brokertest"
	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/stretchr/testify/require"
)

// freeAddr is an address for a server the test starts later (brokertest.FreeAddr:
// outside the ephemeral range, so no outgoing connection takes it first).
func freeAddr(t *testing.T) string { return brokertest.FreeAddr(t) }

// proc is one node running in a child process of the test binary.
type proc struct {
	id, raft, http, dir, join string
	groups                    int    // -groups, 0 = the default
	secret                    string // -cluster-secret-file, "" = none
	cmd                       *exec.Cmd
	log                       *os.File
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	args := fmt.Sprintf("-id %s -raft-addr %s -http-addr %s -data %s -heartbeat 200ms", p.id, p.raft, p.http, p.dir)
	if p.join != "" {
		args += " -join " + p.join
	}
	if p.groups != 0 {
		args += fmt.Sprintf(" -groups %d", p.groups)
	}
	if p.secret != "" {
		args += " -cluster-secret-file " + p.secret
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+args)
	var err error
	if p.log == nil {
		p.log, err = os.Create(filepath.Join(filepath.Dir(p.dir), p.id+".log"))
		require.NoError(t, err)
	}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	require.NoError(t, cmd.Start())
	p.cmd = cmd
}

func (p *proc) stop(sig syscall.Signal) error {
	if p.cmd == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	err := p.cmd.Wait()
	p.cmd = nil
	return err
}

func getStatus(addr string) (replica.Status, error) {
	var s replica.Status
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/status")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// httpProduce and httpSeqs are queue 0's httpProduceTo and httpSeqsOf.
func httpProduce(addr, body string) error { return httpProduceTo(addr, 0, body) }

func httpSeqs(addr string) ([]int64, error) { return httpSeqsOf(addr, 0) }

// Three real processes over TCP on 127.0.0.1: the first bootstraps, two
// join through it; the leader is killed with SIGKILL mid-produce, the
// survivors go on, the killed node restarts on its directory and the
// three converge on the same log.
func TestThreeProcessesOverTCPSurviveALeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	root := t.TempDir()
	// The raft ports need the cluster secret (-cluster-secret-file).
	secret := filepath.Join(root, "cluster.secret")
	require.NoError(t, os.WriteFile(secret, []byte("three-processes-secret\n"), 0o600))
	var ps []*proc
	for i := 1; i <= 3; i++ {
		p := &proc{id: fmt.Sprintf("n%d", i), raft: freeAddr(t), http: freeAddr(t), dir: filepath.Join(root, fmt.Sprintf("n%d", i)), secret: secret}
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
				b, err := os.ReadFile(filepath.Join(root, p.id+".log"))
				if err != nil {
					t.Log(err)
				}
				t.Logf("--- %s log:\n%s", p.id, tail(string(b), 40))
			}
		}
	}()
	ps[0].start(t)
	require.Eventually(t, func() bool { s, err := getStatus(ps[0].http); return err == nil && s.Role == "Leader" }, 20*time.Second, 20*time.Millisecond)
	ps[1].start(t)
	ps[2].start(t)
	require.Eventually(t, func() bool { s, err := getStatus(ps[0].http); return err == nil && len(s.Voters) == 3 }, 30*time.Second, 20*time.Millisecond)
	// A stranger on a raft port is refused and counted in /status.
	nc, err := net.Dial("tcp", ps[1].raft)
	require.NoError(t, err)
	_, _ = nc.Write([]byte("no handshake, just bytes on the raft port"))
	_, err = nc.Read(make([]byte, 1))
	require.Error(t, err, "the node closed it")
	nc.Close()
	require.Eventually(t, func() bool {
		var st struct {
			RaftRefused uint64 `json:"raft_refused"`
		}
		resp, err := http.Get("http://" + ps[1].http + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&st) == nil && st.RaftRefused > 0
	}, 20*time.Second, 20*time.Millisecond)

	var acked []int64
	seq := int64(0)
	produce := func(n int) {
		for len(acked) < n {
			seq++
			p := ps[int(seq)%3]
			if p.cmd == nil {
				continue
			}
			if err := httpProduce(p.http, strconv.FormatInt(seq, 10)); err == nil {
				acked = append(acked, seq)
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	produce(50)
	var leader *proc
	require.Eventually(t, func() bool { // a status taken mid-election names no leader
		s, err := getStatus(ps[1].http)
		if err != nil {
			return false
		}
		for _, p := range ps {
			if p.id == s.Leader {
				leader = p
			}
		}
		return leader != nil
	}, 30*time.Second, 50*time.Millisecond)
	_ = leader.stop(syscall.SIGKILL)
	killed := time.Now()
	produce(100)
	t.Logf("100 acknowledged, %v after the kill", time.Since(killed))

	leader.join = ""
	leader.start(t)
	var want []int64
	require.Eventually(t, func() bool {
		var err error
		if want, err = httpSeqs(ps[0].http); err != nil || len(want) < len(acked) {
			return false
		}
		for _, p := range ps[1:] {
			got, err := httpSeqs(p.http)
			if err != nil || len(got) != len(want) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the three processes did not converge")
	for _, p := range ps {
		got, err := httpSeqs(p.http)
		require.NoError(t, err)
		require.Equal(t, want, got, "%s", p.id)
		requireAckedOnceInOrder(t, acked, got)
	}
	for _, p := range ps {
		require.NoError(t, p.stop(syscall.SIGTERM), "%s exits cleanly on SIGTERM", p.id)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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

// -join signs its request with the cluster secret (the leader verifies):
// a node with the secret joins, one with another secret is refused (401,
// it exits) and counted; -post removes a member through a follower, whose
// redirect it follows with a fresh proof.
func TestJoinAndPostWithTheClusterSecretOverProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	root := t.TempDir()
	secret, wrong := filepath.Join(root, "cluster.secret"), filepath.Join(root, "wrong.secret")
	require.NoError(t, os.WriteFile(secret, []byte("join-with-the-secret-secret\n"), 0o600))
	require.NoError(t, os.WriteFile(wrong, []byte("join-with-another-secret\n"), 0o600))
	var ps []*proc
	for i := 1; i <= 3; i++ {
		p := &proc{id: fmt.Sprintf("n%d", i), raft: freeAddr(t), http: freeAddr(t), dir: filepath.Join(root, fmt.Sprintf("n%d", i)), secret: secret}
		if i > 1 {
			p.join = ps[0].http
		}
		ps = append(ps, p)
	}
	ps[2].secret = wrong
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
	ps[0].start(t)
	require.Eventually(t, func() bool { s, err := getStatus(ps[0].http); return err == nil && s.Role == "Leader" }, 20*time.Second, 20*time.Millisecond)
	ps[1].start(t)
	require.Eventually(t, func() bool { s, err := getStatus(ps[0].http); return err == nil && len(s.Voters) == 2 }, 30*time.Second, 20*time.Millisecond)

	ps[2].start(t)
	exited := make(chan error, 1)
	go func() { exited <- ps[2].cmd.Wait() }()
	select {
	case err := <-exited:
		ps[2].cmd = nil
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, 1, ee.ExitCode())
	case <-time.After(60 * time.Second):
		t.Fatal("the node with another secret did not give up joining")
	}
	b, err := os.ReadFile(filepath.Join(root, "n3.log"))
	require.NoError(t, err)
	require.Contains(t, string(b), "401")
	st, err := groupsStatusOf(ps[0].http)
	require.NoError(t, err)
	require.Len(t, st.Voters, 2)
	require.Equal(t, uint64(1), st.HTTPRefused)

	// -post: unsigned it is refused; signed, through the follower, it removes n2.
	require.Equal(t, 1, run([]string{"-post", ps[1].http + "/members/remove", "-body", `{"id":"n2"}`}))
	require.Equal(t, 0, run([]string{"-post", ps[1].http + "/members/remove", "-body", `{"id":"n2"}`, "-cluster-secret-file", secret}))
	require.Eventually(t, func() bool { s, err := getStatus(ps[0].http); return err == nil && len(s.Voters) == 1 }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, ps[0].stop(syscall.SIGTERM), "n1 exits cleanly on SIGTERM")
}
