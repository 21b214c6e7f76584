package consumer

import (
	"cmp"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"
)

// deadMark is the lastSeen value of an entry that has been taken out of the
// tables. A lock-free heartbeat that finds it falls back to the locked path.
const deadMark = math.MinInt64

// entry is one (group, channel) registration. client is immutable once the
// entry is published; a change of client id, language or version installs a
// new entry. lastSeen (unix nanoseconds) is the only field written without
// the registry lock: by the heartbeat fast path (CAS) and by Scan (CAS to
// deadMark), so a heartbeat and an expiry of the same entry cannot both win.
type entry struct {
	client   Client
	lastSeen atomic.Int64
}

func newEntry(c Client, now int64) *entry {
	c.LastSeen = timeOf(now)
	e := &entry{client: c}
	e.lastSeen.Store(now)
	return e
}

// snapshot returns the client with its current LastSeen.
func (e *entry) snapshot() Client {
	c := e.client
	c.LastSeen = timeOf(e.lastSeen.Load())
	return c
}

// sameAs reports whether c describes the same client as the entry, so a
// heartbeat only needs to refresh lastSeen.
func (e *entry) sameAs(c *Client) bool {
	return e.client.ClientID == c.ClientID && e.client.Language == c.Language && e.client.Version == c.Version
}

// group is one consumer group: its clients keyed by channel id and its
// subscriptions keyed by topic.
type group struct {
	clients map[string]*entry
	subs    map[string]Subscription
}

// hbKey addresses an entry in the heartbeat index.
type hbKey struct{ group, channel string }

// tables holds the three tables of the registry plus the heartbeat index.
//
// Every write to any of them happens in apply (and the helpers only apply
// calls), under the registry's write lock. That is the point of the package:
// RocketMQ's registerConsumerWithoutSub wrote the group table but not the
// channel attribute, and its expiry scan removed groups without cleaning the
// topic table; here there is no second place that could forget.
type tables struct {
	groups   map[string]*group              // group -> clients, subscriptions
	channels map[string]map[string]struct{} // channel -> groups: the channel attribute
	topics   map[string]map[string]struct{} // topic -> groups subscribed to it
	index    *xsync.MapOf[hbKey, *entry]    // (group, channel) -> entry, read lock-free by heartbeats
	nClients int
}

func newTables() tables {
	return tables{
		groups:   make(map[string]*group),
		channels: make(map[string]map[string]struct{}),
		topics:   make(map[string]map[string]struct{}),
		index:    xsync.NewMapOf[hbKey, *entry](),
	}
}

// change is one mutation of one group: install a client (put), remove the
// client on a channel (drop, when put is nil), and optionally replace the
// group's subscriptions (setSubs).
type change struct {
	group  string
	put    *entry
	drop   string
	dropID string // when set, drop only if the entry has this client id
	// expired is set by Scan; dropSeen is the lastSeen it read before it
	// marked the entry dead, reported in the ClientUnregister event.
	expired  bool
	dropSeen int64
	setSubs  bool
	subs     []Subscription
}

// outcome is what apply did.
type outcome struct {
	clientsChanged bool
	topicsChanged  bool
	added, removed int
	groupRemoved   bool
}

