package main

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
)

// ---- queue locks (lock.Table) ----

type queueJSON struct {
	Topic   string `json:"topic"`
	Broker  string `json:"broker"`
	QueueID int    `json:"queueId"`
}

type leaseJSON struct {
	ClientID string    `json:"clientId"`
	Token    uint64    `json:"token"`
	Expires  time.Time `json:"expires"`
}

// lockIn is the body of lock, lock-batch and unlock. lock takes queue;
// lock-batch takes queues; unlock takes either, or all:true to free every
// queue the client holds in any group.
type lockIn struct {
	Group    string      `json:"group"`
	ClientID string      `json:"clientId"`
	Queue    *queueJSON  `json:"queue"`
	Queues   []queueJSON `json:"queues"`
	All      bool        `json:"all"`
}

type lockOut struct {
	Locked bool       `json:"locked"`
	Lease  *leaseJSON `json:"lease,omitempty"`
	Holder *leaseJSON `json:"holder,omitempty"` // who has it when locked is false
}

type lockBatchOut struct {
	Locked []queueJSON `json:"locked"`
}

func (b *Broker) toQueue(field string, q queueJSON) (lock.Queue, error) {
	if err := validTopic(field+".topic", q.Topic); err != nil {
		return lock.Queue{}, err
	}
	if q.Broker == "" {
		q.Broker = b.cfg.Name
	}
	if err := validName(field+".broker", q.Broker); err != nil {
		return lock.Queue{}, err
	}
	if err := validQueue(field+".queueId", q.QueueID); err != nil {
		return lock.Queue{}, err
	}
	return lock.Queue{Topic: q.Topic, Broker: q.Broker, QueueID: q.QueueID}, nil
}

func fromQueue(q lock.Queue) queueJSON {
	return queueJSON{Topic: q.Topic, Broker: q.Broker, QueueID: q.QueueID}
}

func fromLease(l lock.Lease) *leaseJSON {
	return &leaseJSON{ClientID: l.ClientID, Token: l.Token, Expires: l.Expires}
}

func (b *Broker) lockRequest(r *http.Request, needGroup bool) (lockIn, error) {
	var in lockIn
	if err := decode(r, &in); err != nil {
		return in, err
	}
	if needGroup || in.Group != "" {
		if err := validGroup("group", in.Group); err != nil {
			return in, err
		}
	}
	if in.ClientID == "" {
		return in, badField("clientId", "must not be empty")
	}
	return in, validText("clientId", in.ClientID, maxNameLen)
}

func (b *Broker) queues(in lockIn) ([]lock.Queue, error) {
	if len(in.Queues) == 0 {
		return nil, badField("queues", "must not be empty")
	}
	if len(in.Queues) > maxBatch {
		return nil, badField("queues", "more than %d queues", maxBatch)
	}
	qs := make([]lock.Queue, len(in.Queues))
	for i, qj := range in.Queues {
		q, err := b.toQueue("queues["+strconv.Itoa(i)+"]", qj)
		if err != nil {
			return nil, err
		}
		qs[i] = q
	}
	return qs, nil
}

// handleLock: POST /v1/lock takes or renews the lease of one queue.
func (b *Broker) handleLock(_ http.ResponseWriter, r *http.Request) (any, error) {
	in, err := b.lockRequest(r, true)
	if err != nil {
		return nil, err
	}
	if in.Queue == nil {
		return nil, badField("queue", "required")
	}
	q, err := b.toQueue("queue", *in.Queue)
	if err != nil {
		return nil, err
	}
	if lease, ok := b.locks.TryLock(in.Group, q, in.ClientID); ok {
		return lockOut{Locked: true, Lease: fromLease(lease)}, nil
	}
	out := lockOut{}
	if h, ok := b.locks.Holder(in.Group, q); ok {
		out.Holder = fromLease(h)
	}
	return out, nil
}

