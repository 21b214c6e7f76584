package consumer

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
)

// Client is one consumer connection as seen by a group. ChannelID names the
// connection and is the key within a group; ClientID names the consumer
// process. LastSeen is set by the registry (the input value is ignored): it
// is the time of the last registration of this group on this channel.
type Client struct {
	ChannelID, ClientID, Language string
	Version                       int
	LastSeen                      time.Time
}

// Subscription is one topic a group consumes. Version orders updates of the
// same topic: a higher version replaces the stored one, an equal or lower
// one is ignored.
type Subscription struct {
	Topic, Expression string
	Version           int64
}

// Stats is a snapshot of the registry's sizes and counters.
type Stats struct {
	Groups   uint64 `json:"groups"`   // groups with at least one client
	Clients  uint64 `json:"clients"`  // (group, channel) registrations
	Channels uint64 `json:"channels"` // channels with at least one registration
	Topics   uint64 `json:"topics"`   // topics some group subscribes to

	Heartbeats      uint64 `json:"heartbeats"`      // registrations of a known, unchanged client served without the lock
	Registrations   uint64 `json:"registrations"`   // registrations that took the locked path
	ClientsAdded    uint64 `json:"clients_added"`   // (group, channel) registrations created
	ClientsRemoved  uint64 `json:"clients_removed"` // (group, channel) registrations removed, for any reason
	Unregistrations uint64 `json:"unregistrations"` // clients removed by Unregister
	ChannelCloses   uint64 `json:"channel_closes"`  // ChannelClosed calls that removed something
	Expired         uint64 `json:"expired"`         // registrations removed by Scan
	GroupsRemoved   uint64 `json:"groups_removed"`  // groups removed because their last client left
	Rejected        uint64 `json:"rejected"`        // calls refused with ErrInvalid
	Events          uint64 `json:"events"`          // events handed to OnEvent (0 without a handler)
}

// Registry is the consumer registry: for each group its clients (keyed by
// channel) and subscriptions, for each channel the groups registered on it
// (the channel attribute used by ChannelClosed), and for each topic the
// groups consuming it. It is safe for concurrent use.
type Registry struct {
	expiry time.Duration
	now    func() time.Time
	log    *slog.Logger
	events dispatcher

	heartbeats *xsync.Counter // striped: the heartbeat path must not share a cache line
	rejected   atomic.Uint64

	mu     sync.RWMutex // guards t (except the lock-free reads of t.index), st and closed
	t      tables
	st     Stats
	closed bool
	// isClosed mirrors closed for the lock-free heartbeat path.
	isClosed atomic.Bool
}

// New returns an empty registry.
func New(opts Options) *Registry {
	opts = opts.withDefaults()
	return &Registry{
		expiry:     opts.ChannelExpiry,
		now:        opts.Now,
		log:        opts.Logger,
		events:     dispatcher{fn: opts.OnEvent},
		heartbeats: xsync.NewCounter(),
		t:          newTables(),
	}
}

// Register records that client c of group registered with the group's full
// subscription list subs (a heartbeat with subscriptions). It adds or
// refreshes the client, merges subs by version and drops topics subs does not
// list. changed reports whether the group's client set or topic set changed.
func (r *Registry) Register(group string, c Client, subs []Subscription) (changed bool, err error) {
	if err := r.check("register", group, &c, subs); err != nil {
		return false, err
	}
	out, err := r.mutate("register", change{group: group, put: newEntry(c, r.now().UnixNano()), setSubs: true, subs: subs})
	return out.clientsChanged || out.topicsChanged, err
}

// RegisterWithoutSub records a heartbeat of client c of group that carries no
// subscriptions: the group's subscriptions stay as they are. A known,
// unchanged client is refreshed without taking the registry lock; any other
// case goes through the same single mutation path as Register, so the
// channel attribute is always written. changed reports whether the client
// set changed.
func (r *Registry) RegisterWithoutSub(group string, c Client) (changed bool, err error) {
	if err := r.check("register without subscriptions", group, &c, nil); err != nil {
		return false, err
	}
	if r.isClosed.Load() {
		return false, r.errClosed("register without subscriptions")
	}
	now := r.now().UnixNano()
	if e, ok := r.t.index.Load(hbKey{group, c.ChannelID}); ok && e.sameAs(&c) && e.refresh(now) {
		r.heartbeats.Inc()
		return false, nil
	}
	out, err := r.mutate("register without subscriptions", change{group: group, put: newEntry(c, now)})
	return out.clientsChanged, err
}

