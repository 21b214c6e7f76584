package replica

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

const testSecret = "0123456789abcdef-cluster"

// The handshake proves the secret both ways: the same secret passes, a
// different one fails on both sides.
func TestRaftHandshakeIsMutual(t *testing.T) {
	run := func(dialKey, acceptKey []byte) (dialErr, acceptErr error) {
		a, b := net.Pipe()
		done := make(chan error, 1)
		go func() {
			err := acceptHandshake(b, acceptKey)
			_ = b.Close()
			done <- err
		}()
		dialErr = dialHandshake(a, dialKey)
		_ = a.Close()
		return dialErr, <-done
	}
	k := DeriveKey([]byte(testSecret), authLabel)
	d, a := run(k, k)
	require.NoError(t, d)
	require.NoError(t, a)
	other := DeriveKey([]byte("another-secret-of-16+"), authLabel)
	d, a = run(other, k)
	require.ErrorIs(t, d, ErrRaftAuth, "the dialer sees the acceptor does not know its secret")
	require.ErrorIs(t, a, ErrRaftAuth, "the acceptor gets no proof")
}

// A dialer that ignores the acceptor's answer and sends a proof anyway
// (a replay of another handshake's, or zeros) is refused.
func TestRaftHandshakeRefusesAReplayedProof(t *testing.T) {
	k := DeriveKey([]byte(testSecret), authLabel)
	a, b := net.Pipe()
	defer a.Close()
	done := make(chan error, 1)
	go func() { done <- acceptHandshake(b, k) }()
	hello := append(authMagic[:], bytes.Repeat([]byte{7}, authNonceLen)...)
	_, err := a.Write(hello)
	require.NoError(t, err)
	_, err = io.ReadFull(a, make([]byte, authReplyLen))
	require.NoError(t, err)
	// The proof of a handshake with another acceptor nonce.
	_, err = a.Write(authMAC(k, authDialer, hello[4:], bytes.Repeat([]byte{9}, authNonceLen)))
	require.NoError(t, err)
	require.ErrorIs(t, <-done, ErrRaftAuth)
}

func TestLoadSecretRefusesShortOnes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s")
	require.NoError(t, writeFile(p, "short\n"))
	_, err := LoadSecret(p)
	require.ErrorIs(t, err, ErrRaftAuth)
	require.NoError(t, writeFile(p, "  "+testSecret+"\n"))
	s, err := LoadSecret(p)
	require.NoError(t, err)
	require.Equal(t, testSecret, string(s))
	_, err = NewAuthStream(nil, []byte("short"), nil)
	require.ErrorIs(t, err, ErrRaftAuth)
}

// A raft address beyond loopback needs a secret or InsecureRaft.
func TestNonLoopbackRaftAddrNeedsASecret(t *testing.T) {
	_, err := Open(Config{ID: "n1", Dir: t.TempDir(), RaftAddr: "0.0.0.0:0"})
	require.ErrorIs(t, err, ErrInsecureRaft)
	_, err = OpenGroups(Config{ID: "n1", Dir: t.TempDir(), RaftAddr: "0.0.0.0:0"}, 2)
	require.ErrorIs(t, err, ErrInsecureRaft)
	require.NoError(t, checkRaftAddr(Config{RaftAddr: "0.0.0.0:7001", InsecureRaft: true}))
	require.NoError(t, checkRaftAddr(Config{RaftAddr: "0.0.0.0:7001", ClusterSecret: []byte(testSecret)}))
	require.NoError(t, checkRaftAddr(Config{RaftAddr: "127.0.0.1:7001"}))
	require.NoError(t, checkRaftAddr(Config{RaftAddr: "localhost:7001"}))
}

// authCluster is three nodes over TCP whose raft ports need testSecret.
type authCluster struct {
	t     *testing.T
	nodes []*Node
	addrs []string
}

