package consumer_test

// Black-box acceptance tests of the consumer section of ARCHITECTURE.md,
// written from the contract alone, as an outside user of the package would.

import (
	"fmt"
	"log/slog"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/internal/testkit"
)

// accClock is the test clock injected as Options.Now.
type accClock = testkit.Clock

func newAccClock() *accClock { return testkit.NewClock(time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)) }

// recorder collects events; it is safe for concurrent use.
type recorder struct {
	mu  sync.Mutex
	evs []consumer.Event
}

func (r *recorder) on(e consumer.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) take() []consumer.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.evs
	r.evs = nil
	return evs
}

func kinds(evs []consumer.Event) []consumer.EventKind {
	out := make([]consumer.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func cl(ch, id string) consumer.Client {
	return consumer.Client{ChannelID: ch, ClientID: id, Language: "GO", Version: 1}
}

func channels(cs []consumer.Client) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.ChannelID)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func subs(topics ...string) []consumer.Subscription {
	out := make([]consumer.Subscription, 0, len(topics))
	for _, tp := range topics {
		out = append(out, consumer.Subscription{Topic: tp, Expression: "*", Version: 1})
	}
	return out
}

func accRegistry(t *testing.T) (*consumer.Registry, *accClock, *recorder) {
	t.Helper()
	c := newAccClock()
	rec := &recorder{}
	return consumer.New(consumer.Options{Now: c.Now, OnEvent: rec.on}), c, rec
}

// fullScan is what a slow, correct ChannelClosed would find: every group whose
// client set contains the channel.
func fullScan(r *consumer.Registry, ch string) []string {
	var out []string
	for _, g := range r.Groups() {
		for _, c := range r.Clients(g) {
			if c.ChannelID == ch {
				out = append(out, g)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestAcceptZeroOptionsIsAWorkingRegistry(t *testing.T) {
	r := consumer.New(consumer.Options{})
	changed, err := r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, []string{"ch1"}, channels(r.Clients("g")))
	assert.Equal(t, 120*time.Second, consumer.DefaultChannelExpiry)
	assert.Equal(t, 0, r.Scan(), "a fresh registration does not expire under the default")
}

func TestAcceptRegisterFillsEveryTable(t *testing.T) {
	r, c, _ := accRegistry(t)
	changed, err := r.Register("g", cl("ch1", "c1"), subs("T1", "T2"))
	require.NoError(t, err)
	assert.True(t, changed)

	assert.Equal(t, []string{"ch1"}, channels(r.Clients("g")))
	got, ok := r.FindClient("g", "c1")
	require.True(t, ok)
	assert.Equal(t, "ch1", got.ChannelID)
	assert.Equal(t, "GO", got.Language)
	assert.True(t, got.LastSeen.Equal(c.Now()), "LastSeen is set by the registry")
	_, ok = r.FindClient("g", "nobody")
	assert.False(t, ok)
	_, ok = r.FindClient("other", "c1")
	assert.False(t, ok)

	var topics []string
	for _, s := range r.Subscriptions("g") {
		topics = append(topics, s.Topic)
	}
	assert.ElementsMatch(t, []string{"T1", "T2"}, topics)
	assert.Equal(t, []string{"g"}, r.GroupsOf("ch1"))
	assert.Equal(t, []string{"g"}, r.GroupsConsuming("T1"))
	assert.Equal(t, []string{"g"}, r.GroupsConsuming("T2"))
	assert.Empty(t, r.GroupsConsuming("T3"))
	assert.Equal(t, []string{"g"}, r.Groups())
}

func TestAcceptRegisterWithoutSubWritesTheChannelAttribute(t *testing.T) {
	r, _, _ := accRegistry(t)
	changed, err := r.RegisterWithoutSub("g", cl("ch1", "c1"))
	require.NoError(t, err)
	assert.True(t, changed, "a new client is a change")
	assert.Equal(t, []string{"ch1"}, channels(r.Clients("g")))
	assert.Equal(t, []string{"g"}, r.GroupsOf("ch1"), "the heartbeat path must write the channel attribute")
	assert.Equal(t, []string{"g"}, r.ChannelClosed("ch1"))
	assert.Empty(t, r.Clients("g"))
	assert.Empty(t, r.GroupsOf("ch1"))
}

// The field report: heartbeat without subscriptions, then a full heartbeat on
// the same channel, then the channel closes: gone from every table, events fired.
func TestAcceptFieldReportRegisterWithoutSubThenRegisterThenChannelClosed(t *testing.T) {
	r, _, rec := accRegistry(t)
	_, err := r.RegisterWithoutSub("g", cl("ch1", "c1"))
	require.NoError(t, err)
	_, err = r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	rec.take()

	assert.Equal(t, []string{"g"}, r.ChannelClosed("ch1"))
	assert.Empty(t, r.Clients("g"))
	assert.Empty(t, r.GroupsOf("ch1"))
	assert.Empty(t, r.Subscriptions("g"))
	assert.Empty(t, r.GroupsConsuming("T"))
	assert.NotContains(t, r.Groups(), "g")
	_, ok := r.FindClient("g", "c1")
	assert.False(t, ok)

	evs := rec.take()
	require.NotEmpty(t, evs)
	assert.Contains(t, kinds(evs), consumer.EventClientUnregister)
	assert.Equal(t, consumer.EventUnregister, evs[len(evs)-1].Kind, "group left empty: Unregister last")
	for _, e := range evs {
		assert.Equal(t, "g", e.Group)
	}
	assert.Equal(t, 0, r.Scan(), "nothing left behind for the expiry scan")
}

func TestAcceptEveryRegistrationPathKeepsChannelAttributeInStep(t *testing.T) {
	r, _, _ := accRegistry(t)
	must := func(_ bool, err error) { t.Helper(); require.NoError(t, err) }
	must(r.RegisterWithoutSub("g1", cl("ch", "c")))
	must(r.Register("g2", cl("ch", "c"), subs("T")))
	must(r.RegisterWithoutSub("g3", cl("ch", "c")))
	must(r.Register("g3", cl("ch", "c"), subs("T")))
	must(r.Register("g4", cl("ch", "c"), subs("U")))
	must(r.RegisterWithoutSub("g4", cl("ch", "c")))
	must(r.Register("g5", cl("ch", "c"), nil))
	must(r.Register("g6", cl("ch", "c"), subs("T")))
	require.NoError(t, r.Unregister("g6", cl("ch", "c")))
	must(r.RegisterWithoutSub("g6", cl("ch", "c")))
	must(r.Register("g7", cl("ch", "c"), subs("T")))
	require.NoError(t, r.Unregister("g7", cl("ch", "c")))
	must(r.Register("g1", cl("other", "c2"), subs("T")))

	want := []string{"g1", "g2", "g3", "g4", "g5", "g6"}
	assert.Equal(t, want, fullScan(r, "ch"))
	assert.Equal(t, want, sorted(r.GroupsOf("ch")))

	assert.Equal(t, want, sorted(r.ChannelClosed("ch")))
	assert.Empty(t, fullScan(r, "ch"), "ChannelClosed left the channel in a group")
	assert.Empty(t, r.GroupsOf("ch"))
	assert.Empty(t, r.ChannelClosed("ch"), "second close finds nothing")
	assert.Equal(t, []string{"other"}, channels(r.Clients("g1")), "other channels untouched")
	assert.Equal(t, []string{"g1"}, r.GroupsConsuming("T"))
	assert.Empty(t, r.GroupsConsuming("U"))
}

// Invariant (tested as a property): after any sequence of calls, ChannelClosed
// removes exactly what a full scan of the group table would.
func TestAcceptChannelClosedMatchesFullScanUnderRandomOps(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewSource(seed))
		r, c, _ := accRegistry(t)
		groups := []string{"g1", "g2", "g3"}
		chans := []string{"a", "b", "c", "d"}
		topics := []string{"T1", "T2"}
		for step := 0; step < 200; step++ {
			g := groups[rng.Intn(len(groups))]
			ch := chans[rng.Intn(len(chans))]
			client := cl(ch, "id-"+ch)
			switch rng.Intn(7) {
			case 0, 1:
				_, err := r.RegisterWithoutSub(g, client)
				require.NoError(t, err)
			case 2, 3:
				_, err := r.Register(g, client, subs(topics[:rng.Intn(3)]...))
				require.NoError(t, err)
			case 4:
				_ = r.Unregister(g, client)
			case 5:
				want := fullScan(r, ch)
				require.Equal(t, want, sorted(r.GroupsOf(ch)), "seed %d step %d", seed, step)
				require.Equal(t, want, sorted(r.ChannelClosed(ch)), "seed %d step %d", seed, step)
				require.Empty(t, fullScan(r, ch))
			case 6:
				c.Advance(time.Duration(rng.Intn(80)) * time.Second)
				r.Scan()
			}
			for _, ch := range chans {
				require.Equal(t, fullScan(r, ch), sorted(r.GroupsOf(ch)), "seed %d step %d ch %s", seed, step, ch)
			}
			// topic table agrees with the groups' subscriptions
			for _, tp := range topics {
				var want []string
				for _, g := range r.Groups() {
					for _, s := range r.Subscriptions(g) {
						if s.Topic == tp {
							want = append(want, g)
						}
					}
				}
				sort.Strings(want)
				require.Equal(t, want, sorted(r.GroupsConsuming(tp)), "seed %d step %d topic %s", seed, step, tp)
			}
		}
	}
}

func TestAcceptChannelClosedReturnsTheGroupsAndOnlyTouchesThatChannel(t *testing.T) {
	r, _, rec := accRegistry(t)
	for _, g := range []string{"g1", "g2", "g3"} {
		_, err := r.Register(g, cl("ch1", "c1"), subs("T"))
		require.NoError(t, err)
		_, err = r.Register(g, cl("ch2", "c2"), subs("T"))
		require.NoError(t, err)
	}
	_, err := r.Register("g4", cl("ch2", "c2"), subs("T"))
	require.NoError(t, err)
	rec.take()

	assert.ElementsMatch(t, []string{"g1", "g2", "g3"}, r.ChannelClosed("ch1"))
	for _, g := range []string{"g1", "g2", "g3"} {
		assert.Equal(t, []string{"ch2"}, channels(r.Clients(g)))
		assert.NotEmpty(t, r.Subscriptions(g), "group still has a client: subscriptions stay")
	}
	assert.ElementsMatch(t, []string{"g1", "g2", "g3", "g4"}, r.GroupsOf("ch2"))
	assert.ElementsMatch(t, []string{"g1", "g2", "g3", "g4"}, r.GroupsConsuming("T"))
	evs := rec.take()
	assert.NotContains(t, kinds(evs), consumer.EventUnregister, "no group was left empty")
	assert.Empty(t, r.ChannelClosed("never-seen"))
}

func TestAcceptEventsOfANewGroupAndClient(t *testing.T) {
	r, _, rec := accRegistry(t)
	_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	evs := rec.take()
	ks := kinds(evs)
	assert.Contains(t, ks, consumer.EventRegister)
	assert.Contains(t, ks, consumer.EventClientRegister)
	assert.Contains(t, ks, consumer.EventChange)
	assert.NotContains(t, ks, consumer.EventUnregister)
	assert.NotContains(t, ks, consumer.EventClientUnregister)
	for _, e := range evs {
		assert.Equal(t, "g", e.Group)
		switch e.Kind {
		case consumer.EventClientRegister:
			assert.Equal(t, "c1", e.Client.ClientID)
			assert.Equal(t, "ch1", e.Client.ChannelID)
		case consumer.EventChange:
			assert.Equal(t, []string{"ch1"}, channels(e.Clients), "Clients is the new set")
		}
	}
	assert.Less(t, indexOf(ks, consumer.EventClientRegister), indexOf(ks, consumer.EventChange))

	// A second client: ClientRegister then Change with both; no group Register.
	_, err = r.RegisterWithoutSub("g", cl("ch2", "c2"))
	require.NoError(t, err)
	evs = rec.take()
	require.Equal(t, []consumer.EventKind{consumer.EventClientRegister, consumer.EventChange}, kinds(evs))
	assert.Equal(t, "c2", evs[0].Client.ClientID)
	assert.Equal(t, []string{"ch1", "ch2"}, channels(evs[1].Clients))
}

func indexOf(ks []consumer.EventKind, k consumer.EventKind) int {
	for i, x := range ks {
		if x == k {
			return i
		}
	}
	return -1
}

func TestAcceptChangeFiresOnlyWhenClientSetChanged(t *testing.T) {
	r, c, rec := accRegistry(t)
	_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	rec.take()

	c.Advance(time.Second)
	changed, err := r.RegisterWithoutSub("g", cl("ch1", "c1"))
	require.NoError(t, err)
	assert.False(t, changed, "heartbeat of a known client changes nothing")
	changed, err = r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	assert.False(t, changed, "same client, same subscriptions")
	ks := kinds(rec.take())
	assert.NotContains(t, ks, consumer.EventChange)
	assert.NotContains(t, ks, consumer.EventClientRegister)
	assert.NotContains(t, ks, consumer.EventClientUnregister)
	assert.NotContains(t, ks, consumer.EventUnregister)

	// A topic-set change is reported as changed, but the client set did not change.
	changed, err = r.Register("g", cl("ch1", "c1"), subs("T", "U"))
	require.NoError(t, err)
	assert.True(t, changed, "topic set changed")
	assert.NotContains(t, kinds(rec.take()), consumer.EventChange)
	assert.ElementsMatch(t, []string{"g"}, r.GroupsConsuming("U"))
}

func TestAcceptRemovingAClientFiresClientUnregisterAndChange(t *testing.T) {
	r, _, rec := accRegistry(t)
	_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	_, err = r.Register("g", cl("ch2", "c2"), subs("T"))
	require.NoError(t, err)
	rec.take()

	require.NoError(t, r.Unregister("g", cl("ch1", "c1")))
	evs := rec.take()
	require.Equal(t, []consumer.EventKind{consumer.EventClientUnregister, consumer.EventChange}, kinds(evs))
	assert.Equal(t, "c1", evs[0].Client.ClientID)
	assert.Equal(t, []string{"ch2"}, channels(evs[1].Clients))
	assert.Empty(t, r.GroupsOf("ch1"))
	assert.Equal(t, []string{"g"}, r.GroupsOf("ch2"))
}

func TestAcceptUnregisterEventWhenGroupLeftEmptyOnEveryPath(t *testing.T) {
	paths := map[string]func(r *consumer.Registry, c *accClock){
		"Unregister":    func(r *consumer.Registry, c *accClock) { require.NoError(t, r.Unregister("g", cl("ch1", "c1"))) },
		"ChannelClosed": func(r *consumer.Registry, c *accClock) { r.ChannelClosed("ch1") },
		"Scan": func(r *consumer.Registry, c *accClock) {
			c.Advance(121 * time.Second)
			assert.Equal(t, 1, r.Scan())
		},
	}
	for name, remove := range paths {
		t.Run(name, func(t *testing.T) {
			r, c, rec := accRegistry(t)
			_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
			require.NoError(t, err)
			rec.take()
			remove(r, c)
			evs := rec.take()
			ks := kinds(evs)
			require.NotEmpty(t, ks)
			assert.Equal(t, consumer.EventUnregister, ks[len(ks)-1])
			assert.Contains(t, ks, consumer.EventClientUnregister)
			assert.Less(t, indexOf(ks, consumer.EventClientUnregister), len(ks)-1)
			for _, e := range evs {
				assert.Equal(t, "g", e.Group)
				if e.Kind == consumer.EventChange {
					assert.Empty(t, e.Clients, "the new set is empty")
				}
			}
			assert.Empty(t, r.Clients("g"))
			assert.Empty(t, r.Subscriptions("g"), "subscriptions go with the last client")
			assert.Empty(t, r.GroupsConsuming("T"), "topic table cleaned")
			assert.Empty(t, r.GroupsOf("ch1"))
			assert.NotContains(t, r.Groups(), "g")
		})
	}
}

func TestAcceptEventClientsIsTheRegistryStateAtThatPoint(t *testing.T) {
	r, _, rec := accRegistry(t)
	for i := 0; i < 5; i++ {
		_, err := r.RegisterWithoutSub("g", cl(fmt.Sprintf("ch%d", i), fmt.Sprintf("c%d", i)))
		require.NoError(t, err)
		evs := rec.take()
		last := evs[len(evs)-1]
		require.Equal(t, consumer.EventChange, last.Kind)
		assert.Equal(t, channels(r.Clients("g")), channels(last.Clients))
		assert.Len(t, last.Clients, i+1)
	}
	for i := 4; i >= 1; i-- {
		r.ChannelClosed(fmt.Sprintf("ch%d", i))
		evs := rec.take()
		last := evs[len(evs)-1]
		require.Equal(t, consumer.EventChange, last.Kind)
		assert.Len(t, last.Clients, i)
		assert.Equal(t, channels(r.Clients("g")), channels(last.Clients))
	}
}

func TestAcceptHandlerCallingBackIntoRegistryDoesNotDeadlock(t *testing.T) {
	c := newAccClock()
	var r *consumer.Registry
	var mu sync.Mutex
	var seen []consumer.EventKind
	var observed [][]string
	r = consumer.New(consumer.Options{Now: c.Now, OnEvent: func(e consumer.Event) {
		// Read and write the registry from the handler.
		cs := r.Clients(e.Group)
		_ = r.GroupsOf("ch1")
		_ = r.Subscriptions(e.Group)
		_ = r.GroupsConsuming("T")
		_, _ = r.FindClient(e.Group, "c1")
		_ = r.Groups()
		if e.Kind == consumer.EventRegister && e.Group == "g" {
			_, err := r.RegisterWithoutSub("audit", cl("ch-audit", "auditor"))
			assert.NoError(t, err)
		}
		mu.Lock()
		seen = append(seen, e.Kind)
		observed = append(observed, channels(cs))
		mu.Unlock()
	}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
		assert.NoError(t, err)
		r.ChannelClosed("ch1")
		r.Scan()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("registry deadlocked: OnEvent is called under a registry lock")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, seen, consumer.EventUnregister)
	assert.Equal(t, []string{"ch-audit"}, channels(r.Clients("audit")), "handler's own registration took effect")
}

func TestAcceptEventsAreDeliveredInOrderPerGroupUnderConcurrency(t *testing.T) {
	// Replay the event stream of each group over an empty model: it must
	// rebuild the final client sets.
	var mu sync.Mutex
	model := map[string]map[string]bool{}
	var r *consumer.Registry
	r = consumer.New(consumer.Options{Now: newAccClock().Now, OnEvent: func(e consumer.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case consumer.EventChange:
			set := map[string]bool{}
			for _, c := range e.Clients {
				set[c.ChannelID] = true
			}
			model[e.Group] = set
		case consumer.EventUnregister:
			delete(model, e.Group)
		}
	}})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < 300; i++ {
				g := fmt.Sprintf("g%d", rng.Intn(3))
				ch := fmt.Sprintf("ch%d", rng.Intn(6))
				switch rng.Intn(4) {
				case 0:
					_, _ = r.RegisterWithoutSub(g, cl(ch, "id"+ch))
				case 1:
					_, _ = r.Register(g, cl(ch, "id"+ch), subs("T"))
				case 2:
					_ = r.Unregister(g, cl(ch, "id"+ch))
				case 3:
					r.ChannelClosed(ch)
				}
			}
		}(w)
	}
	wg.Wait()
	r.Scan() // a final call drains any event still queued by the contract's delivery
	mu.Lock()
	defer mu.Unlock()
	for _, g := range r.Groups() {
		var got []string
		for ch := range model[g] {
			got = append(got, ch)
		}
		sort.Strings(got)
		assert.Equal(t, channels(r.Clients(g)), got, "group %s", g)
	}
	for g := range model {
		assert.NotEmpty(t, r.Clients(g), "model has group %s the registry removed", g)
	}
	for i := 0; i < 6; i++ {
		ch := fmt.Sprintf("ch%d", i)
		assert.Equal(t, fullScan(r, ch), sorted(r.GroupsOf(ch)))
	}
}

