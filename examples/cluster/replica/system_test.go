package replica

import (
	"strings"
	"testing"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// ProduceSystem writes reserved topics through raft, to every replica;
// clients' topics, bad names and oversize messages are refused before
// anything is proposed, and followers refuse.
func TestProduceSystemWritesReservedTopicsOnly(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	const sys = "RMQ_SYS_HOST_STATE"
	_, err := l.Produce(msg(sys, 0, "x"))
	require.ErrorIs(t, err, ErrInvalid, "clients may not write it")
	out, err := l.ProduceSystem(msg(sys, 0, "a"), msg(sys, 0, "b"))
	require.NoError(t, err)
	require.Equal(t, int64(1), out[1].QueueOffset)
	before := l.fsm.lastIndex()
	for name, m := range map[string]*store.Message{
		"client topic": msg("orders", 0, "x"),
		"bad name":     msg("RMQ_SYS_a/b", 0, "x"),
		"long name":    msg("RMQ_SYS_"+strings.Repeat("x", 300), 0, "x"),
		"oversize":     {Topic: sys, Body: []byte("x"), Keys: []string{strings.Repeat("k", 2<<20)}},
		"nil":          nil,
	} {
		_, err := l.ProduceSystem(m)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
	require.Equal(t, before, l.fsm.lastIndex(), "nothing was proposed")
	for _, n := range c.live() {
		if n != l {
			_, err := n.ProduceSystem(msg(sys, 0, "c"))
			require.ErrorIs(t, err, ErrNotLeader)
		}
	}
	c.waitConverged()
	for _, n := range c.live() {
		require.Equal(t, map[string]int{"a": 1, "b": 1}, bodiesIn(t, n, sys, 0), "node %s", n.ID())
	}
}
