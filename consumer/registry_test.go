package consumer

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func cl(ch, id string) Client { return Client{ChannelID: ch, ClientID: id, Language: "GO", Version: 1} }

func TestBadInputIsRejectedAndChangesNothing(t *testing.T) {
	var logs bytes.Buffer
	// Rejections are answered to the caller, so they are logged at DEBUG.
	r := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	_, err := r.Register("g", cl("ch", "a"), []Subscription{{Topic: "t", Version: 1}})
	require.NoError(t, err)
	before := r.Stats()

	cases := []struct {
		name  string
		group string
		c     Client
		subs  []Subscription
	}{
		{"empty group", "", cl("ch2", "b"), nil},
		{"empty channel", "g", cl("", "b"), nil},
		{"empty client id", "g", cl("ch2", ""), nil},
		{"empty topic", "g", cl("ch2", "b"), []Subscription{{Topic: "t2"}, {Topic: ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			changed, err := r.Register(tc.group, tc.c, tc.subs)
			assert.False(t, changed)
			assert.ErrorIs(t, err, ErrInvalid)
			if tc.subs == nil {
				changed, err = r.RegisterWithoutSub(tc.group, tc.c)
				assert.False(t, changed)
				assert.ErrorIs(t, err, ErrInvalid)
				assert.ErrorIs(t, r.Unregister(tc.group, tc.c), ErrInvalid)
			}
		})
	}
	assert.Nil(t, r.ChannelClosed(""))
	assert.Equal(t, []Client{r.Clients("g")[0]}, r.Clients("g"))
	assert.Len(t, r.Clients("g"), 1)
	assert.Equal(t, []Subscription{{Topic: "t", Version: 1}}, r.Subscriptions("g"))
	assert.Equal(t, []string{"g"}, r.GroupsConsuming("t"))
	assert.Empty(t, r.GroupsConsuming("t2"))
	after := r.Stats()
	assert.Equal(t, uint64(10), after.Rejected)
	after.Rejected = before.Rejected
	assert.Equal(t, before, after)
	assert.Contains(t, logs.String(), "empty topic")
	assert.Contains(t, logs.String(), "channel=ch2")
}

func TestSubscriptionVersionHigherReplacesLowerIgnored(t *testing.T) {
	r := New(Options{})
	c := cl("ch", "a")
	changed, err := r.Register("g", c, []Subscription{{Topic: "t", Expression: "v2", Version: 2}})
	require.NoError(t, err)
	assert.True(t, changed)

	changed, err = r.Register("g", c, []Subscription{{Topic: "t", Expression: "v1", Version: 1}})
	require.NoError(t, err)
	assert.False(t, changed, "same topic set, known client")
	assert.Equal(t, "v2", r.Subscriptions("g")[0].Expression, "lower version ignored")

	_, _ = r.Register("g", c, []Subscription{{Topic: "t", Expression: "v2b", Version: 2}})
	assert.Equal(t, "v2", r.Subscriptions("g")[0].Expression, "equal version ignored")

	changed, _ = r.Register("g", c, []Subscription{{Topic: "t", Expression: "v3", Version: 3}})
	assert.False(t, changed, "an expression change is not a topic-set change")
	assert.Equal(t, "v3", r.Subscriptions("g")[0].Expression, "higher version replaces")

	changed, _ = r.Register("g", c, []Subscription{{Topic: "t", Version: 3}, {Topic: "u", Version: 1}})
	assert.True(t, changed, "topic added")
	assert.Equal(t, []string{"g"}, r.GroupsConsuming("u"))

	changed, _ = r.Register("g", c, []Subscription{{Topic: "u", Version: 1}})
	assert.True(t, changed, "topic dropped")
	assert.Empty(t, r.GroupsConsuming("t"))

	changed, _ = r.RegisterWithoutSub("g", c)
	assert.False(t, changed)
	assert.Len(t, r.Subscriptions("g"), 1, "a heartbeat without subscriptions keeps them")
}

func TestEventsOfAGroupLifetimeInOrder(t *testing.T) {
	rec := &recorder{}
	r := New(Options{OnEvent: rec.On})
	_, _ = r.Register("g", cl("ch1", "a"), []Subscription{{Topic: "t"}})
	_, _ = r.RegisterWithoutSub("g", cl("ch2", "b"))
	_, _ = r.RegisterWithoutSub("g", cl("ch2", "b")) // heartbeat: no event
	require.NoError(t, r.Unregister("g", cl("ch1", "a")))
	require.NoError(t, r.Unregister("g", cl("ch2", "b")))

	evs := rec.Take()
	assert.Equal(t, []EventKind{
		EventRegister, EventClientRegister, EventChange,
		EventClientRegister, EventChange,
		EventClientUnregister, EventChange,
		EventClientUnregister, EventChange, EventUnregister,
	}, kinds(evs, ""))
	assert.Equal(t, "b", evs[3].Client.ClientID)
	assert.Len(t, evs[4].Clients, 2)
	assert.Equal(t, "b", evs[6].Clients[0].ClientID)
	assert.Empty(t, evs[8].Clients)
	assert.Equal(t, uint64(len(evs)), r.Stats().Events)
}

// TestHandlerMayCallBackIntoRegistry rules out delivering events under the
// registry lock: the handler reads and mutates the registry; with the lock
// held this would deadlock.
func TestHandlerMayCallBackIntoRegistry(t *testing.T) {
	var r *Registry
	var seen []string
	r = New(Options{OnEvent: func(e Event) {
		seen = append(seen, e.Group+":"+e.Kind.String())
		if e.Kind == EventClientRegister && e.Group == "g" {
			// Mirror every client of g into "mirror", from inside the handler.
			_, err := r.RegisterWithoutSub("mirror", e.Client)
			require.NoError(t, err)
			assert.Len(t, r.Clients("g"), 1)
		}
	}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.RegisterWithoutSub("g", cl("ch", "a"))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: handler could not call back into the registry")
	}
	assert.Equal(t, []string{
		"g:Register", "g:ClientRegister", "g:Change",
		"mirror:Register", "mirror:ClientRegister", "mirror:Change",
	}, seen, "the handler's own events come after the current batch, in order")
	assert.Equal(t, []string{"g", "mirror"}, r.GroupsOf("ch"))
}

func TestPanickingHandlerDoesNotWedgeDelivery(t *testing.T) {
	var got []EventKind
	boom := true
	r := New(Options{OnEvent: func(e Event) {
		got = append(got, e.Kind)
		if boom && e.Kind == EventRegister {
			boom = false
			panic("handler bug")
		}
	}})
	assert.Panics(t, func() { _, _ = r.RegisterWithoutSub("g", cl("ch", "a")) })
	assert.Len(t, r.Clients("g"), 1, "the change itself was made")
	require.NoError(t, r.Unregister("g", cl("ch", "a")))
	assert.Equal(t, []EventKind{EventRegister, EventClientRegister, EventChange,
		EventClientUnregister, EventChange, EventUnregister}, got)
}

// TestScanRemovingLastClientFiresUnregisterAndCleansTopics rules out
// apache/rocketmq#11114: the expiry scan dropped empty groups without an
// UNREGISTER event and left them in the topic table.
func TestScanRemovingLastClientFiresUnregisterAndCleansTopics(t *testing.T) {
	clock := newFakeClock()
	rec := &recorder{}
	var logs bytes.Buffer
	r := New(Options{Now: clock.Now, OnEvent: rec.On, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, _ = r.Register("g", cl("ch", "a"), []Subscription{{Topic: "t"}})
	rec.Take()

	clock.Advance(DefaultChannelExpiry)
	assert.Zero(t, r.Scan(), "exactly the expiry is still alive")
	clock.Advance(time.Nanosecond)
	assert.Equal(t, 1, r.Scan())

	evs := rec.Take()
	require.Equal(t, []EventKind{EventClientUnregister, EventChange, EventUnregister}, kinds(evs, ""))
	assert.True(t, evs[0].Client.LastSeen.Equal(clock.Now().Add(-DefaultChannelExpiry-time.Nanosecond)),
		"the event reports when the client was last seen")
	assert.Empty(t, r.GroupsConsuming("t"))
	assert.Empty(t, r.Subscriptions("g"))
	assert.Empty(t, r.GroupsOf("ch"))
	assert.Empty(t, tableViolations(r))
	assert.Equal(t, uint64(1), r.Stats().Expired)
	assert.Contains(t, logs.String(), `registration expired" group=g channel=ch client=a`)
}

// TestHeartbeatOfOneGroupDoesNotKeepAnotherAlive rules out
// apache/rocketmq#10435: one client object shared by groups let a heartbeat
// of one group refresh all of them.
func TestHeartbeatOfOneGroupDoesNotKeepAnotherAlive(t *testing.T) {
	clock := newFakeClock()
	r := New(Options{Now: clock.Now, ChannelExpiry: time.Minute})
	c := cl("ch", "a")
	_, _ = r.RegisterWithoutSub("live", c)
	_, _ = r.RegisterWithoutSub("stale", c)
	for range 3 {
		clock.Advance(40 * time.Second)
		_, _ = r.RegisterWithoutSub("live", c)
	}
	assert.Equal(t, 1, r.Scan())
	assert.Equal(t, []string{"live"}, r.GroupsOf("ch"))
	got, ok := r.FindClient("live", "a")
	require.True(t, ok)
	assert.True(t, got.LastSeen.Equal(clock.Now()))
}

func TestChannelTakenOverByAnotherClientID(t *testing.T) {
	rec := &recorder{}
	r := New(Options{OnEvent: rec.On})
	_, _ = r.RegisterWithoutSub("g", cl("ch", "old"))
	rec.Take()
	changed, err := r.RegisterWithoutSub("g", cl("ch", "new"))
	require.NoError(t, err)
	assert.True(t, changed)
	evs := rec.Take()
	require.Equal(t, []EventKind{EventClientUnregister, EventClientRegister, EventChange}, kinds(evs, ""))
	assert.Equal(t, "old", evs[0].Client.ClientID)
	_, ok := r.FindClient("g", "old")
	assert.False(t, ok)

	require.NoError(t, r.Unregister("g", cl("ch", "old")), "a stale unregister is not an error")
	assert.Len(t, r.Clients("g"), 1, "and does not remove the channel's new client")

	// A new language or version is the same client: no event, not changed.
	c := cl("ch", "new")
	c.Version = 2
	changed, _ = r.RegisterWithoutSub("g", c)
	assert.False(t, changed)
	assert.Empty(t, rec.Take())
	assert.Equal(t, 2, r.Clients("g")[0].Version)
	assert.Empty(t, tableViolations(r))
}

func TestZeroOptionsWork(t *testing.T) {
	r := New(Options{})
	assert.Equal(t, DefaultChannelExpiry, r.expiry)
	changed, err := r.Register("g", cl("ch", "a"), nil)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Zero(t, r.Scan())
	c, ok := r.FindClient("g", "a")
	require.True(t, ok)
	assert.WithinDuration(t, time.Now(), c.LastSeen, time.Minute)
	assert.Equal(t, "Change", EventChange.String())
	assert.Equal(t, "EventKind(99)", EventKind(99).String())
	assert.Nil(t, r.Clients("nope"))
	assert.Nil(t, r.Subscriptions("nope"))
	_, ok = r.FindClient("nope", "a")
	assert.False(t, ok)
}

func TestErrorsWrapErrInvalidWithKeys(t *testing.T) {
	_, err := New(Options{}).Register("g", cl("", "a"), nil)
	require.True(t, errors.Is(err, ErrInvalid))
	assert.Contains(t, err.Error(), `group "g"`)
	assert.Contains(t, err.Error(), "empty channel id")
}

func TestStatsEncodeWithSnakeCaseKeys(t *testing.T) {
	r := New(Options{})
	_, err := r.RegisterWithoutSub("g", cl("ch", "a"))
	require.NoError(t, err)
	b, err := json.Marshal(r.Stats())
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, float64(1), got["clients_added"])
	assert.Equal(t, float64(1), got["groups"])
	for k := range got {
		assert.Regexp(t, `^[a-z_]+$`, k)
	}
}

func TestCloseRefusesChangesWithErrClosedAndKeepsReads(t *testing.T) {
	var events atomic.Int64
	r := New(Options{OnEvent: func(Event) { events.Add(1) }})
	_, err := r.Register("g", cl("ch", "a"), []Subscription{{Topic: "t", Version: 1}})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close(), "idempotent")
	before, seen := r.Stats(), events.Load()

	_, err = r.Register("g", cl("ch2", "b"), nil)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = r.RegisterWithoutSub("g", cl("ch2", "b"))
	assert.ErrorIs(t, err, ErrClosed)
	_, err = r.RegisterWithoutSub("g", cl("ch", "a")) // the lock-free heartbeat path too
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, r.Unregister("g", cl("ch", "a")), ErrClosed)
	assert.Nil(t, r.ChannelClosed("ch"))
	assert.Zero(t, r.Scan())

	assert.Len(t, r.Clients("g"), 1, "reads answer from memory")
	assert.Equal(t, []string{"g"}, r.GroupsOf("ch"))
	assert.Equal(t, before, r.Stats())
	assert.Equal(t, seen, events.Load(), "no event after Close")
}