func newAuthCluster(t *testing.T) *authCluster {
	addrs := freeAddrs(t, 3)
	c := &authCluster{t: t, addrs: addrs}
	var servers []raft.Server
	for i, a := range addrs {
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: raft.ServerAddress(a)})
	}
	for i, a := range addrs {
		cfg := Config{ID: fmt.Sprintf("n%d", i+1), Dir: t.TempDir(), RaftAddr: a, Addr: "addr-" + a,
			Bootstrap: servers, ClusterSecret: []byte(testSecret), raftAuthTimeout: time.Second}
		fastConfig(&cfg)
		n, err := Open(cfg)
		require.NoError(t, err)
		c.nodes = append(c.nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			require.NoError(t, n.Close())
		}
	})
	return c
}

// healthy produces body through the leader and waits until every node
// has it.
func (c *authCluster) healthy(body string) {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		for _, n := range c.nodes {
			if n.IsLeader() {
				_, err := n.Produce(msg("t", 0, body))
				return err == nil
			}
		}
		return false
	}, 20*time.Second, 5*time.Millisecond, "no leader took %q", body)
	for _, n := range c.nodes {
		require.Eventually(c.t, func() bool {
			msgs, err := n.Read("t", 0, 0, 1000)
			require.NoError(c.t, err)
			for _, m := range msgs {
				if string(m.Body) == body {
					return true
				}
			}
			return false
		}, 20*time.Second, 5*time.Millisecond, "node %s lacks %q", n.ID(), body)
	}
}

func (c *authCluster) refused() uint64 {
	var sum uint64
	for _, n := range c.nodes {
		sum += n.RaftRefused()
	}
	return sum
}

// hostileRaft is a raft transport of an outsider: plain TCP, or a wrong
// secret.
func hostileRaft(t *testing.T, secret string) *raft.NetworkTransport {
	tcp, err := listenTCP("127.0.0.1:0")
	require.NoError(t, err)
	var stream raft.StreamLayer = tcp
	if secret != "" {
		stream, err = NewAuthStream(tcp, []byte(secret), nil)
		require.NoError(t, err)
	}
	tr := raft.NewNetworkTransport(stream, 1, 2*time.Second, io.Discard)
	t.Cleanup(func() { tr.CloseStreams(); _ = tr.Close() })
	return tr
}

// An outsider without the secret, or with another one, cannot make any
// node accept a raft RPC: a vote request and an append of a far higher
// term change no node's term, nothing it sends is stored, every attempt is
// counted, and the cluster goes on.
func TestRaftPortRefusesOutsiders(t *testing.T) {
	c := newAuthCluster(t)
	c.healthy("before")
	const attackTerm = 1 << 40
	for _, secret := range []string{"", "another-secret-0123456789"} {
		tr := hostileRaft(t, secret)
		before := c.refused()
		for i, a := range c.addrs {
			target := raft.ServerAddress(a)
			var vr raft.RequestVoteResponse
			err := tr.RequestVote("n1", target, &raft.RequestVoteRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(tr.LocalAddr())},
				Term:      attackTerm, LastLogIndex: attackTerm, LastLogTerm: attackTerm,
			}, &vr)
			require.Error(t, err, "node %d answered a vote request (secret %q): %+v", i, secret, vr)
			var ar raft.AppendEntriesResponse
			err = tr.AppendEntries("n1", target, &raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(tr.LocalAddr())},
				Term:      attackTerm, PrevLogEntry: 0, LeaderCommitIndex: attackTerm,
				Entries: []*raft.Log{{Index: 1 << 30, Term: attackTerm, Type: raft.LogCommand, Data: encodeEntry(&entry{Kind: kindProduce, Msgs: []*store.Message{msg("t", 0, "intruder")}})}},
			}, &ar)
			require.Error(t, err, "node %d answered an append (secret %q)", i, secret)
		}
		require.Eventually(t, func() bool { return c.refused() >= before+2*uint64(len(c.addrs)) }, 20*time.Second, 5*time.Millisecond,
			"refusals counted: %d before, %d now", before, c.refused())
	}
	for _, n := range c.nodes {
		require.Less(t, n.Raft().CurrentTerm(), uint64(attackTerm), "node %s took the intruder's term", n.ID())
		last, err := n.logs.LastIndex()
		require.NoError(t, err)
		require.Less(t, last, uint64(1<<30), "node %s stored the intruder's entry", n.ID())
	}
	c.healthy("after")
}

