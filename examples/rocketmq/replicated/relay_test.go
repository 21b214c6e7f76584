package replicated

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
	"github.com/stretchr/testify/require"
)

// A follower's report of its producer groups lasts relayExpiry: one that
// stops reporting is asked nothing after that, and a newer report of the
// same follower replaces its groups.
func TestRelayReportsExpireWhenTheFollowerStopsReporting(t *testing.T) {
	now := time.Unix(1000, 0)
	g := relayRegistry{now: func() time.Time { return now }, ttl: relayExpiry}
	ids := func(group string) []string {
		var out []string
		for _, r := range g.pick(group) {
			out = append(out, r.ID)
		}
		return out
	}
	g.report(relayReport{ID: "n2", Addr: "a2", Groups: []string{"G", "H"}})
	now = now.Add(relayReportEvery)
	g.report(relayReport{ID: "n3", Addr: "a3", Groups: []string{"G"}})
	require.Equal(t, []string{"n3", "n2"}, ids("G"), "the freshest report first")
	require.Equal(t, []string{"n2"}, ids("H"))
	require.Empty(t, ids("other"))

	now = now.Add(relayExpiry - relayReportEvery) // n2's report is relayExpiry old
	require.Equal(t, []string{"n3"}, ids("G"), "n2 stopped reporting")
	require.Empty(t, ids("H"))
	g.report(relayReport{ID: "n3", Addr: "a3", Groups: []string{"H"}})
	require.Empty(t, ids("G"), "n3's producers of G left")
	require.Equal(t, []string{"n3"}, ids("H"))
	now = now.Add(relayExpiry)
	require.Empty(t, ids("H"))
	require.Empty(t, g.seen, "expired reports are forgotten")
}

// Only a member's relay requests count: a report or a check whose MAC is
// not the cluster key's is refused NO_PERMISSION and changes nothing; a
// member's report registers on the leader only.
func TestRelayRequestsNeedTheClusterKey(t *testing.T) {
	c := startCluster(t, 3, withACL(t)) // the relay passes the ACL gate
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	leader := c.nodes[l]
	member := leader.relay
	outsider := newRelay([]byte("not the cluster's secret, at all"), "x", "127.0.0.1:1", nil, nil, leader.log)
	rep := relayReport{ID: f.Node().ID(), Addr: f.BrokerAddr(), Groups: []string{"G"}}
	check := txn.Check{ID: 1, Group: "G", Message: &store.Message{Topic: "G", Body: []byte("b")}}

	for _, req := range []struct {
		addr string
		code int16
		v    any
	}{{leader.BrokerAddr(), codeRelayProducers, rep}, {f.BrokerAddr(), codeRelayCheck, check}} {
		cmd, err := outsider.request(req.code, req.v)
		require.NoError(t, err)
		require.Equal(t, wire.NoPermission, mustCall(t, req.addr, cmd).Code, "code %d", req.code)
	}
	cmd, err := member.request(codeRelayProducers, rep)
	require.NoError(t, err)
	tampered := *cmd
	tampered.Body, _ = json.Marshal(relayReport{ID: f.Node().ID(), Addr: "127.0.0.1:2", Groups: []string{"G"}})
	require.Equal(t, wire.NoPermission, mustCall(t, leader.BrokerAddr(), &tampered).Code, "the MAC covers the body")
	require.Empty(t, leader.relay.reg.pick("G"))

	// A member's key, but a server the cluster does not have, or another
	// address than the member's: checks would go where no member is.
	for _, bad := range []relayReport{{ID: "n9", Addr: "127.0.0.1:1", Groups: []string{"G"}},
		{ID: f.Node().ID(), Addr: "127.0.0.1:1", Groups: []string{"G"}}} {
		req, err := member.request(codeRelayProducers, bad)
		require.NoError(t, err)
		resp := mustCall(t, leader.BrokerAddr(), req)
		require.Equal(t, wire.SystemError, resp.Code, "%+v", bad)
		require.Contains(t, resp.Remark, "relay request refused")
	}
	require.Empty(t, leader.relay.reg.pick("G"))

	require.Equal(t, wire.ServiceNotAvailable, mustCall(t, f.BrokerAddr(), cmd).Code, "a follower registers nothing")
	require.Empty(t, f.relay.reg.pick("G"))
	require.Equal(t, wire.Success, mustCall(t, leader.BrokerAddr(), cmd).Code)
	require.Equal(t, []relayReport{rep}, leader.relay.reg.pick("G"))

	cmd, err = member.request(codeRelayCheck, check)
	require.NoError(t, err)
	resp := mustCall(t, f.BrokerAddr(), cmd)
	require.Equal(t, wire.SystemError, resp.Code, "a member's check, but no producer of G here")
	require.Contains(t, resp.Remark, "no producer")
}
