package consumer

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// model is the registry as three lines of plain Go: only the group table.
// The channel attribute and the topic table are derived from it by full
// scans, so comparing the real tables with the model checks that every path
// keeps them in step.
type model struct {
	now     int64
	expiry  int64
	clients map[string]map[string]Client       // group -> channel -> client (LastSeen = last registration)
	subs    map[string]map[string]Subscription // group -> topic -> subscription
}

func (m *model) register(g string, c Client, subs []Subscription, withSubs bool) (changed bool) {
	cs := m.clients[g]
	if cs == nil {
		cs = map[string]Client{}
		m.clients[g] = cs
		m.subs[g] = map[string]Subscription{}
	}
	c.LastSeen = time.Unix(0, m.now).UTC()
	old, ok := cs[c.ChannelID]
	switch {
	case !ok || old.ClientID != c.ClientID:
		cs[c.ChannelID] = c
		changed = true
	case old.Language == c.Language && old.Version == c.Version:
		if c.LastSeen.After(old.LastSeen) {
			cs[c.ChannelID] = c
		}
	default:
		cs[c.ChannelID] = c
	}
	if !withSubs {
		return changed
	}
	next := map[string]Subscription{}
	for _, s := range subs {
		if have, ok := next[s.Topic]; ok && have.Version >= s.Version {
			continue
		}
		next[s.Topic] = s
	}
	for topic, s := range next {
		if old, ok := m.subs[g][topic]; ok && old.Version >= s.Version {
			next[topic] = old
		}
	}
	topicsChanged := !slices.Equal(sortedKeys(next), sortedKeys(m.subs[g]))
	m.subs[g] = next
	return changed || topicsChanged
}

func (m *model) remove(g, ch, id string) bool {
	c, ok := m.clients[g][ch]
	if !ok || (id != "" && c.ClientID != id) {
		return false
	}
	delete(m.clients[g], ch)
	if len(m.clients[g]) == 0 {
		delete(m.clients, g)
		delete(m.subs, g)
	}
	return true
}

// channelClosed is the full scan of the group table.
func (m *model) channelClosed(ch string) []string {
	var out []string
	for _, g := range sortedKeys(m.clients) {
		if m.remove(g, ch, "") {
			out = append(out, g)
		}
	}
	return out
}

func (m *model) scan() int {
	n := 0
	for _, g := range sortedKeys(m.clients) {
		for ch, c := range m.clients[g] {
			if c.LastSeen.UnixNano() < m.now-m.expiry {
				m.remove(g, ch, "")
				n++
			}
		}
	}
	return n
}

func (m *model) groupsOf(ch string) []string {
	var out []string
	for _, g := range sortedKeys(m.clients) {
		if _, ok := m.clients[g][ch]; ok {
			out = append(out, g)
		}
	}
	return out
}

func (m *model) groupsConsuming(topic string) []string {
	var out []string
	for _, g := range sortedKeys(m.subs) {
		if _, ok := m.subs[g][topic]; ok {
			out = append(out, g)
		}
	}
	return out
}

// replay rebuilds client sets from the event stream alone.
type replay struct {
	groups map[string]map[string]string // group -> channel -> client id
}

func (p *replay) apply(t interface{ Fatalf(string, ...any) }, e Event) {
	cs := p.groups[e.Group]
	switch e.Kind {
	case EventRegister:
		if cs != nil {
			t.Fatalf("Register event for existing group %s", e.Group)
		}
		p.groups[e.Group] = map[string]string{}
	case EventClientRegister:
		if cs == nil {
			t.Fatalf("ClientRegister before Register for %s", e.Group)
		}
		if _, ok := cs[e.Client.ChannelID]; ok {
			t.Fatalf("ClientRegister for occupied channel %s/%s", e.Group, e.Client.ChannelID)
		}
		cs[e.Client.ChannelID] = e.Client.ClientID
	case EventClientUnregister:
		if id, ok := cs[e.Client.ChannelID]; !ok || id != e.Client.ClientID {
			t.Fatalf("ClientUnregister of unknown client %s/%+v", e.Group, e.Client)
		}
		delete(cs, e.Client.ChannelID)
	case EventChange:
		got := map[string]string{}
		for _, c := range e.Clients {
			got[c.ChannelID] = c.ClientID
		}
		if !maps.Equal(got, cs) {
			t.Fatalf("Change event for %s carries %v, replay has %v", e.Group, got, cs)
		}
	case EventUnregister:
		if cs == nil || len(cs) != 0 {
			t.Fatalf("Unregister of group %s with clients %v", e.Group, cs)
		}
		delete(p.groups, e.Group)
	default:
		t.Fatalf("unknown event kind %v", e.Kind)
	}
}