// rawConn dials addr.
func rawConn(t *testing.T, addr string) net.Conn {
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	return nc
}

// waitClosed waits until the peer closed nc: a read ends in EOF or a
// reset, not in this side's own deadline (far enough to mean "never").
func waitClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 512)
	for {
		_, err := nc.Read(buf)
		if err == nil {
			continue // the acceptor's answer to a well-formed hello
		}
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the node kept the connection open")
		return
	}
}

// Hostile input on the raft port: each case is closed by the node,
// counted, and the cluster stays healthy after it.
func TestRaftPortHostileInput(t *testing.T) {
	c := newAuthCluster(t)
	c.healthy("start")
	hello := append(append([]byte{}, authMagic[:]...), bytes.Repeat([]byte{1}, authNonceLen)...)
	cases := []struct {
		name  string
		input func(nc net.Conn)
	}{
		{"garbage", func(nc net.Conn) { _, _ = nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789012345")) }},
		{"raft rpc without handshake", func(nc net.Conn) {
			_, _ = nc.Write(append([]byte{1}, bytes.Repeat([]byte{0x80}, 64)...)) // rpcRequestVote, then msgpack
		}},
		{"group header without handshake", func(nc net.Conn) {
			_, _ = nc.Write(append([]byte("BCG1\x00\x00"), bytes.Repeat([]byte{0}, 64)...))
		}},
		{"huge input", func(nc net.Conn) {
			go func() { _, _ = nc.Write(bytes.Repeat([]byte{0xff}, 8<<20)) }() // the node reads 36 bytes of it
		}},
		{"hello then a wrong proof", func(nc net.Conn) {
			_, _ = nc.Write(hello)
			_, _ = io.ReadFull(nc, make([]byte, authReplyLen))
			_, _ = nc.Write(make([]byte, authProofLen))
		}},
		{"hello then nothing (slow handshake)", func(nc net.Conn) { _, _ = nc.Write(hello) }},
		{"half a hello (slow handshake)", func(nc net.Conn) { _, _ = nc.Write(hello[:5]) }},
		{"nothing at all", func(net.Conn) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := c.refused()
			nc := rawConn(t, c.addrs[0])
			tc.input(nc)
			// While it waits, the cluster works.
			c.healthy("during " + tc.name)
			waitClosed(t, nc)
			require.Eventually(t, func() bool { return c.refused() > before }, 20*time.Second, 5*time.Millisecond)
			c.healthy("after " + tc.name)
		})
	}
}

// Several raft groups over one listener: the connections are
// authenticated before their group header.
func TestGroupsRaftPortNeedsTheSecret(t *testing.T) {
	addrs := freeAddrs(t, 3)
	var servers []raft.Server
	for i, a := range addrs {
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: raft.ServerAddress(a)})
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()} // removed after the members close
	var members []*Groups
	t.Cleanup(func() {
		for _, gs := range members {
			require.NoError(t, gs.Close())
		}
	})
	for i, a := range addrs {
		cfg := Config{ID: fmt.Sprintf("n%d", i+1), Dir: dirs[i], RaftAddr: a, Bootstrap: servers,
			ClusterSecret: []byte(testSecret), raftAuthTimeout: time.Second}
		fastConfig(&cfg)
		gs, err := OpenGroups(cfg, 2)
		require.NoError(t, err)
		members = append(members, gs)
	}
	produce := func(q int, body string) {
		require.Eventually(t, func() bool {
			for _, gs := range members {
				if gs.IsLeader(GroupOf(q, 2)) {
					_, err := gs.Produce(msg("t", q, body))
					return err == nil
				}
			}
			return false
		}, 20*time.Second, 5*time.Millisecond)
	}
	produce(0, "g0")
	produce(1, "g1")
	nc := rawConn(t, addrs[1])
	_, _ = nc.Write([]byte("BCG1\x00\x01"))
	waitClosed(t, nc)
	require.Eventually(t, func() bool { return members[1].RaftRefused() > 0 }, 20*time.Second, 5*time.Millisecond)
	tr := hostileRaft(t, "another-secret-0123456789")
	var vr raft.RequestVoteResponse
	require.Error(t, tr.RequestVote("n1", raft.ServerAddress(addrs[2]), &raft.RequestVoteRequest{Term: 1 << 40}, &vr))
	produce(0, "g0 after")
	produce(1, "g1 after")
	for _, gs := range members {
		for g := range 2 {
			require.Less(t, gs.Group(g).Raft().CurrentTerm(), uint64(1<<40))
		}
	}
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }

