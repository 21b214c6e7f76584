package replicated

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/authadmin"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

const (
	testClusterSecret = "replicated-acl-cluster-secret"
	replACL           = `{"users":[{"accessKey":"admin","secretKey":"adm1n-secret","superUser":true},
	    {"accessKey":"app","secretKey":"app-secret"},{"accessKey":"reader","secretKey":"r3ader-secret"}],
	  "rules":[{"user":"app","resources":["Topic:orders","Group:*"],"actions":["Pub","Sub"],"decision":"Allow"},
	    {"user":"reader","resources":["Topic:orders","Group:*"],"actions":["Sub"],"decision":"Allow"}]}`
)

// withACL gives a node the cluster secret and its own copy of replACL.
func withACL(t testing.TB) func(*Config) { return withACLDoc(t, replACL) }

// withACLDoc is withACL with another ACL file.
func withACLDoc(t testing.TB, doc string) func(*Config) {
	return func(cfg *Config) {
		path := filepath.Join(cfg.Dir, "acl.json")
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
		az, err := acl.Open(path, acl.Options{})
		require.NoError(t, err)
		cfg.ACL, cfg.ACLFile, cfg.ClusterSecret = az, path, []byte(testClusterSecret)
	}
}

// signed signs cmd as ak with sk, as the official clients do.
func signed(cmd *wire.Command, ak, sk string) *wire.Command {
	cmd.ExtFields[acl.FieldAccessKey] = ak
	cmd.ExtFields[acl.FieldSignature] = acl.SignRemoting(sk, cmd.ExtFields, cmd.Body)
	return cmd
}

func mustCall(t *testing.T, addr string, cmd *wire.Command) *wire.Command {
	t.Helper()
	resp, err := call(addr, cmd)
	require.NoError(t, err)
	return resp
}

// stored counts the messages of topic queue 0 on every node.
func (c *cluster) stored(topic string) []int64 {
	var n []int64
	for _, s := range c.nodes {
		n = append(n, s.Node().Store().MaxOffset(topic, 0))
	}
	return n
}

func TestACLNeedsAClusterSecret(t *testing.T) {
	az, err := acl.New(nil, acl.Options{})
	require.NoError(t, err)
	_, err = Start(Config{Dir: t.TempDir(), ID: "n1", RaftAddr: "127.0.0.1:0", ACL: az})
	require.ErrorContains(t, err, "cluster secret")
}

