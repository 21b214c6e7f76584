package replica

import (
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

func configOf(t testing.TB, n *Node) []raft.Server {
	t.Helper()
	f := n.Raft().GetConfiguration()
	require.NoError(t, f.Error())
	return f.Configuration().Servers
}

func TestAddMemberRefusesDuplicateAndUnreachableLeavingConfigUnchanged(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	before := configOf(t, l)
	require.ErrorIs(t, l.AddMember("n2", "elsewhere", ""), ErrDuplicateMember)
	require.ErrorIs(t, l.AddMember("n9", "n2", ""), ErrDuplicateMember, "same address under another id")
	require.ErrorIs(t, l.AddMember("n9", "n9", ""), ErrUnreachable, "n9 is not running")
	require.ErrorIs(t, l.AddMember("", "x", ""), ErrInvalid)
	require.Equal(t, before, configOf(t, l))
	for _, n := range c.live() {
		if n != l {
			require.ErrorIs(t, n.AddMember("n9", "n9", ""), ErrNotLeader)
		}
	}
}

func TestRemoveMemberAndTheLastVoterIsRefused(t *testing.T) {
	c := newCluster(t, 3, steadyConfig)
	l := c.leader()
	require.ErrorIs(t, l.RemoveMember("n9"), ErrUnknownMember)
	var other string
	for _, n := range c.live() {
		if n != l {
			other = n.ID()
			break
		}
	}
	require.NoError(t, l.RemoveMember(other))
	require.Len(t, configOf(t, l), 2)

	one := newCluster(t, 1, nil)
	solo := one.leader()
	require.ErrorIs(t, solo.RemoveMember("n1"), ErrLastVoter)
	require.Len(t, configOf(t, solo), 1)
	_, err := solo.Produce(msg("t", 0, "still works"))
	require.NoError(t, err)
}

func TestNodeRefusesAnotherNodesOrClustersDataDir(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	_, err := l.Produce(msg("t", 0, "x"))
	require.NoError(t, err)
	c.waitConverged()
	cluster := l.Status().Cluster
	require.NotEmpty(t, cluster)
	c.kill("n3")

	// n3's directory under another node id.
	cfg := c.config("n3", false)
	cfg.ID = "n7"
	_, err = Open(cfg)
	require.ErrorIs(t, err, ErrForeignDataDir)

	// n3's directory when another cluster is expected.
	cfg = c.config("n3", false)
	cfg.ClusterID = "some-other-cluster"
	_, err = Open(cfg)
	require.ErrorIs(t, err, ErrForeignDataDir)

	// The right cluster id starts it.
	cfg = c.config("n3", false)
	cfg.ClusterID = cluster
	n, err := Open(cfg)
	require.NoError(t, err)
	c.mu.Lock()
	c.nodes["n3"] = n
	c.mu.Unlock()
	c.requireIdentical()
}
