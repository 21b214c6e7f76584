package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKeyPropertiesAreIndexedOnEveryNode: Config.KeyProperties reaches the
// local store's key index, so a message is found by such a property (a
// RocketMQ message id) on every node, the leader and the followers.
func TestKeyPropertiesAreIndexedOnEveryNode(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.KeyProperties = []string{"UNIQ_KEY"} })
	m := msg("kp", 0, "x")
	m.Properties = map[string]string{"UNIQ_KEY": "id-1"}
	_, err := c.leader().Produce(m)
	require.NoError(t, err)
	c.waitConverged()
	for _, n := range c.live() {
		found, err := n.Store().LookupKey("kp", "id-1", time.Time{}, time.Time{}, 10)
		require.NoError(t, err)
		require.Len(t, found, 1, "node %s", n.cfg.ID)
		require.Equal(t, "x", string(found[0].Body))
	}
}