func TestAcceptScanExpiresSilentRegistrationsAndCountsThem(t *testing.T) {
	c := newAccClock()
	rec := &recorder{}
	r := consumer.New(consumer.Options{Now: c.Now, OnEvent: rec.on, ChannelExpiry: 30 * time.Second})
	_, err := r.Register("g1", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	_, err = r.Register("g2", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	_, err = r.RegisterWithoutSub("g1", cl("ch2", "c2"))
	require.NoError(t, err)
	_, err = r.RegisterWithoutSub("g3", cl("ch3", "c3"))
	require.NoError(t, err)

	c.Advance(29 * time.Second)
	assert.Equal(t, 0, r.Scan())
	_, err = r.RegisterWithoutSub("g3", cl("ch3", "c3")) // heartbeat refreshes
	require.NoError(t, err)
	rec.take()

	c.Advance(2 * time.Second) // 31 s since the first three, 2 s since ch3's heartbeat
	assert.Equal(t, 3, r.Scan(), "(g1,ch1), (g2,ch1), (g1,ch2)")
	assert.Empty(t, r.Clients("g1"))
	assert.Empty(t, r.Clients("g2"))
	assert.Empty(t, r.GroupsOf("ch1"))
	assert.Empty(t, r.GroupsOf("ch2"))
	assert.Empty(t, r.GroupsConsuming("T"))
	assert.Equal(t, []string{"ch3"}, channels(r.Clients("g3")))
	assert.Equal(t, []string{"g3"}, r.Groups())
	ks := kinds(rec.take())
	unreg := 0
	for _, k := range ks {
		if k == consumer.EventUnregister {
			unreg++
		}
	}
	assert.Equal(t, 2, unreg, "g1 and g2 were left empty")
	assert.Equal(t, 0, r.Scan())
}

func TestAcceptLivenessIsPerGroupAndChannel(t *testing.T) {
	c := newAccClock()
	r := consumer.New(consumer.Options{Now: c.Now, ChannelExpiry: 30 * time.Second})
	_, err := r.Register("g1", cl("ch", "c"), subs("T"))
	require.NoError(t, err)
	_, err = r.Register("g2", cl("ch", "c"), subs("T"))
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		c.Advance(10 * time.Second)
		_, err = r.RegisterWithoutSub("g1", cl("ch", "c")) // only g1 heartbeats
		require.NoError(t, err)
	}
	got, ok := r.FindClient("g1", "c")
	require.True(t, ok)
	assert.True(t, got.LastSeen.Equal(c.Now()))
	assert.Equal(t, 1, r.Scan(), "g2's registration is silent; g1's heartbeat must not keep it alive")
	assert.Equal(t, []string{"g1"}, r.GroupsOf("ch"))
	assert.Equal(t, []string{"g1"}, r.GroupsConsuming("T"))
}

func TestAcceptSubscriptionsBelongToTheGroupAndGoWithItsLastClient(t *testing.T) {
	r, _, _ := accRegistry(t)
	_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	_, err = r.RegisterWithoutSub("g", cl("ch2", "c2"))
	require.NoError(t, err)
	require.NoError(t, r.Unregister("g", cl("ch1", "c1")))
	require.Len(t, r.Subscriptions("g"), 1, "the subscribing client left, the group still has one")
	assert.Equal(t, []string{"g"}, r.GroupsConsuming("T"))
	r.ChannelClosed("ch2")
	assert.Empty(t, r.Subscriptions("g"))
	assert.Empty(t, r.GroupsConsuming("T"))

	// A new client of the same group starts without the old subscriptions.
	_, err = r.RegisterWithoutSub("g", cl("ch3", "c3"))
	require.NoError(t, err)
	assert.Empty(t, r.Subscriptions("g"))
	assert.Empty(t, r.GroupsConsuming("T"))
}

func TestAcceptSubscriptionVersionRules(t *testing.T) {
	r, _, _ := accRegistry(t)
	reg := func(expr string, v int64) bool {
		t.Helper()
		ch, err := r.Register("g", cl("ch1", "c1"), []consumer.Subscription{{Topic: "T", Expression: expr, Version: v}})
		require.NoError(t, err)
		return ch
	}
	expr := func() string {
		s := r.Subscriptions("g")
		require.Len(t, s, 1)
		return s[0].Expression
	}
	reg("a", 10)
	assert.Equal(t, "a", expr())
	reg("b", 5)
	assert.Equal(t, "a", expr(), "a lower version is ignored")
	reg("c", 20)
	assert.Equal(t, "c", expr(), "a higher version replaces")
	assert.Equal(t, int64(20), r.Subscriptions("g")[0].Version)
}

func TestAcceptRegisterWithoutSubKeepsSubscriptions(t *testing.T) {
	r, _, _ := accRegistry(t)
	_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	_, err = r.RegisterWithoutSub("g", cl("ch1", "c1"))
	require.NoError(t, err)
	assert.Len(t, r.Subscriptions("g"), 1)
	assert.Equal(t, []string{"g"}, r.GroupsConsuming("T"))
}

func TestAcceptGroupsConsumingListsEverySubscribedGroup(t *testing.T) {
	r, _, _ := accRegistry(t)
	_, err := r.Register("g1", cl("ch1", "c1"), subs("T", "U"))
	require.NoError(t, err)
	_, err = r.Register("g2", cl("ch2", "c2"), subs("T"))
	require.NoError(t, err)
	_, err = r.RegisterWithoutSub("g3", cl("ch3", "c3"))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"g1", "g2"}, r.GroupsConsuming("T"))
	assert.ElementsMatch(t, []string{"g1"}, r.GroupsConsuming("U"))
	assert.Empty(t, r.GroupsConsuming(""))
	assert.Empty(t, r.GroupsConsuming("nope"))
}