// TestRegistryTablesNeverDriftFromModel drives the registry with random
// registrations, unregistrations, channel closes, scans and clock moves and
// checks after every step that the group table, the channel attribute and the
// topic table match a plain model, that ChannelClosed removes exactly what a
// full scan would, and that replaying the events rebuilds the client sets.
func TestRegistryTablesNeverDriftFromModel(t *testing.T) {
	groups := []string{"g1", "g2", "g3"}
	channels := []string{"c1", "c2", "c3", "c4"}
	ids := []string{"a", "b"}
	topics := []string{"t1", "t2", "t3"}
	const expiry = 120 * time.Second

	rapid.Check(t, func(t *rapid.T) {
		clock := newFakeClock()
		rec := &recorder{}
		r := New(Options{Now: clock.Now, ChannelExpiry: expiry, OnEvent: rec.On})
		m := &model{now: clock.Now().UnixNano(), expiry: int64(expiry),
			clients: map[string]map[string]Client{}, subs: map[string]map[string]Subscription{}}
		rp := &replay{groups: map[string]map[string]string{}}

		genClient := func(t *rapid.T) Client {
			return Client{
				ChannelID: rapid.SampledFrom(channels).Draw(t, "channel"),
				ClientID:  rapid.SampledFrom(ids).Draw(t, "client"),
				Language:  rapid.SampledFrom([]string{"GO", "JAVA"}).Draw(t, "lang"),
				Version:   rapid.IntRange(1, 2).Draw(t, "ver"),
			}
		}
		genSubs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Subscription {
			return Subscription{
				Topic:      rapid.SampledFrom(topics).Draw(t, "topic"),
				Expression: rapid.SampledFrom([]string{"*", "tagA"}).Draw(t, "expr"),
				Version:    rapid.Int64Range(0, 3).Draw(t, "subver"),
			}
		}), 0, 3)

		t.Repeat(map[string]func(*rapid.T){
			"Register": func(t *rapid.T) {
				g, c, subs := rapid.SampledFrom(groups).Draw(t, "group"), genClient(t), genSubs.Draw(t, "subs")
				got, err := r.Register(g, c, subs)
				require.NoError(t, err)
				require.Equal(t, m.register(g, c, subs, true), got, "changed")
			},
			"RegisterWithoutSub": func(t *rapid.T) {
				g, c := rapid.SampledFrom(groups).Draw(t, "group"), genClient(t)
				got, err := r.RegisterWithoutSub(g, c)
				require.NoError(t, err)
				require.Equal(t, m.register(g, c, nil, false), got, "changed")
			},
			"Unregister": func(t *rapid.T) {
				g, c := rapid.SampledFrom(groups).Draw(t, "group"), genClient(t)
				require.NoError(t, r.Unregister(g, c))
				m.remove(g, c.ChannelID, c.ClientID)
			},
			"ChannelClosed": func(t *rapid.T) {
				ch := rapid.SampledFrom(channels).Draw(t, "channel")
				require.Equal(t, m.channelClosed(ch), r.ChannelClosed(ch), "ChannelClosed must remove exactly what a full scan finds")
			},
			"Scan": func(t *rapid.T) {
				require.Equal(t, m.scan(), r.Scan())
			},
			"Advance": func(t *rapid.T) {
				d := rapid.SampledFrom([]time.Duration{time.Second, 30 * time.Second, 60 * time.Second,
					expiry - time.Second, expiry, expiry + time.Second}).Draw(t, "advance")
				clock.Advance(d)
				m.now = clock.Now().UnixNano()
			},
			"BadInput": func(t *rapid.T) {
				c := genClient(t)
				g := rapid.SampledFrom(groups).Draw(t, "group")
				subs := []Subscription{{Topic: "t1", Version: 9}}
				switch rapid.IntRange(0, 3).Draw(t, "which") {
				case 0:
					g = ""
				case 1:
					c.ChannelID = ""
				case 2:
					c.ClientID = ""
				case 3:
					subs = append(subs, Subscription{Topic: ""})
				}
				_, err := r.Register(g, c, subs)
				require.True(t, errors.Is(err, ErrInvalid), "%v", err)
				if len(subs) == 1 {
					_, err = r.RegisterWithoutSub(g, c)
					require.True(t, errors.Is(err, ErrInvalid), "%v", err)
					require.True(t, errors.Is(r.Unregister(g, c), ErrInvalid))
				}
			},
			"": func(t *rapid.T) {
				require.Equal(t, sortedKeys(m.clients), r.Groups())
				for _, g := range groups {
					want := slices.Collect(maps.Values(m.clients[g]))
					sortClients(want)
					got := r.Clients(g)
					require.Len(t, got, len(want), "group %s", g)
					for i := range want {
						require.Equal(t, want[i].ChannelID, got[i].ChannelID)
						require.Equal(t, want[i].ClientID, got[i].ClientID)
						require.Equal(t, want[i].Language, got[i].Language)
						require.Equal(t, want[i].Version, got[i].Version)
						require.True(t, want[i].LastSeen.Equal(got[i].LastSeen), "LastSeen of %s/%s: %v vs %v", g, want[i].ChannelID, want[i].LastSeen, got[i].LastSeen)
						found, ok := r.FindClient(g, want[i].ClientID)
						require.True(t, ok)
						require.Equal(t, want[i].ClientID, found.ClientID)
					}
					var wantSubs []Subscription
					for _, topic := range sortedKeys(m.subs[g]) {
						wantSubs = append(wantSubs, m.subs[g][topic])
					}
					require.Equal(t, wantSubs, r.Subscriptions(g), "subscriptions of %s", g)
				}
				for _, ch := range channels {
					require.Equal(t, m.groupsOf(ch), r.GroupsOf(ch), "channel attribute of %s", ch)
				}
				for _, topic := range topics {
					require.Equal(t, m.groupsConsuming(topic), r.GroupsConsuming(topic), "topic table of %s", topic)
				}
				require.Empty(t, tableViolations(r))

				for _, e := range rec.Take() {
					rp.apply(t, e)
				}
				require.Len(t, rp.groups, len(m.clients), "replayed groups")
				for g, cs := range m.clients {
					want := map[string]string{}
					for ch, c := range cs {
						want[ch] = c.ClientID
					}
					require.Equal(t, want, rp.groups[g], "replayed client set of %s", g)
				}
			},
		})
	})
}
