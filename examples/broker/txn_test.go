package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/brokercore/brokercore/txn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (c *apiClient) prepare(t *testing.T, topic, body string) prepared {
	t.Helper()
	var p prepared
	require.NoError(t, c.call(t.Context(), "POST", "/v1/transactions",
		prepareIn{Group: "shop", messageIn: messageIn{Topic: topic, Body: ptr(body)}}, &p))
	return p
}

func (c *apiClient) end(id int64, what string, fromCheck bool) error {
	path := fmt.Sprintf("/v1/transactions/%d/%s", id, what)
	if fromCheck {
		path += "?fromCheck=true"
	}
	var out resolved
	return c.call(context.Background(), "POST", path, nil, &out)
}

func popBodies(t *testing.T, c *apiClient, group, topic string) []string {
	t.Helper()
	res := c.mustPop(t, popIn{Group: group, Topic: topic, ClientID: "c", Max: 32})
	var out []string
	for _, m := range res.Messages {
		out = append(out, *m.Body)
	}
	return out
}

func TestTransactionCommitDeliversOnceAndNotBefore(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	p := c.prepare(t, "orders", "paid")
	assert.Equal(t, "orders", p.Topic)
	assert.Empty(t, popBodies(t, c, "billing", "orders"), "a half message is not delivered")
	require.NoError(t, c.end(p.ID, "commit", false))
	require.NoError(t, c.end(p.ID, "commit", false), "a retried commit is a no-op")
	assert.Equal(t, []string{"paid"}, popBodies(t, c, "billing", "orders"))
	assert.Empty(t, popBodies(t, c, "billing2", "orders")[1:], "appended once")
	assert.Equal(t, http.StatusConflict, statusOf(t, c.end(p.ID, "rollback", false)))
}

func TestTransactionRollbackIsNeverDeliveredWhileAControlMessageIs(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	p := c.prepare(t, "orders", "cancelled")
	require.NoError(t, c.end(p.ID, "rollback", false))
	require.NoError(t, c.call(t.Context(), "POST", "/v1/messages", messageIn{Topic: "orders", Body: ptr("control")}, nil))
	assert.Equal(t, []string{"control"}, popBodies(t, c, "billing", "orders"))
	assert.Equal(t, http.StatusConflict, statusOf(t, c.end(p.ID, "commit", false)))
}

func TestTransactionRefusesDelaysUnknownIDsAndBadInput(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	for _, in := range []prepareIn{
		{Group: "shop", messageIn: messageIn{Topic: "orders", Body: ptr("x"), DelayLevel: 1}},
		{Group: "shop", messageIn: messageIn{Topic: "orders", Body: ptr("x"), Delay: "5s"}},
		{Group: "shop", messageIn: messageIn{Topic: "orders", Body: ptr("x"), Properties: map[string]string{"TIMER_DELIVER_MS": "99"}}},
		{Group: "", messageIn: messageIn{Topic: "orders", Body: ptr("x")}},
		{Group: "shop", messageIn: messageIn{Topic: txn.HalfTopic, Body: ptr("x")}},
	} {
		assert.Equal(t, http.StatusBadRequest, statusOf(t, c.call(t.Context(), "POST", "/v1/transactions", in, nil)), "%+v", in)
	}
	assert.Equal(t, http.StatusNotFound, statusOf(t, c.end(42, "commit", false)))
	assert.Equal(t, http.StatusBadRequest, statusOf(t, c.call(t.Context(), "POST", "/v1/transactions/x/commit", nil, nil)))
	assert.Equal(t, http.StatusBadRequest, statusOf(t, c.call(t.Context(), "POST", "/v1/transactions/1/commit?fromCheck=maybe", nil, nil)))
	assert.Equal(t, http.StatusMethodNotAllowed, statusOf(t, c.call(t.Context(), "GET", "/v1/transactions/1/commit", nil, nil)))
}

func TestTransactionCheckBackIsALongPollTheProducerAnswers(t *testing.T) {
	clock := newFakeClock()
	tb := startBroker(t, t.TempDir(), clock)
	c, _ := tb.client(t)
	open := c.prepare(t, "orders", "unknown-then-commit")
	other := c.prepare(t, "orders", "check-rollback")
	got := make(chan checksOut, 1)
	go func() { // a producer's poll loop: until it holds both checks
		var all checksOut
		for len(all.Checks) < 2 {
			var out checksOut
			if err := c.call(context.Background(), "POST", "/v1/transactions/checks", checksIn{Group: "shop", ClientID: "p1", Poll: "20s"}, &out); err != nil {
				assert.NoError(t, err)
				break
			}
			all.Checks = append(all.Checks, out.Checks...)
		}
		got <- all
	}()
	require.Eventually(t, func() bool { return tb.b.httpStats.LongPolls.Load() == 1 }, 10*time.Second, time.Millisecond)
	clock.Advance(txn.DefaultTransactionTimeout)
	var checks checksOut
	select {
	case checks = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no check-back")
	}
	require.Len(t, checks.Checks, 2)
	assert.Equal(t, open.ID, checks.Checks[0].ID)
	assert.Equal(t, "orders", checks.Checks[0].Topic)
	assert.Equal(t, "unknown-then-commit", *checks.Checks[0].Body)
	assert.Equal(t, 1, checks.Checks[0].Times)
	require.NoError(t, c.end(open.ID, "commit", true))
	require.NoError(t, c.end(other.ID, "rollback", true))
	assert.Equal(t, []string{"unknown-then-commit"}, popBodies(t, c, "billing", "orders"))

	var st map[string]any
	require.NoError(t, c.call(t.Context(), "GET", "/v1/stats", nil, &st))
	assert.Contains(t, fmt.Sprint(st), "checks_sent")
}

func TestTransactionWithoutALiveProducerIsCountedAndSurvivesARestart(t *testing.T) {
	clock := newFakeClock()
	dir := t.TempDir()
	tb := startBroker(t, dir, clock)
	c, _ := tb.client(t)
	p := c.prepare(t, "orders", "later")
	clock.Advance(txn.DefaultTransactionTimeout)
	require.Eventually(t, func() bool { return tb.b.txns.Stats().ChecksFailed == 1 }, 10*time.Second, time.Millisecond)
	tb.stop(t)

	tb = startBroker(t, dir, clock)
	c, _ = tb.client(t)
	require.NoError(t, c.end(p.ID, "commit", false))
	assert.Equal(t, []string{"later"}, popBodies(t, c, "billing", "orders"))
}
