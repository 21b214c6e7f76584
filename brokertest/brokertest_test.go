package brokertest_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/brokertest"
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

var start = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

func req(topic string) pop.Request {
	return pop.Request{Group: "g", Topic: topic, ClientID: "c1", Max: 32, Invisible: time.Minute}
}

func TestNewClosesTheBrokerWhenTheTestEnds(t *testing.T) {
	var b *brokercore.Broker
	t.Run("inner", func(t *testing.T) {
		b = brokertest.New(t)
		require.NoError(t, b.Store().Append(&store.Message{Topic: "t", Body: []byte("x")}))
	})
	assert.ErrorIs(t, b.Store().Append(&store.Message{Topic: "t"}), store.ErrClosed)
	_, err := b.Pop().Pop(context.Background(), req("t"))
	assert.ErrorIs(t, err, pop.ErrClosed)
}

func TestWithClockDrivesEveryPiece(t *testing.T) {
	clk := brokertest.NewClock(start)
	b := brokertest.New(t, brokertest.WithClock(clk))
	m := &store.Message{Topic: "t", Body: []byte("x")}
	require.NoError(t, b.Store().Append(m))
	assert.True(t, m.StoredAt.Equal(start))

	d, err := b.Scheduler().Delay(&store.Message{Topic: "t", Body: []byte("later")}, 1)
	require.NoError(t, err)
	require.NoError(t, b.Store().Append(d))
	clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return b.Store().MaxOffset("t", 0) == 2 }, 10*time.Second, time.Millisecond)
}

func TestWithDirReopensTheSameData(t *testing.T) {
	dir := t.TempDir()
	t.Run("first", func(t *testing.T) {
		b := brokertest.New(t, brokertest.WithDir(dir), brokertest.WithSync(store.SyncGroup))
		require.NoError(t, b.Store().Append(&store.Message{Topic: "t", Body: []byte("x")}))
		require.NoError(t, b.Offsets().Commit("g", "t", 0, 1))
	})
	b := brokertest.New(t, brokertest.WithDir(dir))
	assert.Equal(t, int64(1), b.Store().MaxOffset("t", 0))
	off, ok := b.Offsets().Committed("g", "t", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(1), off)
}

func TestWithOptionsKeepsTheHostsFields(t *testing.T) {
	var o brokercore.Options
	o.Pop.MaxAttempts = 1
	o.Schedule.Levels = "3s"
	b := brokertest.New(t, brokertest.WithOptions(o))
	assert.Equal(t, []time.Duration{3 * time.Second}, b.Scheduler().Levels())
}

// The library under testing/synctest: the scheduler, long polling and pop's
// invisible times all run on the bubble's fake time, with no real waiting.
func TestBrokerRunsUnderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var o brokercore.Options
		o.Schedule.Tick = schedule.DefaultTick // every fake tick costs real CPU
		b := brokertest.New(t, brokertest.WithOptions(o))
		begin := time.Now()
		d, err := b.Scheduler().Delay(&store.Message{Topic: "t", Body: []byte("later")}, 2) // 5 s
		require.NoError(t, err)
		require.NoError(t, b.Store().Append(d))

		// A long poll that the scheduler's delivery wakes.
		r := req("t")
		r.Poll = time.Minute
		r.Invisible = 10 * time.Second
		res, err := b.Pop().Pop(context.Background(), r)
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		waited := time.Since(begin)
		assert.GreaterOrEqual(t, waited, 5*time.Second, "never before its delay")
		assert.Less(t, waited, 6*time.Second)

		// Unacked, it comes back once its invisible time is over.
		time.Sleep(11 * time.Second)
		r.Poll = 0
		res, err = b.Pop().Pop(context.Background(), r)
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		assert.Equal(t, 2, res.Messages[0].Attempts)
		require.NoError(t, b.Pop().Ack(res.Messages[0].Handle))

		// Housekeeping runs on fake time too.
		_, err = b.Consumers().RegisterWithoutSub("g", consumerClient())
		require.NoError(t, err)
		time.Sleep(consumer.DefaultChannelExpiry + brokercore.DefaultConsumerScanEvery)
		synctest.Wait()
		assert.Equal(t, uint64(1), b.Consumers().Stats().Expired)
	})
}

// The body of ExampleNew, run.
func TestExampleNewRedelivers(t *testing.T) {
	clk := brokertest.NewClock(start)
	b := brokertest.New(t, brokertest.WithClock(clk))
	require.NoError(t, b.Store().Append(&store.Message{Topic: "orders", Body: []byte("o1")}))
	r := pop.Request{Group: "billing", Topic: "orders", ClientID: "w1", Max: 1, Invisible: time.Minute}
	first, err := b.Pop().Pop(context.Background(), r)
	require.NoError(t, err)
	require.Len(t, first.Messages, 1)
	clk.Advance(time.Minute + time.Second)
	again, err := b.Pop().Pop(context.Background(), r)
	require.NoError(t, err)
	require.Len(t, again.Messages, 1)
	assert.Equal(t, 2, again.Messages[0].Attempts)
}

// TestFreeAddrPicksDistinctBindablePortsBelowTheEphemeralRange: a port
// from FreeAddr binds, is never handed out twice, and lies below the range
// outgoing connections draw their local ports from.
func TestFreeAddrPicksDistinctBindablePortsBelowTheEphemeralRange(t *testing.T) {
	_, hi := brokertest.FreeAddrRange()
	seen := map[string]bool{}
	for range 50 {
		addr := brokertest.FreeAddr(t)
		require.False(t, seen[addr], "handed out twice: %s", addr)
		seen[addr] = true
		_, p, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		require.Less(t, port, hi)
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err, "FreeAddr's port must bind")
		require.NoError(t, l.Close())
	}
}
