package replica

import (
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/cluster/internal/testkit"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// A message given back goes through the leader's replicated scheduler to
// the group's retry topic (one delay level more per reconsume), and past
// the reconsume limit to its dead-letter topic; both reach every replica,
// and the retry pending in the scheduler survives a leader change. Produce
// still refuses both topics to clients.
func TestSendBackRetriesThenDeadLetters(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
	c := newCluster(t, 3, func(cfg *Config) { cfg.Now = clock.Now; cfg.Levels = "1s 1s 1s 1s 1s 1s" })
	l := c.leader()
	const group = "g"
	orig := &store.Message{Topic: "orders", Body: []byte("poison"), Properties: map[string]string{brokercore.PropUniqKey: "id-1"}}
	_, err := l.Produce(orig)
	require.NoError(t, err)

	_, err = l.Produce(&store.Message{Topic: brokercore.RetryTopic(group), Body: []byte("x")})
	require.ErrorIs(t, err, ErrInvalid, "a client may not write the retry topic")

	// First give-back: to the scheduler, then (due after level 3 = 1 s) to
	// %RETRY%g, with one reconsume counted.
	d, err := l.SendBack(orig, group, 0, 2)
	require.NoError(t, err)
	require.NotEqual(t, brokercore.RetryTopic(group), d.Topic, "the retry waits in the scheduler first")
	require.Zero(t, l.Store().MaxOffset(brokercore.RetryTopic(group), 0))

	// The retry is due on whichever node leads when it is: change leaders
	// before it comes due.
	c.kill(l.ID())
	l = c.leader()
	clock.Advance(2 * time.Second)
	retry := waitRead(t, l, brokercore.RetryTopic(group), 0)
	require.Equal(t, 1, retry.ReconsumeTimes)
	require.Equal(t, "orders", retry.Properties[brokercore.PropRetryTopic])
	require.Equal(t, "id-1", retry.Properties[brokercore.PropOriginMessageID])
	require.Equal(t, "poison", string(retry.Body))

	_, err = l.SendBack(retry, group, 0, 2)
	require.NoError(t, err)
	clock.Advance(2 * time.Second)
	retry2 := waitRead(t, l, brokercore.RetryTopic(group), 1)
	require.Equal(t, 2, retry2.ReconsumeTimes)

	// Reconsumed twice: the limit of 2 sends it to the dead letters at once.
	dl, err := l.SendBack(retry2, group, 0, 2)
	require.NoError(t, err)
	require.Equal(t, brokercore.DeadLetterTopic(group), dl.Topic)
	require.Equal(t, 3, dl.ReconsumeTimes)
	c.waitConverged()
	for _, n := range c.live() {
		require.Equal(t, int64(1), n.Store().MaxOffset(brokercore.DeadLetterTopic(group), 0), "node %s", n.ID())
		require.Equal(t, int64(2), n.Store().MaxOffset(brokercore.RetryTopic(group), 0), "node %s", n.ID())
	}
	c.requireIdentical()
}

// A send-back is the leader's; bad input is refused before anything is
// proposed.
func TestSendBackRefusals(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	m := &store.Message{Topic: "orders", Body: []byte("b")}
	for _, n := range c.live() {
		if n != l {
			_, err := n.SendBack(m, "g", 0, 2)
			require.ErrorIs(t, err, ErrNotLeader)
		}
	}
	before := l.fsm.lastIndex()
	for name, bad := range map[string]func() error{
		"nil message": func() error { _, err := l.SendBack(nil, "g", 0, 2); return err },
		"empty group": func() error { _, err := l.SendBack(m, "", 0, 2); return err },
		"long group":  func() error { _, err := l.SendBack(m, strings.Repeat("g", brokercore.MaxGroupLen+1), 0, 2); return err },
		"bad group":   func() error { _, err := l.SendBack(m, "g/../x", 0, 2); return err },
		"oversize key": func() error {
			_, err := l.SendBack(&store.Message{Topic: "orders", Body: []byte("b"), Keys: []string{strings.Repeat("k", 2<<20)}}, "g", -1, 2)
			return err
		},
	} {
		require.ErrorIs(t, bad(), ErrInvalid, name)
	}
	require.Equal(t, before, l.fsm.lastIndex(), "nothing was proposed")
}

// waitRead waits until topic/0 holds offset off on n and returns it.
func waitRead(t *testing.T, n *Node, topic string, off int64) *store.Message {
	t.Helper()
	var m *store.Message
	require.Eventually(t, func() bool {
		msgs, err := n.Read(topic, 0, off, 1)
		if err != nil || len(msgs) == 0 {
			return false
		}
		m = msgs[0]
		return true
	}, 15*time.Second, 5*time.Millisecond, "%s/0@%d never arrived", topic, off)
	return m
}