func TestAcceptBadInputIsErrInvalidAndChangesNothing(t *testing.T) {
	r, _, rec := accRegistry(t)
	_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	rec.take()
	before := func() any {
		return []any{r.Groups(), r.Clients("g"), r.Subscriptions("g"), r.GroupsOf("ch1"),
			r.GroupsOf("chX"), r.GroupsConsuming("T"), r.GroupsConsuming("X"), r.Clients("gX")}
	}
	snap := before()

	bad := []struct {
		name string
		call func() error
	}{
		{"Register empty group", func() error { _, err := r.Register("", cl("chX", "cX"), subs("X")); return err }},
		{"Register empty channel", func() error { _, err := r.Register("gX", cl("", "cX"), subs("X")); return err }},
		{"Register empty client", func() error { _, err := r.Register("gX", cl("chX", ""), subs("X")); return err }},
		{"Register empty topic", func() error {
			_, err := r.Register("gX", cl("chX", "cX"), []consumer.Subscription{{Topic: "X", Version: 1}, {Topic: "", Version: 1}})
			return err
		}},
		{"Register empty topic on known client", func() error {
			_, err := r.Register("g", cl("ch1", "c1"), []consumer.Subscription{{Topic: "X", Version: 9}, {Topic: ""}})
			return err
		}},
		{"RegisterWithoutSub empty group", func() error { _, err := r.RegisterWithoutSub("", cl("chX", "cX")); return err }},
		{"RegisterWithoutSub empty channel", func() error { _, err := r.RegisterWithoutSub("gX", cl("", "cX")); return err }},
		{"RegisterWithoutSub empty client", func() error { _, err := r.RegisterWithoutSub("gX", cl("chX", "")); return err }},
		{"RegisterWithoutSub empty client on known channel", func() error { _, err := r.RegisterWithoutSub("g", cl("ch1", "")); return err }},
		{"Unregister empty group", func() error { return r.Unregister("", cl("ch1", "c1")) }},
		{"Unregister empty channel", func() error { return r.Unregister("g", cl("", "c1")) }},
		{"Unregister empty client", func() error { return r.Unregister("g", cl("ch1", "")) }},
	}
	for _, b := range bad {
		var err error
		require.NotPanics(t, func() { err = b.call() }, b.name)
		assert.ErrorIs(t, err, consumer.ErrInvalid, b.name)
		assert.Equal(t, snap, before(), "%s changed the registry", b.name)
		assert.Empty(t, rec.take(), "%s fired events", b.name)
	}
	changed, err := r.Register("", cl("chX", "cX"), nil)
	assert.False(t, changed)
	assert.Error(t, err)
	assert.Empty(t, r.ChannelClosed(""))
}