// Sends through a follower are checked by the leader with the client's own
// signature: no credentials, a wrong secret, an unknown key and a topic the
// user may not write are refused NO_PERMISSION and store nothing anywhere;
// an allowed one is stored. What a node serves itself (routes on its name
// server) it checks itself.
func TestACLSendsThroughAFollowerAreChecked(t *testing.T) {
	c := startCluster(t, 3, withACL(t))
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	for _, tc := range []struct {
		name string
		cmd  *wire.Command
	}{
		{"unsigned", sendCmd("orders", "x")},
		{"wrong secret", signed(sendCmd("orders", "x"), "app", "not-the-secret")},
		{"unknown key", signed(sendCmd("orders", "x"), "ghost", "app-secret")},
		{"topic not allowed", signed(sendCmd("payments", "x"), "app", "app-secret")},
	} {
		for _, s := range []*Server{f, c.nodes[l]} {
			resp := mustCall(t, s.BrokerAddr(), tc.cmd)
			require.Equal(t, wire.NoPermission, resp.Code, "%s at %s: %s", tc.name, s.Node().ID(), resp.Remark)
		}
	}
	resp := mustCall(t, f.BrokerAddr(), signed(sendCmd("orders", "allowed"), "app", "app-secret"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Eventually(t, func() bool {
		for _, n := range c.stored("orders") {
			if n != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "only the allowed send is stored, on every node: %v", c.stored("orders"))
	require.Equal(t, []int64{0, 0, 0}, c.stored("payments"))

	route := &wire.Command{Code: wire.CodeGetRouteInfoByTopic, Language: "GO", Version: 317, ExtFields: map[string]string{"topic": "orders"}}
	require.Equal(t, wire.NoPermission, mustCall(t, f.NameSrvAddr(), route).Code, "the follower's name server checks")
	route = &wire.Command{Code: wire.CodeGetRouteInfoByTopic, Language: "GO", Version: 317, ExtFields: map[string]string{"topic": "orders"}}
	require.Equal(t, wire.Success, mustCall(t, f.NameSrvAddr(), signed(route, "app", "app-secret")).Code)
}

// A client cannot claim "forwarded" status: a request carrying the
// forwarded field (signed by the client along with the rest, or added to
// a signed one, or a mark made with another key) is refused on every node
// and nothing is stored.
func TestACLForwardedMarkCannotBeForged(t *testing.T) {
	c := startCluster(t, 3, withACL(t))
	l := c.leader(30 * time.Second)
	forge := func(mark string, signAfter bool) *wire.Command {
		cmd := sendCmd("orders", "forged")
		if signAfter {
			cmd.ExtFields[forwardedField] = mark
			return signed(cmd, "app", "app-secret")
		}
		signed(cmd, "app", "app-secret")
		cmd.ExtFields[forwardedField] = mark
		return cmd
	}
	otherKey := markForward([]byte("some other key of the cluster"), "127.0.0.1:1", signed(sendCmd("orders", "forged"), "app", "app-secret"))
	for _, cmd := range []*wire.Command{
		forge("1", true), forge("1", false),
		forge("v1 127.0.0.1:1 00", false),
		otherKey,
	} {
		for i, s := range c.nodes {
			resp := mustCall(t, s.BrokerAddr(), cmd)
			require.Equal(t, wire.NoPermission, resp.Code, "node %d (leader %d): %s", i, l, resp.Remark)
		}
	}
	require.Equal(t, []int64{0, 0, 0}, c.stored("orders"))
	for _, s := range c.nodes {
		require.NotZero(t, s.gate.forged.Load(), "counted")
	}
}

// The marks bind the client address, the code and the signature.
func TestForwardMarkBindsTheRequest(t *testing.T) {
	key := []byte("k")
	req := signed(sendCmd("orders", "x"), "app", "app-secret")
	m := markForward(key, "10.1.2.3:4567", req)
	mark := m.ExtFields[forwardedField]
	addr, ok := verifyMark(key, mark, req)
	require.True(t, ok)
	require.Equal(t, "10.1.2.3:4567", addr.String())
	_, ok = verifyMark([]byte("other"), mark, req)
	require.False(t, ok, "another key")
	other := signed(sendCmd("orders", "y"), "app", "app-secret")
	_, ok = verifyMark(key, mark, other)
	require.False(t, ok, "another request")
	other = signed(sendCmd("orders", "x"), "app", "app-secret")
	other.Code = wire.CodeSendMessageV2
	_, ok = verifyMark(key, mark, other)
	require.False(t, ok, "another code")
	for _, bad := range []string{"", "1", "v1 10.1.2.3:4567", "v2 10.1.2.3:4567 " + mark[len("v1 10.1.2.3:4567 "):],
		"v1 10.9.9.9:4567 " + mark[len("v1 10.1.2.3:4567 "):]} {
		_, ok = verifyMark(key, bad, req)
		require.False(t, ok, bad)
	}
}

func authCmd(code int16, ext map[string]string, body string) *wire.Command {
	if ext == nil {
		ext = map[string]string{}
	}
	cmd := &wire.Command{Code: code, Language: "JAVA", Version: 317, ExtFields: ext}
	if body != "" {
		cmd.Body = []byte(body)
	}
	return signed(cmd, "admin", "adm1n-secret")
}

// aclFileHas reports whether node s's ACL file names user.
func aclFileHas(t *testing.T, s *Server, user string) bool {
	cfg, err := acl.Load(s.cfg.ACLFile)
	require.NoError(t, err)
	_, ok := cfg.User(user)
	return ok
}

// The AUTH_* edits go through the admin log: a user created on the leader
// (and given a rule through a follower) can send through a follower at
// once, every node's ACL file gets it; deleted through a follower, it is
// refused at once everywhere the leader decides, and by every node once
// it applied the deletion.
func TestACLEditsAreReplicated(t *testing.T) {
	c := startCluster(t, 3, withACL(t))
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	leader := c.nodes[l]
	resp := mustCall(t, leader.BrokerAddr(), authCmd(authadmin.CodeCreateUser, map[string]string{"username": "bob"},
		`{"username":"bob","password":"b0b-secret"}`))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	resp = mustCall(t, f.BrokerAddr(), authCmd(authadmin.CodeCreateACL, map[string]string{"subject": "User:bob"},
		`{"subject":"User:bob","policies":[{"entries":[{"resource":"Topic:bobs","actions":["Pub"],"decision":"Allow"}]}]}`))
	require.Equal(t, wire.Success, resp.Code, "an edit sent to a follower: %s", resp.Remark)
	resp = mustCall(t, f.BrokerAddr(), signed(sendCmd("bobs", "hello"), "bob", "b0b-secret"))
	require.Equal(t, wire.Success, resp.Code, "the new user sends through a follower at once: %s", resp.Remark)
	for i, s := range c.nodes {
		require.Eventually(t, func() bool { return aclFileHas(t, s, "bob") }, 10*time.Second, 10*time.Millisecond, "node %d's file", i)
		require.Eventually(t, func() bool {
			_, err := s.cfg.ACL.Authorize("bob", acl.Topic("bobs"), acl.Pub, netip.MustParseAddr("127.0.0.1"))
			return err == nil
		},
			10*time.Second, 10*time.Millisecond, "node %d's rules", i)
	}
	// A user who is not allowed to edit is refused, and nothing changes.
	bad := signed(&wire.Command{Code: authadmin.CodeDeleteUser, Language: "JAVA", Version: 317,
		ExtFields: map[string]string{"username": "bob"}}, "app", "app-secret")
	require.Equal(t, wire.NoPermission, mustCall(t, f.BrokerAddr(), bad).Code)
	require.True(t, aclFileHas(t, leader, "bob"))

	resp = mustCall(t, f.BrokerAddr(), authCmd(authadmin.CodeDeleteUser, map[string]string{"username": "bob"}, ""))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	for _, s := range c.nodes {
		resp = mustCall(t, s.BrokerAddr(), signed(sendCmd("bobs", "after delete"), "bob", "b0b-secret"))
		require.Equal(t, wire.NoPermission, resp.Code, "a deleted user's send at %s: %s", s.Node().ID(), resp.Remark)
	}
	for i, s := range c.nodes {
		require.Eventually(t, func() bool { return !aclFileHas(t, s, "bob") }, 10*time.Second, 10*time.Millisecond, "node %d's file", i)
		// The file is written before the rules change (a failed write
		// changes nothing), so wait for the rules too.
		require.Eventually(t, func() bool {
			_, err := s.cfg.ACL.Authorize("bob", acl.Topic("bobs"), acl.Pub, netip.MustParseAddr("127.0.0.1"))
			return err != nil
		}, 10*time.Second, 10*time.Millisecond, "node %d's rules", i)
		route := signed(&wire.Command{Code: wire.CodeGetRouteInfoByTopic, Language: "GO", Version: 317,
			ExtFields: map[string]string{"topic": "bobs"}}, "bob", "b0b-secret")
		require.Equal(t, wire.NoPermission, mustCall(t, s.NameSrvAddr(), route).Code, "node %d serves a deleted user", i)
	}
	require.Equal(t, int64(1), leader.Node().Store().MaxOffset("bobs", 0), "only the allowed send")

	// Reads are every node's own: a follower lists the users.
	resp = mustCall(t, f.BrokerAddr(), authCmd(authadmin.CodeListUser, nil, ""))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.NotContains(t, string(resp.Body), "bob")
	require.Contains(t, string(resp.Body), "app")
}

// The leader decides a forwarded request from the client address the
// member's mark names, not from the member's connection: with a rule that
// allows only 10.0.0.0/8, a marked send naming a client in it is stored, one
// naming a client outside it is refused (and both come from 127.0.0.1).
func TestACLLeaderChecksTheForwardedClientAddress(t *testing.T) {
	c := startCluster(t, 3, withACLDoc(t, `{"users":[{"accessKey":"app","secretKey":"app-secret"}],
	  "rules":[{"user":"app","resources":["Topic:orders"],"actions":["Pub"],"decision":"Allow","sourceIps":["10.0.0.0/8"]}]}`))
	l := c.leader(30 * time.Second)
	leader := c.nodes[l]
	key := leader.gate.key
	in := markForward(key, "10.9.9.9:1234", signed(sendCmd("orders", "from 10.9.9.9"), "app", "app-secret"))
	resp := mustCall(t, leader.BrokerAddr(), in)
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	out := markForward(key, "192.168.1.1:1234", signed(sendCmd("orders", "from 192.168.1.1"), "app", "app-secret"))
	resp = mustCall(t, leader.BrokerAddr(), out)
	require.Equal(t, wire.NoPermission, resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "192.168.1.1")
	direct := signed(sendCmd("orders", "from 127.0.0.1"), "app", "app-secret")
	require.Equal(t, wire.NoPermission, mustCall(t, leader.BrokerAddr(), direct).Code, "the connection's own address")
	require.Equal(t, int64(1), leader.Node().Store().MaxOffset("orders", 0))
}

// An AUTH_* edit is decided when every node applies it, against the rules
// at its point of the admin log, not only by the node that received it: an
// edit checked while its editor may edit, logged after an edit that
// revokes that right (the revoke landed between the edit's check and its
// log entry), is refused on every node and changes nothing.
func TestACLEditIsDecidedWhereItLandsInTheLog(t *testing.T) {
	c := startCluster(t, 3, withACLDoc(t, `{"users":[{"accessKey":"admin","secretKey":"adm1n-secret","superUser":true},
	    {"accessKey":"ops","secretKey":"0ps-secret"}],
	  "rules":[{"user":"ops","resources":["*"],"actions":["Update","Get"],"decision":"Allow"}]}`))
	l := c.leader(30 * time.Second)
	leader := c.nodes[l]
	byOps := func(user string) *wire.Command {
		return signed(&wire.Command{Code: authadmin.CodeCreateUser, Language: "JAVA", Version: 317,
			ExtFields: map[string]string{"username": user}, Body: []byte(`{"username":"` + user + `","password":"pw-` + user + `"}`)},
			"ops", "0ps-secret")
	}
	resp := mustCall(t, leader.BrokerAddr(), byOps("carol"))
	require.Equal(t, wire.Success, resp.Code, "ops may edit: %s", resp.Remark)

	// The edit passes the receiving node's check now; the revoke is logged
	// before it (both straight into the admin log, in this order).
	edit := byOps("dave")
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	require.Nil(t, leader.gate.h.acl.Decide(client, edit), "checked when received")
	revoke := authCmd(authadmin.CodeDeleteACL, map[string]string{"subject": "User:ops"}, "")
	ctx := context.Background()
	resp = leader.tables.propose(ctx, leader.stop, revoke, "127.0.0.1:2")
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	resp = leader.tables.propose(ctx, leader.stop, edit, client.String())
	require.Equal(t, wire.NoPermission, resp.Code, "decided where it landed: %s", resp.Remark)

	marker := authCmd(authadmin.CodeCreateUser, map[string]string{"username": "erin"}, `{"username":"erin","password":"pw-erin"}`)
	require.Equal(t, wire.Success, mustCall(t, leader.BrokerAddr(), marker).Code)
	for i, s := range c.nodes {
		require.Eventually(t, func() bool { return aclFileHas(t, s, "erin") }, 10*time.Second, 10*time.Millisecond, "node %d applied the log", i)
		require.True(t, aclFileHas(t, s, "carol"), "node %d", i)
		require.False(t, aclFileHas(t, s, "dave"), "node %d applied the refused edit", i)
	}
}
