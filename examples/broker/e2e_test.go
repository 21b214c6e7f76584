package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (c *apiClient) mustPop(t *testing.T, in popIn) popOut {
	t.Helper()
	var res popOut
	require.NoError(t, c.call(t.Context(), "POST", "/v1/pop", in, &res))
	return res
}

func (c *apiClient) mustAck(t *testing.T, handles ...string) {
	t.Helper()
	for _, h := range handles {
		require.NoError(t, c.call(t.Context(), "POST", "/v1/ack", ackIn{Handle: h}, nil))
	}
}

func (c *apiClient) offset(t *testing.T, group, topic string, q int) offsetOut {
	t.Helper()
	var o offsetOut
	require.NoError(t, c.call(t.Context(), "GET", fmt.Sprintf("/v1/offsets?group=%s&topic=%s&queueId=%d", group, topic, q), nil, &o))
	return o
}

func statusOf(t *testing.T, err error) int {
	t.Helper()
	var ae *apiError
	require.ErrorAs(t, err, &ae)
	return ae.Status
}

// TestEndToEndRestartReturnsNothingAckedAndLosesNothingUnacked drives every
// endpoint through a real HTTP client against a broker on a loopback port,
// restarts the broker on the same data directory in the middle, and checks
// the at-least-once promise across it: every message not acked is
// delivered again, nothing below the committed offset comes back, and the
// delayed message is delivered exactly once.
func TestEndToEndRestartReturnsNothingAckedAndLosesNothingUnacked(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock()
	tb := startBroker(t, dir, clock)
	c, _ := tb.client(t)
	ctx := t.Context()
	const topic, group = "orders", "billing"
	q0 := 0

	// ---- produce: a batch of 10 on queue 0, a binary message on queue 1,
	// a delayed message on queue 0.
	var batch batchIn
	for i := range 10 {
		batch.Messages = append(batch.Messages, messageIn{
			Topic: topic, Tags: "created", Keys: []string{fmt.Sprintf("order-%d", i)},
			Properties: map[string]string{"n": fmt.Sprint(i)}, Body: ptr(fmt.Sprintf("m%d", i)),
		})
	}
	var bout batchOut
	require.NoError(t, c.call(ctx, "POST", "/v1/messages/batch", batch, &bout))
	require.Len(t, bout.Messages, 10)
	for i, p := range bout.Messages {
		assert.Equal(t, int64(i), *p.QueueOffset)
	}
	var bin produced
	require.NoError(t, c.call(ctx, "POST", "/v1/messages", messageIn{Topic: topic, QueueID: 1, BodyBase64: ptr("AP8A/w==")}, &bin))
	assert.Equal(t, int64(0), *bin.QueueOffset)
	var late produced
	require.NoError(t, c.call(ctx, "POST", "/v1/messages", messageIn{Topic: topic, Body: ptr("late"), DelayLevel: 1}, &late))
	require.NotNil(t, late.DeliverAt)
	assert.Nil(t, late.QueueOffset, "a delayed message has no offset in its topic yet")
	assert.Equal(t, late.StoredAt.Add(time.Second), *late.DeliverAt)

	// ---- pop all ten from queue 0; keys, tags, properties survive.
	res := c.mustPop(t, popIn{Group: group, Topic: topic, ClientID: "c1", QueueID: &q0, Max: 32, Invisible: "1m"})
	require.Len(t, res.Messages, 10)
	for i, d := range res.Messages {
		assert.Equal(t, int64(i), d.QueueOffset)
		assert.Equal(t, fmt.Sprintf("m%d", i), *d.Body)
		assert.Equal(t, []string{fmt.Sprintf("order-%d", i)}, d.Keys)
		assert.Equal(t, "created", d.Tags)
		assert.Equal(t, fmt.Sprint(i), d.Properties["n"])
		assert.Equal(t, 1, d.Attempts)
	}
	assert.Equal(t, "1m0s", res.Invisible)

	// ---- ack 0..3 (0 alone, 1..3 in one batch request): the committed
	// offset follows the lowest unacked.
	c.mustAck(t, res.Messages[0].Handle)
	var acks ackBatchOut
	require.NoError(t, c.call(ctx, "POST", "/v1/ack", ackIn{Handles: []string{
		res.Messages[1].Handle, res.Messages[2].Handle, "garbage", res.Messages[3].Handle, res.Messages[0].Handle,
	}}, &acks))
	require.Len(t, acks.Results, 5)
	for i, want := range []string{"", "", "bad_handle", "", "stale_handle"} {
		assert.Equal(t, want, acks.Results[i].Code, i)
		assert.Equal(t, want == "", acks.Results[i].Acked, i)
	}
	off := c.offset(t, group, topic, 0)
	require.NotNil(t, off.Committed)
	assert.Equal(t, int64(4), *off.Committed)
	assert.Equal(t, int64(10), off.MaxOffset)
	assert.Equal(t, int64(6), off.Lag)
	assert.Equal(t, http.StatusConflict, statusOf(t, c.call(ctx, "POST", "/v1/ack", ackIn{Handle: res.Messages[0].Handle}, nil)))
	assert.Equal(t, http.StatusNotFound, statusOf(t, c.call(ctx, "POST", "/v1/ack", ackIn{Handle: "garbage"}, nil)))

	// ---- change-invisible: m4 made visible again (clamped to pop's 1 s
	// minimum) comes back with attempt 2; its old handle is stale.
	var ch changeOut
	require.NoError(t, c.call(ctx, "POST", "/v1/change-invisible", changeIn{Handle: res.Messages[4].Handle, Invisible: "0s"}, &ch))
	assert.NotEqual(t, res.Messages[4].Handle, ch.Handle)
	assert.Equal(t, http.StatusConflict, statusOf(t, c.call(ctx, "POST", "/v1/ack", ackIn{Handle: res.Messages[4].Handle}, nil)))
	clock.Advance(2 * time.Second) // also makes the delayed message due
	again := c.mustPop(t, popIn{Group: group, Topic: topic, ClientID: "c1", QueueID: &q0, Max: 1, Invisible: "1m", Poll: "5s"})
	require.Len(t, again.Messages, 1)
	assert.Equal(t, int64(4), again.Messages[0].QueueOffset)
	assert.Equal(t, 2, again.Messages[0].Attempts)

	// ---- long poll: the delayed message arrives through the scheduler.
	got := c.mustPop(t, popIn{Group: group, Topic: topic, ClientID: "c1", QueueID: &q0, Max: 4, Invisible: "1m", Poll: "10s"})
	require.Len(t, got.Messages, 1)
	assert.Equal(t, "late", *got.Messages[0].Body)
	assert.Equal(t, int64(10), got.Messages[0].QueueOffset)
	assert.Equal(t, topic, got.Messages[0].Topic, "delivered to its real topic")

	// ---- a long poll ends when its client goes away.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := c.call(short, "POST", "/v1/pop", popIn{Group: "idle", Topic: "empty-topic", ClientID: "c9", Poll: "20s"}, nil)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool {
		var st statsOut
		return c.call(ctx, "GET", "/v1/stats", nil, &st) == nil && st.HTTP.LongPolls == 0
	}, 5*time.Second, 5*time.Millisecond, "the abandoned long poll still waits")

	// Two more messages that nobody pops before the restart.
	require.NoError(t, c.call(ctx, "POST", "/v1/messages/batch", batchIn{Messages: []messageIn{
		{Topic: topic, Body: ptr("m11")}, {Topic: topic, Body: ptr("m12")},
	}}, nil))

	// ---- FIFO with attemptId reentry on another topic.
	fifoTopic := "fifo"
	require.NoError(t, c.call(ctx, "POST", "/v1/messages/batch", batchIn{Messages: []messageIn{
		{Topic: fifoTopic, Body: ptr("f0")}, {Topic: fifoTopic, Body: ptr("f1")}, {Topic: fifoTopic, Body: ptr("f2")},
	}}, nil))
	fifo := func(attempt string) popOut {
		return c.mustPop(t, popIn{Group: group, Topic: fifoTopic, ClientID: "c2", QueueID: &q0, Max: 2, Invisible: "30s", FIFO: true, AttemptID: attempt})
	}
	f1 := fifo("a1")
	require.Len(t, f1.Messages, 2)
	f1again := fifo("a1")
	require.Len(t, f1again.Messages, 2)
	for i := range 2 {
		assert.Equal(t, f1.Messages[i].QueueOffset, f1again.Messages[i].QueueOffset)
		assert.Equal(t, 1, f1again.Messages[i].Attempts, "a reentry counts no attempt")
		assert.NotEqual(t, f1.Messages[i].Handle, f1again.Messages[i].Handle)
	}
	assert.Equal(t, http.StatusConflict, statusOf(t, c.call(ctx, "POST", "/v1/ack", ackIn{Handle: f1.Messages[0].Handle}, nil)))
	assert.Empty(t, fifo("a2").Messages, "the queue is blocked while the batch is unacked")
	c.mustAck(t, f1again.Messages[0].Handle, f1again.Messages[1].Handle)
	f2 := fifo("a2")
	require.Len(t, f2.Messages, 1)
	assert.Equal(t, "f2", *f2.Messages[0].Body)
	c.mustAck(t, f2.Messages[0].Handle)

	// ---- queue locks.
	qa := queueJSON{Topic: topic, QueueID: 0}
	qb := queueJSON{Topic: topic, QueueID: 1}
	var lo lockOut
	require.NoError(t, c.call(ctx, "POST", "/v1/lock", lockIn{Group: group, ClientID: "c1", Queue: &qa}, &lo))
	require.True(t, lo.Locked)
	token := lo.Lease.Token
	require.NoError(t, c.call(ctx, "POST", "/v1/lock", lockIn{Group: group, ClientID: "c2", Queue: &qa}, &lo))
	assert.False(t, lo.Locked)
	require.NotNil(t, lo.Holder)
	assert.Equal(t, "c1", lo.Holder.ClientID)
	var lb lockBatchOut
	require.NoError(t, c.call(ctx, "POST", "/v1/lock-batch", lockIn{Group: group, ClientID: "c2", Queues: []queueJSON{qa, qb}}, &lb))
	assert.Equal(t, []queueJSON{{Topic: topic, Broker: DefaultName, QueueID: 1}}, lb.Locked)
	require.NoError(t, c.call(ctx, "GET", "/v1/lock?group="+group+"&topic="+topic+"&queueId=1", nil, &lo))
	assert.True(t, lo.Locked)
	assert.Equal(t, "c2", lo.Holder.ClientID)
	var un map[string]any
	require.NoError(t, c.call(ctx, "POST", "/v1/unlock", lockIn{Group: group, ClientID: "c1", Queue: &qa}, &un))
	assert.Equal(t, true, un["unlocked"])
	assert.Equal(t, float64(1), un["released"])
	require.NoError(t, c.call(ctx, "POST", "/v1/lock", lockIn{Group: group, ClientID: "c2", Queue: &qa}, &lo))
	assert.True(t, lo.Locked)
	assert.Greater(t, lo.Lease.Token, token, "the fencing token grows with each new owner")
	require.NoError(t, c.call(ctx, "POST", "/v1/unlock", lockIn{Group: group, ClientID: "c2", Queues: []queueJSON{qa}}, &un))
	require.NoError(t, c.call(ctx, "POST", "/v1/unlock", lockIn{ClientID: "c2", All: true}, &un))
	assert.Equal(t, true, un["unlocked"], "queue 1 was still held")
	assert.Equal(t, float64(1), un["released"])

	// ---- consumers: heartbeats with and without subscriptions,
	// unregister, and a closed connection removing its consumer.
	hb, hbTransport := tb.client(t)
	var hbOut map[string]any
	require.NoError(t, hb.call(ctx, "POST", "/v1/heartbeat", heartbeatIn{
		Group: group, ClientID: "c1", Language: "go", Version: 1,
		Subscriptions: &[]subscriptionJSON{{Topic: topic, Expression: "created || paid"}},
	}, &hbOut))
	require.NoError(t, hb.call(ctx, "POST", "/v1/heartbeat", heartbeatIn{Group: "audit", ClientID: "c1"}, nil))
	var cl clientsOut
	require.NoError(t, c.call(ctx, "GET", "/v1/groups/"+group+"/clients", nil, &cl))
	require.Len(t, cl.Clients, 1)
	assert.Equal(t, hbOut["channelId"], cl.Clients[0].ChannelID)
	assert.Equal(t, []subscriptionJSON{{Topic: topic, Expression: "created || paid"}}, cl.Subscriptions)
	require.NoError(t, hb.call(ctx, "POST", "/v1/unregister", unregisterIn{Group: "audit", ClientID: "c1"}, nil))
	assert.Equal(t, http.StatusNotFound, statusOf(t, c.call(ctx, "GET", "/v1/groups/audit/clients", nil, &cl)),
		"a group lives as long as it has a client")
	hbTransport.CloseIdleConnections() // the consumer's connection goes away
	require.Eventually(t, func() bool {
		var ae *apiError
		return errors.As(c.call(ctx, "GET", "/v1/groups/"+group+"/clients", nil, &cl), &ae) && ae.Status == http.StatusNotFound
	}, 5*time.Second, 5*time.Millisecond, "ChannelClosed did not remove the consumer")

	// ---- offsets of a client-side consumer group.
	var co offsetOut
	require.NoError(t, c.call(ctx, "POST", "/v1/offsets/commit", commitIn{Group: "pull", Topic: topic, QueueID: 0, Offset: 7}, &co))
	assert.Equal(t, int64(7), *co.Committed)
	assert.Equal(t, int64(13), co.MaxOffset)
	assert.Equal(t, int64(6), co.Lag)

	// ---- stats: every package reports.
	var st map[string]any
	require.NoError(t, c.call(ctx, "GET", "/v1/stats", nil, &st))
	for _, k := range []string{"store", "pop", "lock", "schedule", "schedule_progress", "consumer", "offset", "http"} {
		assert.NotNil(t, st[k], k)
	}

	// ==== restart on the same data directory.
	tb.stop(t)
	clock.Advance(time.Minute) // nothing depends on invisible times having ended
	tb = startBroker(t, dir, clock)
	c, _ = tb.client(t)

	// Everything at or above the committed offset 4 comes back: m4..m9 and
	// "late" (popped, unacked), m11 and m12 (never popped), and queue 1.
	// Nothing of 0..3 (acked) does, and "late" exists once.
	seen := map[string][]int64{}
	for {
		r := c.mustPop(t, popIn{Group: group, Topic: topic, ClientID: "c1", Max: 32, Invisible: "1m"})
		if len(r.Messages) == 0 {
			break
		}
		for _, d := range r.Messages {
			seen[fmt.Sprint(d.QueueID)] = append(seen[fmt.Sprint(d.QueueID)], d.QueueOffset)
			c.mustAck(t, d.Handle)
		}
	}
	for _, offs := range seen {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	}
	assert.Equal(t, []int64{4, 5, 6, 7, 8, 9, 10, 11, 12}, seen["0"])
	assert.Equal(t, []int64{0}, seen["1"])
	off = c.offset(t, group, topic, 0)
	assert.Equal(t, int64(13), off.MaxOffset, "the delayed message was delivered exactly once")
	assert.Equal(t, int64(13), *off.Committed)
	assert.Equal(t, int64(0), off.Lag)
	assert.Equal(t, int64(7), *c.offset(t, "pull", topic, 0).Committed, "committed offsets survive")
	fifoOff := c.offset(t, group, fifoTopic, 0)
	assert.Equal(t, int64(3), *fifoOff.Committed)
	// A handle from before the restart is refused (stale with the kept
	// key) and changes nothing.
	assert.Equal(t, http.StatusConflict, statusOf(t, c.call(ctx, "POST", "/v1/ack", ackIn{Handle: res.Messages[5].Handle}, nil)))

	// ---- reset by time and by offset replays.
	var rs resetOut
	require.NoError(t, c.call(ctx, "POST", "/v1/offsets/reset", resetIn{Group: group, Topic: topic,
		Time: bout.Messages[0].StoredAt.Add(-time.Millisecond).Format(time.RFC3339Nano)}, &rs))
	require.Len(t, rs.Resets, 2, "no queueId: every queue of the topic")
	for _, x := range rs.Resets {
		assert.Equal(t, int64(0), *x.Committed)
	}
	epoch := rs.Resets[0].Epoch
	r := c.mustPop(t, popIn{Group: group, Topic: topic, ClientID: "c1", QueueID: &q0, Max: 1})
	require.Len(t, r.Messages, 1)
	assert.Equal(t, "m0", *r.Messages[0].Body)

	require.NoError(t, c.call(ctx, "POST", "/v1/offsets/reset", resetIn{Group: group, Topic: topic, QueueID: &q0, Offset: ptr(int64(12))}, &rs))
	require.Len(t, rs.Resets, 1)
	assert.Greater(t, rs.Resets[0].Epoch, epoch)
	assert.Equal(t, http.StatusConflict, statusOf(t, c.call(ctx, "POST", "/v1/ack", ackIn{Handle: r.Messages[0].Handle}, nil)),
		"a handle from before the reset cannot commit over it")
	r = c.mustPop(t, popIn{Group: group, Topic: topic, ClientID: "c1", QueueID: &q0, Max: 32})
	require.Len(t, r.Messages, 1)
	assert.Equal(t, "m12", *r.Messages[0].Body)
	assert.Equal(t, int64(12), *c.offset(t, group, topic, 0).Committed, "the stale ack did not move the offset")
}