// refresh moves lastSeen forward to now unless the entry has been removed.
func (e *entry) refresh(now int64) bool {
	for {
		v := e.lastSeen.Load()
		switch {
		case v == deadMark:
			return false
		case v >= now:
			return true
		case e.lastSeen.CompareAndSwap(v, now):
			return true
		}
	}
}

// Unregister removes client c (matched by channel and client id) from group.
// Removing a client that is not registered is not an error.
func (r *Registry) Unregister(group string, c Client) error {
	if err := r.check("unregister", group, &c, nil); err != nil {
		return err
	}
	out, err := r.mutate("unregister", change{group: group, drop: c.ChannelID, dropID: c.ClientID})
	if err != nil {
		return err
	}
	if out.removed == 0 {
		r.log.Debug("consumer: unregister of unknown client", "group", group, "channel", c.ChannelID, "client", c.ClientID)
	}
	return nil
}

// mutate applies one change under the lock and delivers its events after;
// after Close it changes nothing and answers ErrClosed.
func (r *Registry) mutate(op string, c change) (outcome, error) {
	var evs []Event
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return outcome{}, r.errClosed(op)
	}
	out := r.t.apply(c, r.eventSink(&evs), r.log)
	if c.put != nil {
		r.st.Registrations++
	} else {
		r.st.Unregistrations += uint64(out.removed)
	}
	r.count(out)
	r.st.Events += uint64(len(evs))
	r.events.push(evs)
	r.mu.Unlock()
	r.events.drain()
	if out.added > 0 || out.removed > 0 {
		r.log.Debug("consumer: client set changed", "group", c.group, "channel", c.put.channelOr(c.drop),
			"added", out.added, "removed", out.removed, "group_removed", out.groupRemoved)
	}
	return out, nil
}

func (r *Registry) errClosed(op string) error {
	r.log.Debug("consumer: rejected " + op + " on closed registry")
	return fmt.Errorf("consumer: %s: %w", op, ErrClosed)
}

// Close makes every later Register, RegisterWithoutSub and Unregister
// answer ErrClosed, and ChannelClosed and Scan change nothing; reads keep
// answering from memory. No event is delivered after Close returns (except
// those of calls that were already delivering). It is idempotent and
// returns nil; the Registry owns no goroutine or file.
func (r *Registry) Close() error {
	r.mu.Lock()
	r.closed = true
	r.isClosed.Store(true)
	r.mu.Unlock()
	return nil
}

// channelOr returns the entry's channel, or ch for a nil entry.
func (e *entry) channelOr(ch string) string {
	if e == nil {
		return ch
	}
	return e.client.ChannelID
}

// ChannelClosed removes the channel from every group registered on it and
// returns those groups, sorted. It reads only the channel attribute, so its
// cost depends on the number of groups on the channel, not on the number of
// channels.
func (r *Registry) ChannelClosed(channelID string) (groups []string) {
	if channelID == "" {
		return nil
	}
	var evs []Event
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	groups = sortedKeys(r.t.channels[channelID])
	for _, g := range groups {
		r.count(r.t.apply(change{group: g, drop: channelID}, r.eventSink(&evs), r.log))
	}
	if len(groups) > 0 {
		r.st.ChannelCloses++
	}
	r.st.Events += uint64(len(evs))
	r.events.push(evs)
	r.mu.Unlock()
	r.events.drain()
	if len(groups) > 0 {
		r.log.Info("consumer: channel closed", "channel", channelID, "groups", groups)
	}
	return groups
}

// Scan removes every registration whose group has not registered on its
// channel for longer than ChannelExpiry, and returns how many (group,
// channel) registrations it removed. Hosts call it periodically.
func (r *Registry) Scan() int {
	now := r.now().UnixNano()
	limit := now - int64(r.expiry)
	type victim struct {
		group, channel, client string
		seen                   int64
	}
	var victims []victim
	var evs []Event
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0
	}
	for name, g := range r.t.groups {
		for ch, e := range g.clients {
			for {
				v := e.lastSeen.Load()
				if v >= limit {
					break
				}
				// The CAS makes a racing lock-free heartbeat either land
				// before (and save the entry) or see deadMark and re-register.
				if e.lastSeen.CompareAndSwap(v, deadMark) {
					victims = append(victims, victim{name, ch, e.client.ClientID, v})
					break
				}
			}
		}
	}
	slices.SortFunc(victims, func(a, b victim) int {
		if a.group != b.group {
			if a.group < b.group {
				return -1
			}
			return 1
		}
		if a.channel < b.channel {
			return -1
		}
		return 1
	})
	for _, v := range victims {
		r.count(r.t.apply(change{group: v.group, drop: v.channel, expired: true, dropSeen: v.seen}, r.eventSink(&evs), r.log))
	}
	r.st.Expired += uint64(len(victims))
	r.st.Events += uint64(len(evs))
	r.events.push(evs)
	r.mu.Unlock()
	r.events.drain()
	for _, v := range victims {
		r.log.Info("consumer: registration expired", "group", v.group, "channel", v.channel, "client", v.client,
			"last_seen", timeOf(v.seen), "expiry", r.expiry)
	}
	return len(victims)
}

