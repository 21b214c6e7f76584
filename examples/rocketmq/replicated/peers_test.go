package replicated

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A follower's copy of the leader's contacts counts for relayExpiry, then
// is no answer (routes list every peer again).
func TestLivePeersExpire(t *testing.T) {
	now := time.Unix(1000, 0)
	l := livePeers{now: func() time.Time { return now }}
	require.Nil(t, l.fresh(), "nothing asked yet")
	l.set([]string{"n1", "n3"})
	require.Equal(t, map[string]bool{"n1": true, "n3": true}, l.fresh())
	now = now.Add(relayExpiry)
	require.NotNil(t, l.fresh(), "at the expiry still fresh")
	now = now.Add(time.Nanosecond)
	require.Nil(t, l.fresh(), "stale")
	l.set(nil)
	require.Equal(t, map[string]bool{}, l.fresh(), "an answer of nobody is an answer")
}