// apply performs c on all tables together and appends the events it causes to
// *evs (nil: no events wanted). Must be called with the write lock held.
func (t *tables) apply(c change, evs *[]Event, log *slog.Logger) outcome {
	var out outcome
	emit := func(e Event) {
		if evs != nil {
			*evs = append(*evs, e)
		}
	}
	g := t.groups[c.group]
	if g == nil {
		if c.put == nil {
			return out
		}
		g = &group{clients: make(map[string]*entry), subs: make(map[string]Subscription)}
		t.groups[c.group] = g
		emit(Event{Kind: EventRegister, Group: c.group})
	}

	if c.put != nil {
		ch := c.put.client.ChannelID
		old := g.clients[ch]
		switch {
		case old == nil:
			t.link(c.group, g, c.put)
			out.clientsChanged = true
			out.added++
			emit(Event{Kind: EventClientRegister, Group: c.group, Client: c.put.snapshot()})
		case old.client.ClientID != c.put.client.ClientID:
			// Another client took the channel over: the old one is gone.
			log.Warn("consumer: channel taken over by another client id",
				"group", c.group, "channel", ch, "old_client", old.client.ClientID, "new_client", c.put.client.ClientID)
			gone := old.snapshot()
			t.unlink(c.group, g, old)
			t.link(c.group, g, c.put)
			out.clientsChanged = true
			out.added++
			out.removed++
			emit(Event{Kind: EventClientUnregister, Group: c.group, Client: gone})
			emit(Event{Kind: EventClientRegister, Group: c.group, Client: c.put.snapshot()})
		case old.sameAs(&c.put.client):
			old.lastSeen.Store(max(old.lastSeen.Load(), c.put.lastSeen.Load()))
		default:
			// Same client, new language or version: swap the entry so the
			// lock-free path keeps reading an immutable client.
			t.unlink(c.group, g, old)
			t.link(c.group, g, c.put)
		}
	} else if old := g.clients[c.drop]; old != nil && (c.dropID == "" || c.dropID == old.client.ClientID) {
		gone := old.snapshot()
		if c.expired {
			gone.LastSeen = timeOf(c.dropSeen)
		}
		t.unlink(c.group, g, old)
		out.clientsChanged = true
		out.removed++
		emit(Event{Kind: EventClientUnregister, Group: c.group, Client: gone})
	}

	if c.setSubs && len(g.clients) > 0 {
		out.topicsChanged = t.setSubs(c.group, g, c.subs)
	}

	if out.clientsChanged && evs != nil {
		// Building the set costs O(group size); only when someone listens.
		emit(Event{Kind: EventChange, Group: c.group, Clients: g.snapshot()})
	}
	if len(g.clients) == 0 {
		// The subscriptions belong to the group and go with its last client.
		for topic := range g.subs {
			t.unsubscribe(topic, c.group)
		}
		delete(t.groups, c.group)
		out.groupRemoved = true
		emit(Event{Kind: EventUnregister, Group: c.group})
	}
	return out
}

// link installs e in g, the channel attribute and the heartbeat index.
func (t *tables) link(name string, g *group, e *entry) {
	ch := e.client.ChannelID
	if _, had := g.clients[ch]; !had {
		t.nClients++
	}
	g.clients[ch] = e
	set := t.channels[ch]
	if set == nil {
		set = make(map[string]struct{}, 1)
		t.channels[ch] = set
	}
	set[name] = struct{}{}
	t.index.Store(hbKey{name, ch}, e)
}

// unlink removes e from g, the channel attribute and the heartbeat index, and
// marks it dead for heartbeats that already hold a pointer to it.
func (t *tables) unlink(name string, g *group, e *entry) {
	ch := e.client.ChannelID
	e.lastSeen.Store(deadMark)
	delete(g.clients, ch)
	t.nClients--
	if set := t.channels[ch]; set != nil {
		delete(set, name)
		if len(set) == 0 {
			delete(t.channels, ch)
		}
	}
	t.index.Delete(hbKey{name, ch})
}

// setSubs merges subs into g's subscriptions (a higher version replaces, an
// equal or lower one is ignored; topics not listed are dropped) and keeps
// the topic table in step. It reports whether the topic set changed.
func (t *tables) setSubs(name string, g *group, subs []Subscription) bool {
	next := make(map[string]Subscription, len(subs))
	for _, s := range subs {
		if have, ok := next[s.Topic]; ok && have.Version >= s.Version {
			continue
		}
		next[s.Topic] = s
	}
	changed := false
	for topic, s := range next {
		old, ok := g.subs[topic]
		if !ok {
			changed = true
			set := t.topics[topic]
			if set == nil {
				set = make(map[string]struct{}, 1)
				t.topics[topic] = set
			}
			set[name] = struct{}{}
		} else if old.Version >= s.Version {
			next[topic] = old
		}
	}
	for topic := range g.subs {
		if _, ok := next[topic]; !ok {
			changed = true
			t.unsubscribe(topic, name)
		}
	}
	g.subs = next
	return changed
}

func (t *tables) unsubscribe(topic, name string) {
	if set := t.topics[topic]; set != nil {
		delete(set, name)
		if len(set) == 0 {
			delete(t.topics, topic)
		}
	}
}

// snapshot returns g's clients ordered by client id, then channel id.
func (g *group) snapshot() []Client {
	out := make([]Client, 0, len(g.clients))
	for _, e := range g.clients {
		out = append(out, e.snapshot())
	}
	sortClients(out)
	return out
}

func sortClients(cs []Client) {
	slices.SortFunc(cs, func(a, b Client) int {
		return cmp.Or(cmp.Compare(a.ClientID, b.ClientID), cmp.Compare(a.ChannelID, b.ChannelID))
	})
}

// sortedKeys returns the keys of a set in order; the caller owns the slice.
func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}
