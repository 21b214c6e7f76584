package replicated

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/stretchr/testify/require"
)

// keysIn is every key of topic's messages on a node (every queue).
func keysIn(t *testing.T, s *Server, topic string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	st := s.Node().Store()
	for q := range DefaultQueueNums {
		msgs, err := st.Read(topic, q, st.MinOffset(topic, q), 1000)
		require.NoError(t, err)
		for _, m := range msgs {
			for _, k := range m.Keys {
				out[k] = true
			}
		}
	}
	return out
}

// The v5 Producer's Recall of a timer message, through a follower (which
// forwards it to the leader, whose replicated scheduler cancels it): the
// recalled message is never delivered, on any node, across a leader
// change after the recall. A timer due after it, sent once the new leader
// leads, is delivered: the scheduler delivers in time order, so the
// recalled one would have been delivered before it.
func TestV5RecallThroughAFollowerHoldsAcrossALeaderChange(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(30 * time.Second)
	f := (l + 1) % 3
	var st starter
	p := newV5Producer(t, &st, []string{c.nodes[f].GRPCAddr()})
	st.run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	at := time.Now().Add(3 * time.Second)
	m := &rmq.Message{Topic: v5Topic, Body: []byte("recalled")}
	m.SetKeys("recalled")
	m.SetDelayTimestamp(at)
	r, err := p.Send(ctx, m)
	require.NoError(t, err)
	require.Len(t, r, 1)
	require.NotEmpty(t, r[0].RecallHandle, "a timer message's send answers a recall handle")
	id, err := p.Recall(ctx, v5Topic, r[0].RecallHandle)
	require.NoError(t, err)
	require.Equal(t, r[0].MessageID, id)
	_, err = p.Recall(ctx, v5Topic, r[0].RecallHandle)
	require.NoError(t, err, "recalling twice is OK, as Apache's")

	c.stop(l)
	c.leader(30 * time.Second)
	require.NoError(t, v5Send(p, v5Topic, "after", "", at.Add(time.Second), time.Now().Add(20*time.Second)))
	for i, s := range c.nodes {
		if c.closed[i] {
			continue
		}
		require.Eventually(t, func() bool { return keysIn(t, s, v5Topic)["after"] }, 30*time.Second, 20*time.Millisecond,
			"node %d: the later timer is delivered", i)
		require.False(t, keysIn(t, s, v5Topic)["recalled"], "node %d: the recalled timer was delivered", i)
	}
}