// handleLockBatch: POST /v1/lock-batch answers the queues now held.
func (b *Broker) handleLockBatch(_ http.ResponseWriter, r *http.Request) (any, error) {
	in, err := b.lockRequest(r, true)
	if err != nil {
		return nil, err
	}
	qs, err := b.queues(in)
	if err != nil {
		return nil, err
	}
	held := b.locks.TryLockBatch(in.Group, qs, in.ClientID)
	out := lockBatchOut{Locked: make([]queueJSON, 0, len(held))}
	for _, q := range held {
		out.Locked = append(out.Locked, fromQueue(q))
	}
	return out, nil
}

// unlockOut answers every form of unlock: unlocked says whether anything
// was released, released how many leases.
type unlockOut struct {
	Unlocked bool `json:"unlocked"`
	Released int  `json:"released"`
}

func released(n int) unlockOut { return unlockOut{Unlocked: n > 0, Released: n} }

// handleUnlock: POST /v1/unlock with queue, queues, or all:true. Only the
// client's own live leases are released.
func (b *Broker) handleUnlock(_ http.ResponseWriter, r *http.Request) (any, error) {
	in, err := b.lockRequest(r, false)
	if err != nil {
		return nil, err
	}
	switch {
	case in.All:
		if in.Queue != nil || len(in.Queues) > 0 {
			return nil, badField("all", "give all, queue or queues, not several")
		}
		return released(b.locks.UnlockAll(in.ClientID)), nil
	case in.Group == "":
		return nil, badField("group", "must not be empty")
	case in.Queue != nil && len(in.Queues) > 0:
		return nil, badField("queues", "give queue or queues, not both")
	case in.Queue != nil:
		in.Queues = []queueJSON{*in.Queue}
	}
	qs, err := b.queues(in)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, q := range qs { // one by one: the answer counts what was really held
		if b.locks.Unlock(in.Group, q, in.ClientID) {
			n++
		}
	}
	return released(n), nil
}

// handleHolder: GET /v1/lock?group=g&topic=t&queueId=0[&broker=b].
func (b *Broker) handleHolder(_ http.ResponseWriter, r *http.Request) (any, error) {
	qv := r.URL.Query()
	group := qv.Get("group")
	if err := validGroup("group", group); err != nil {
		return nil, err
	}
	qid, err := queryInt("queueId", qv.Get("queueId"))
	if err != nil {
		return nil, err
	}
	q, err := b.toQueue("queue", queueJSON{Topic: qv.Get("topic"), Broker: qv.Get("broker"), QueueID: qid})
	if err != nil {
		return nil, err
	}
	out := lockOut{}
	if h, ok := b.locks.Holder(group, q); ok {
		out.Locked, out.Holder = true, fromLease(h)
	}
	return out, nil
}

// ---- consumers (consumer.Registry) ----

type subscriptionJSON struct {
	Topic      string `json:"topic"`
	Expression string `json:"expression"`
	Version    int64  `json:"version"`
}

// heartbeatIn registers a consumer on this connection. Without the
// subscriptions field it is a RegisterWithoutSub (keep-alive only); with it
// (even empty) the group's subscriptions are set.
type heartbeatIn struct {
	Group         string              `json:"group"`
	ClientID      string              `json:"clientId"`
	Language      string              `json:"language"`
	Version       int                 `json:"version"`
	Subscriptions *[]subscriptionJSON `json:"subscriptions"`
}

type clientJSON struct {
	ChannelID string    `json:"channelId"`
	ClientID  string    `json:"clientId"`
	Language  string    `json:"language,omitempty"`
	Version   int       `json:"version,omitempty"`
	LastSeen  time.Time `json:"lastSeen"`
}

type clientsOut struct {
	Group         string             `json:"group"`
	Clients       []clientJSON       `json:"clients"`
	Subscriptions []subscriptionJSON `json:"subscriptions"`
}

