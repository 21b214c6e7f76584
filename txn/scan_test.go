package txn

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingLog counts the records a Manager reads.
type countingLog struct {
	Log
	read atomic.Int64
}

func (c *countingLog) Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error) {
	msgs, err := c.Log.Read(topic, queueID, offset, max)
	c.read.Add(int64(len(msgs)))
	return msgs, err
}

// TestCheckRoundReadsOnlyTheDueHalvesWhateverTheLogHolds: with 300
// closed transactions in the log and 3 open ones, a check round reads the
// 3 due halves and nothing else, and a restart with the progress file
// reads from the oldest open (or remembered) half, not from the start.
func TestCheckRoundReadsOnlyTheDueHalvesWhateverTheLogHolds(t *testing.T) {
	r := newRig(t, Options{Remember: 10})
	for i := 0; i < 300; i++ {
		require.NoError(t, r.m.Commit(r.prepare("orders", itoa(i))))
	}
	var open []int64
	for i := 0; i < 3; i++ {
		open = append(open, r.prepare("orders", "open"+itoa(i)))
	}
	cl := &countingLog{Log: r.log}
	require.NoError(t, r.m.Close())
	m, err := New(cl, r.opts)
	require.NoError(t, err)
	defer m.Close()
	assert.LessOrEqual(t, cl.read.Load(), int64(10+3+2*(10+3)), "the rebuild reads from the oldest remembered half, not the 300")
	assert.Equal(t, 3, m.Stats().Pending)

	cl.read.Store(0)
	r.clk.Advance(time.Hour)
	n, err := m.CheckNow()
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, int64(3), cl.read.Load(), "one read per due half")
	cl.read.Store(0)
	n, _ = m.CheckNow()
	assert.Zero(t, n)
	assert.Zero(t, cl.read.Load(), "a round with nothing due reads nothing")
	for _, id := range open {
		require.NoError(t, m.Rollback(id))
	}
}

// BenchmarkCheckRoundNothingDue is one check round with 100 open and 900
// closed transactions in the log, none due: the round looks at the heap's
// top only (O(due) in general, never O(log)).
func BenchmarkCheckRoundNothingDue(b *testing.B) {
	log := benchStore(b)
	m, err := New(log, Options{})
	require.NoError(b, err)
	defer m.Close()
	for i := 0; i < 1000; i++ {
		h, err := m.Prepare(&store.Message{Topic: "orders", Body: []byte("x")}, "pg")
		require.NoError(b, err)
		if i%10 != 0 {
			require.NoError(b, m.Commit(h.QueueOffset))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.CheckNow(); err != nil {
			b.Fatal(err)
		}
	}
}
