package consumer

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeartbeatsWhileChannelsCloseKeepTablesInStep runs lock-free heartbeats,
// full registrations, unregistrations, channel closes, scans and readers at
// once (run it with -race). Afterwards the tables must agree with each other,
// the event stream must replay to the final client sets, and closing every
// channel must leave nothing behind.
func TestHeartbeatsWhileChannelsCloseKeepTablesInStep(t *testing.T) {
	const (
		nGroups   = 4
		nChannels = 32
		workers   = 4
		steps     = 3000
	)
	clock := newFakeClock()
	rec := &recorder{}
	r := New(Options{Now: clock.Now, ChannelExpiry: 50 * time.Millisecond, OnEvent: rec.On})
	group := func(i int) string { return fmt.Sprintf("g%d", i%nGroups) }
	channel := func(i int) string { return fmt.Sprintf("ch%d", i%nChannels) }
	client := func(ch string) Client { return Client{ChannelID: ch, ClientID: "id-" + ch, Language: "GO", Version: 1} }

	var wg sync.WaitGroup
	var stop atomic.Bool
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range steps {
				g, ch := group(rng.IntN(nGroups)), channel(rng.IntN(nChannels))
				var err error
				switch rng.IntN(10) {
				case 0:
					_, err = r.Register(g, client(ch), []Subscription{{Topic: "t" + g, Version: int64(rng.IntN(3))}})
				case 1:
					err = r.Unregister(g, client(ch))
				default:
					_, err = r.RegisterWithoutSub(g, client(ch))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var aux sync.WaitGroup
	aux.Add(3)
	go func() { // closer
		defer aux.Done()
		for i := 0; !stop.Load(); i++ {
			r.ChannelClosed(channel(i * 7))
		}
	}()
	go func() { // expiry
		defer aux.Done()
		for !stop.Load() {
			clock.Advance(time.Millisecond)
			r.Scan()
		}
	}()
	go func() { // readers
		defer aux.Done()
		for i := 0; !stop.Load(); i++ {
			for _, c := range r.Clients(group(i)) {
				assert.NotEmpty(t, c.ClientID)
			}
			r.GroupsOf(channel(i))
			r.GroupsConsuming("t" + group(i))
			r.Stats()
		}
	}()
	wg.Wait()
	stop.Store(true)
	aux.Wait()

	require.Empty(t, tableViolations(r))
	rp := &replay{groups: map[string]map[string]string{}}
	for _, e := range rec.Take() {
		rp.apply(t, e)
	}
	for _, g := range r.Groups() {
		want := map[string]string{}
		for _, c := range r.Clients(g) {
			want[c.ChannelID] = c.ClientID
		}
		assert.Equal(t, want, rp.groups[g], "replayed client set of %s", g)
	}
	assert.Len(t, rp.groups, len(r.Groups()))

	for i := range nChannels {
		r.ChannelClosed(channel(i))
	}
	st := r.Stats()
	assert.Zero(t, st.Groups+st.Clients+st.Channels+st.Topics, "%+v", st)
	assert.Equal(t, st.ClientsAdded, st.ClientsRemoved)
	assert.Empty(t, tableViolations(r))
	assert.Positive(t, st.Heartbeats, "the lock-free path was exercised")
}

// TestHeartbeatRacingExpiryNeverLosesTheClient rules out a heartbeat that
// reports success on an entry the concurrent Scan is expiring: either the
// heartbeat lands first and Scan keeps the client, or Scan wins and the
// heartbeat re-registers it (and says so with changed=true). With a plain
// store of LastSeen in the heartbeat path, Scan could expire a client whose
// heartbeat had just returned changed=false. Checked: replacing entry.refresh
// with an unconditional Store makes this test fail within the first few
// iterations (-count=3, 3 of 3 runs failed).
func TestHeartbeatRacingExpiryNeverLosesTheClient(t *testing.T) {
	for i := range 300 {
		clock := newFakeClock()
		r := New(Options{Now: clock.Now, ChannelExpiry: time.Second})
		c := cl("ch", "a")
		_, err := r.RegisterWithoutSub("g", c)
		require.NoError(t, err)
		clock.Advance(time.Second + time.Nanosecond)

		var changed bool
		var expired int
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; changed, _ = r.RegisterWithoutSub("g", c) }()
		go func() { defer wg.Done(); <-start; expired = r.Scan() }()
		close(start)
		wg.Wait()

		require.Len(t, r.Clients("g"), 1, "iteration %d: the heartbeating client was lost", i)
		require.Equal(t, expired == 1, changed, "iteration %d: changed must say the client was re-registered", i)
		require.Equal(t, []string{"g"}, r.GroupsOf("ch"))
	}
}

func TestHeartbeatOnRemovedEntryFallsBackToLockedPath(t *testing.T) {
	r := New(Options{})
	c := cl("ch", "a")
	_, _ = r.RegisterWithoutSub("g", c)
	e, ok := r.t.index.Load(hbKey{"g", "ch"})
	require.True(t, ok)
	r.ChannelClosed("ch")
	assert.False(t, e.refresh(time.Now().UnixNano()), "a removed entry must not accept a heartbeat")
	changed, err := r.RegisterWithoutSub("g", c)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, []string{"g"}, r.GroupsOf("ch"))
}
