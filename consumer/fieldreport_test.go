package consumer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChannelCloseRemovesClientFirstRegisteredWithoutSub is the field report
// (apache/rocketmq#11040): a consumer that reached the registry first through
// the heartbeat path without subscriptions, then sent a full heartbeat on the
// same channel, must be removed by the fast channel-close path at once, with
// its events, not linger until the 120 s expiry.
//
// How it fails on the broken design: checked by making RegisterWithoutSub
// bypass the channel attribute (link() skipping the t.channels write for a
// change without setSubs). Then GroupsOf("ch-1") is empty after the first
// heartbeat, the full Register finds the channel already known and does not
// write the attribute either (RocketMQ's updateChannel==false case),
// ChannelClosed returns no groups, the client stays in Clients and no
// ClientUnregister/Unregister events fire: the assertions below fail.
func TestChannelCloseRemovesClientFirstRegisteredWithoutSub(t *testing.T) {
	clock := newFakeClock()
	rec := &recorder{}
	r := New(Options{Now: clock.Now, OnEvent: rec.On})
	c := Client{ChannelID: "ch-1", ClientID: "client-a", Language: "GO", Version: 1}
	subs := []Subscription{{Topic: "orders", Expression: "*", Version: 1}}

	changed, err := r.RegisterWithoutSub("billing", c)
	require.NoError(t, err)
	assert.True(t, changed, "a new client changes the client set")
	require.Equal(t, []string{"billing"}, r.GroupsOf("ch-1"), "heartbeat without subscriptions must write the channel attribute")

	changed, err = r.Register("billing", c, subs)
	require.NoError(t, err)
	assert.True(t, changed, "the topic set changed")
	require.Equal(t, []string{"billing"}, r.GroupsConsuming("orders"))

	// A second group on the same channel, registered only without subs.
	_, err = r.RegisterWithoutSub("audit", c)
	require.NoError(t, err)
	rec.Take()

	groups := r.ChannelClosed("ch-1")
	assert.Equal(t, []string{"audit", "billing"}, groups)
	assert.Empty(t, r.Clients("billing"))
	assert.Empty(t, r.Clients("audit"))
	assert.Empty(t, r.GroupsOf("ch-1"))
	assert.Empty(t, r.GroupsConsuming("orders"))
	assert.Empty(t, r.Subscriptions("billing"))
	assert.Empty(t, r.Groups())
	assert.Empty(t, tableViolations(r))

	evs := rec.Take()
	for _, g := range []string{"audit", "billing"} {
		assert.Equal(t, []EventKind{EventClientUnregister, EventChange, EventUnregister}, kinds(evs, g), "group %s", g)
	}
	assert.Zero(t, r.Scan(), "nothing is left for the expiry scan to find")
	st := r.Stats()
	assert.Equal(t, uint64(0), st.Clients)
	assert.Equal(t, uint64(2), st.GroupsRemoved)
}