func TestAcceptInputLastSeenCannotKeepARegistrationAlive(t *testing.T) {
	c := newAccClock()
	r := consumer.New(consumer.Options{Now: c.Now, ChannelExpiry: 30 * time.Second})
	client := cl("ch", "c")
	client.LastSeen = c.Now().Add(24 * time.Hour)
	_, err := r.RegisterWithoutSub("g", client)
	require.NoError(t, err)
	c.Advance(31 * time.Second)
	assert.Equal(t, 1, r.Scan())
	assert.Empty(t, r.Clients("g"))
}

func TestAcceptUnregisterOfUnknownClientChangesNothing(t *testing.T) {
	r, _, rec := accRegistry(t)
	_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	rec.take()
	_ = r.Unregister("g", cl("ch2", "c2"))
	_ = r.Unregister("other", cl("ch1", "c1"))
	assert.Empty(t, rec.take())
	assert.Equal(t, []string{"ch1"}, channels(r.Clients("g")))
	assert.Equal(t, []string{"g"}, r.GroupsOf("ch1"))
}

func TestAcceptReturnedSlicesAreTheCallersToModify(t *testing.T) {
	r, _, _ := accRegistry(t)
	_, err := r.Register("g", cl("ch1", "c1"), subs("T"))
	require.NoError(t, err)
	cs := r.Clients("g")
	cs[0].ChannelID = "mutated"
	gs := r.GroupsOf("ch1")
	gs[0] = "mutated"
	ss := r.Subscriptions("g")
	ss[0].Topic = "mutated"
	gc := r.GroupsConsuming("T")
	gc[0] = "mutated"
	assert.Equal(t, []string{"ch1"}, channels(r.Clients("g")))
	assert.Equal(t, []string{"g"}, r.GroupsOf("ch1"))
	assert.Equal(t, "T", r.Subscriptions("g")[0].Topic)
	assert.Equal(t, []string{"g"}, r.GroupsConsuming("T"))
}

func TestAcceptRejectedRequestsAndExpiryAreLoggedWithKeys(t *testing.T) {
	var mu sync.Mutex
	var buf strings.Builder
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	logged := func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	c := newAccClock()
	r := consumer.New(consumer.Options{Now: c.Now, ChannelExpiry: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	_, err := r.Register("groupQQ", cl("chanQQ", ""), nil)
	require.Error(t, err)
	assert.Contains(t, logged(), "groupQQ")
	assert.Contains(t, logged(), "chanQQ")

	_, err = r.RegisterWithoutSub("groupEXP", cl("chanEXP", "clientEXP"))
	require.NoError(t, err)
	c.Advance(11 * time.Second)
	require.Equal(t, 1, r.Scan())
	for _, want := range []string{"groupEXP", "chanEXP", "clientEXP"} {
		assert.Contains(t, logged(), want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
