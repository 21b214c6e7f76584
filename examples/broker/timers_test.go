package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTimersAreDeliveredAtTheirTimeAndCancelled: a message produced with
// deliverAt or delay (schedule.At) reaches its topic once the clock has
// passed its time, never before; a cancelled one never does, and cancel
// answers what happened to a key.
func TestTimersAreDeliveredAtTheirTimeAndCancelled(t *testing.T) {
	clock := newFakeClock()
	tb := startBroker(t, t.TempDir(), clock)
	c, _ := tb.client(t)
	ctx := t.Context()

	var soon, later, cancelled produced
	require.NoError(t, c.call(ctx, "POST", "/v1/messages", messageIn{Topic: "t", Body: ptr("soon"), Delay: "90s"}, &soon))
	require.NoError(t, c.call(ctx, "POST", "/v1/messages", messageIn{Topic: "t", Body: ptr("later"),
		DeliverAt: clock.Now().Add(time.Hour).Format(time.RFC3339)}, &later))
	require.NoError(t, c.call(ctx, "POST", "/v1/messages", messageIn{Topic: "t", Body: ptr("never"), Delay: "90s"}, &cancelled))
	assert.Nil(t, soon.QueueOffset, "a timer has no offset in its topic yet")
	require.NotNil(t, soon.DeliverAt)
	assert.Equal(t, clock.Now().Add(90*time.Second), soon.DeliverAt.UTC())
	assert.Equal(t, clock.Now().Add(time.Hour), later.DeliverAt.UTC())
	require.NotEmpty(t, cancelled.UniqKey)

	var out map[string]bool
	require.NoError(t, c.call(ctx, "POST", "/v1/timers/cancel", cancelIn{UniqKey: cancelled.UniqKey}, &out))
	assert.True(t, out["cancelled"])
	for _, tc := range []struct {
		key    string
		status int
		code   string
	}{
		{cancelled.UniqKey, http.StatusConflict, "timer_cancelled"},
		{"no-such-key", http.StatusNotFound, "unknown_timer"},
	} {
		var ae *apiError
		require.ErrorAs(t, c.call(ctx, "POST", "/v1/timers/cancel", cancelIn{UniqKey: tc.key}, nil), &ae)
		assert.Equal(t, tc.status, ae.Status, tc.key)
		assert.Equal(t, tc.code, ae.Code, tc.key)
	}

	req := popIn{Group: "g", Topic: "t", ClientID: "c", Max: 8}
	assert.Empty(t, c.mustPop(t, req).Messages, "nothing is due")
	clock.Advance(89 * time.Second)
	assert.Empty(t, c.mustPop(t, req).Messages, "not before its time")
	clock.Advance(time.Second)
	req.Poll = "5s"
	res := c.mustPop(t, req)
	require.Len(t, res.Messages, 1)
	assert.Equal(t, "soon", *res.Messages[0].Body)
	c.mustAck(t, res.Messages[0].Handle)

	var ae *apiError
	require.ErrorAs(t, c.call(ctx, "POST", "/v1/timers/cancel", cancelIn{UniqKey: soon.UniqKey}, nil), &ae)
	assert.Equal(t, "timer_delivered", ae.Code)

	clock.Advance(time.Hour)
	res = c.mustPop(t, req)
	require.Len(t, res.Messages, 1)
	assert.Equal(t, "later", *res.Messages[0].Body, "the cancelled timer is never delivered")
	c.mustAck(t, res.Messages[0].Handle)
	req.Poll = ""
	assert.Empty(t, c.mustPop(t, req).Messages)
}

// TestTimerInputIsChecked: one delay at a time, valid times, and the
// scheduler's topics are not the producer's.
func TestTimerInputIsChecked(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	for _, tc := range []struct{ body, field string }{
		{`{"topic":"t","body":"x","delayLevel":1,"delay":"1s"}`, "delay"},
		{`{"topic":"t","body":"x","deliverAt":"tomorrow"}`, "deliverAt"},
		{`{"topic":"t","body":"x","delay":"soon"}`, "delay"},
		{`{"topic":"t","body":"x","delay":"-1s"}`, "delay"},
		{`{"topic":"t","body":"x","delay":"9000h"}`, "delay"},
		{`{"topic":"rmq_sys_wheel_timer","body":"x"}`, "topic"},
		{`{"uniqKey":""}`, "uniqKey"},
	} {
		path := "/v1/messages"
		if tc.field == "uniqKey" {
			path = "/v1/timers/cancel"
		}
		status, ae := postRaw(t, c, path, []byte(tc.body))
		assert.Equal(t, http.StatusBadRequest, status, "%s: %+v", tc.body, ae)
		assert.Equal(t, tc.field, ae.Field, tc.body)
	}
	assert.Empty(t, tb.b.store.Topics(), "nothing stored")
}