// rwFuzz is a connection whose peer sends in and reads into out.
type rwFuzz struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (r *rwFuzz) Read(p []byte) (int, error)  { return r.in.Read(p) }
func (r *rwFuzz) Write(p []byte) (int, error) { return r.out.Write(p) }

// The acceptor's side of the handshake reads whatever a stranger sends:
// it never panics, never reads more than a hello and a proof, answers at
// most one fixed-size reply, and accepts nothing (the proof needs its own
// fresh nonce, which input fixed in advance cannot know). The parsers
// accept exactly their fixed sizes under the magic.
func FuzzRaftHandshake(f *testing.F) {
	k := DeriveKey([]byte(testSecret), authLabel)
	hello := append(append([]byte{}, authMagic[:]...), bytes.Repeat([]byte{3}, authNonceLen)...)
	f.Add(hello)
	f.Add(append(append([]byte{}, hello...), make([]byte, authProofLen)...))
	f.Add([]byte("BCA1"))
	f.Add([]byte("BCG1\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rw := &rwFuzz{in: bytes.NewReader(b)}
		err := acceptHandshake(rw, k)
		require.ErrorIs(t, err, ErrRaftAuth)
		require.LessOrEqual(t, len(b)-rw.in.Len(), authMaxRead)
		require.Contains(t, []int{0, authReplyLen}, rw.out.Len())
		if n, err := parseHello(b); err == nil {
			require.Len(t, b, authHelloLen)
			require.Len(t, n, authNonceLen)
		}
		if n, m, err := parseReply(b); err == nil {
			require.Len(t, b, authReplyLen)
			require.Len(t, n, authNonceLen)
			require.Len(t, m, authProofLen)
		}
		// What the dialer side makes of it as an answer: refused too.
		drw := &rwFuzz{in: bytes.NewReader(b)}
		require.ErrorIs(t, dialHandshake(drw, k), ErrRaftAuth)
	})
}

// One source address cannot hold more than authPerPeer handshakes open:
// the next connection is refused at once, and once the stalled ones go
// the cluster works as before.
func TestRaftPortBoundsHandshakesPerSource(t *testing.T) {
	c := newAuthCluster(t)
	c.healthy("start")
	var stalled []net.Conn
	for range authPerPeer {
		stalled = append(stalled, rawConn(t, c.addrs[0]))
	}
	before := c.nodes[0].RaftRefused()
	// The stalled ones may be the node's handshakes or wait in its accept
	// loop; one more than the bound is refused once they all are in.
	require.Eventually(t, func() bool {
		nc := rawConn(t, c.addrs[0])
		_ = nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := nc.Read(make([]byte, 1))
		var ne net.Error
		refused := err != nil && !(errors.As(err, &ne) && ne.Timeout())
		_ = nc.Close()
		return refused
	}, 20*time.Second, time.Millisecond, "the connection over the bound is closed at once")
	require.Greater(t, c.nodes[0].RaftRefused(), before)
	for _, nc := range stalled {
		_ = nc.Close()
	}
	c.healthy("after")
}