func (b *Broker) client(r *http.Request, group, clientID, language string, version int) (consumer.Client, error) {
	if err := validGroup("group", group); err != nil {
		return consumer.Client{}, err
	}
	if clientID == "" {
		return consumer.Client{}, badField("clientId", "must not be empty")
	}
	if err := validText("clientId", clientID, maxNameLen); err != nil {
		return consumer.Client{}, err
	}
	if err := validText("language", language, maxNameLen); err != nil {
		return consumer.Client{}, err
	}
	return consumer.Client{
		ChannelID: channelOf(r),
		ClientID:  clientID,
		Language:  language,
		Version:   version,
		LastSeen:  b.cfg.Now(),
	}, nil
}

// handleHeartbeat: POST /v1/heartbeat. The connection is the channel: when
// it closes, the registry's ChannelClosed removes the consumer at once.
func (b *Broker) handleHeartbeat(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in heartbeatIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	c, err := b.client(r, in.Group, in.ClientID, in.Language, in.Version)
	if err != nil {
		return nil, err
	}
	var changed bool
	if in.Subscriptions == nil {
		changed, err = b.consumers.RegisterWithoutSub(in.Group, c)
	} else {
		if len(*in.Subscriptions) > maxBatch {
			return nil, badField("subscriptions", "more than %d", maxBatch)
		}
		subs := make([]consumer.Subscription, len(*in.Subscriptions))
		for i, s := range *in.Subscriptions {
			f := "subscriptions[" + strconv.Itoa(i) + "]"
			if err := validTopic(f+".topic", s.Topic); err != nil {
				return nil, err
			}
			if s.Expression == "" {
				s.Expression = "*"
			}
			if err := validText(f+".expression", s.Expression, maxValueLen); err != nil {
				return nil, err
			}
			subs[i] = consumer.Subscription{Topic: s.Topic, Expression: s.Expression, Version: s.Version}
		}
		changed, err = b.consumers.Register(in.Group, c, subs)
	}
	if err != nil {
		return nil, err
	}
	b.channels.Store(c.ChannelID, struct{}{})
	return map[string]any{"changed": changed, "channelId": c.ChannelID}, nil
}

type unregisterIn struct {
	Group    string `json:"group"`
	ClientID string `json:"clientId"`
}

// handleUnregister: POST /v1/unregister removes the client from the group
// (on this connection's channel).
func (b *Broker) handleUnregister(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in unregisterIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	c, err := b.client(r, in.Group, in.ClientID, "", 0)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(b.consumers.Clients(in.Group), func(k consumer.Client) bool {
		return k.ClientID == c.ClientID && k.ChannelID == c.ChannelID
	}) {
		return nil, notFound("unknown_client", "client %s is not registered in group %s on this connection", in.ClientID, in.Group)
	}
	if err := b.consumers.Unregister(in.Group, c); err != nil {
		return nil, err
	}
	return map[string]bool{"unregistered": true}, nil
}

// handleClients: GET /v1/groups/{group}/clients.
func (b *Broker) handleClients(_ http.ResponseWriter, r *http.Request) (any, error) {
	group := r.PathValue("group")
	if err := validGroup("group", group); err != nil {
		return nil, err
	}
	clients := b.consumers.Clients(group)
	if len(clients) == 0 { // a group lives as long as it has a client
		return nil, notFound("unknown_group", "group %s has no clients", group)
	}
	out := clientsOut{Group: group, Clients: []clientJSON{}, Subscriptions: []subscriptionJSON{}}
	for _, c := range clients {
		out.Clients = append(out.Clients, clientJSON{
			ChannelID: c.ChannelID, ClientID: c.ClientID, Language: c.Language, Version: c.Version, LastSeen: c.LastSeen,
		})
	}
	for _, s := range b.consumers.Subscriptions(group) {
		out.Subscriptions = append(out.Subscriptions, subscriptionJSON{Topic: s.Topic, Expression: s.Expression, Version: s.Version})
	}
	return out, nil
}

func queryInt(field, v string) (int, error) {
	if v == "" {
		return 0, badField(field, "required")
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badField(field, "not an integer: %q", v)
	}
	return n, nil
}