// Clients returns the group's clients ordered by client id, then channel id.
// The slice is the caller's.
func (r *Registry) Clients(group string) []Client {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g := r.t.groups[group]
	if g == nil {
		return nil
	}
	return g.snapshot()
}

// FindClient returns the group's client with the given client id; if the
// client is registered on several channels, the most recently seen one.
func (r *Registry) FindClient(group, clientID string) (Client, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var best *entry
	var bestSeen int64
	if g := r.t.groups[group]; g != nil {
		for _, e := range g.clients {
			if e.client.ClientID != clientID {
				continue
			}
			if seen := e.lastSeen.Load(); best == nil || seen > bestSeen ||
				(seen == bestSeen && e.client.ChannelID < best.client.ChannelID) {
				best, bestSeen = e, seen
			}
		}
	}
	if best == nil {
		return Client{}, false
	}
	return best.snapshot(), true
}

// Subscriptions returns the group's subscriptions ordered by topic. The slice
// is the caller's.
func (r *Registry) Subscriptions(group string) []Subscription {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g := r.t.groups[group]
	if g == nil || len(g.subs) == 0 {
		return nil
	}
	out := make([]Subscription, 0, len(g.subs))
	for _, topic := range sortedKeys(g.subs) {
		out = append(out, g.subs[topic])
	}
	return out
}

// GroupsOf returns the groups registered on the channel (the channel
// attribute), sorted. The slice is the caller's.
func (r *Registry) GroupsOf(channelID string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.t.channels[channelID])
}

// GroupsConsuming returns the groups subscribed to topic, sorted. The slice
// is the caller's.
func (r *Registry) GroupsConsuming(topic string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.t.topics[topic])
}

// Groups returns every group with at least one client, sorted. The slice is
// the caller's.
func (r *Registry) Groups() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.t.groups)
}

// Stats returns the current sizes and counters.
func (r *Registry) Stats() Stats {
	r.mu.RLock()
	s := r.st
	s.Groups = uint64(len(r.t.groups))
	s.Clients = uint64(r.t.nClients)
	s.Channels = uint64(len(r.t.channels))
	s.Topics = uint64(len(r.t.topics))
	r.mu.RUnlock()
	s.Heartbeats = uint64(r.heartbeats.Value())
	s.Rejected = r.rejected.Load()
	return s
}

// count folds one outcome into the stats. Called with the write lock held.
func (r *Registry) count(out outcome) {
	r.st.ClientsAdded += uint64(out.added)
	r.st.ClientsRemoved += uint64(out.removed)
	if out.groupRemoved {
		r.st.GroupsRemoved++
	}
}

// eventSink returns where apply should collect events: nowhere when nobody
// listens. Called with the write lock held.
func (r *Registry) eventSink(evs *[]Event) *[]Event {
	if r.events.fn == nil {
		return nil
	}
	return evs
}

// check validates the keys of a call; on failure it logs, counts and returns
// an error wrapping ErrInvalid.
func (r *Registry) check(op, group string, c *Client, subs []Subscription) error {
	why := ""
	switch {
	case group == "":
		why = "empty group"
	case c.ChannelID == "":
		why = "empty channel id"
	case c.ClientID == "":
		why = "empty client id"
	}
	if why == "" {
		for i := range subs {
			if subs[i].Topic == "" {
				why = fmt.Sprintf("subscription %d has an empty topic", i)
				break
			}
		}
	}
	if why == "" {
		return nil
	}
	r.rejected.Add(1)
	// The caller gets the error: DEBUG.
	r.log.Debug("consumer: rejected "+op, "group", group, "channel", c.ChannelID, "client", c.ClientID, "reason", why)
	return fmt.Errorf("consumer: %s group %q channel %q client %q: %s: %w", op, group, c.ChannelID, c.ClientID, why, ErrInvalid)
}

func timeOf(unixNano int64) time.Time { return time.Unix(0, unixNano).UTC() }
