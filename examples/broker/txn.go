package main

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/brokercore/brokercore/txn"
)

// Transactions over HTTP, through the library's txn.Manager
// (brokercore.Broker.Transactions):
//
//	POST /v1/transactions               prepare: a half message, not yet on its topic
//	POST /v1/transactions/{id}/commit   deliver it (exactly once; again = no-op)
//	POST /v1/transactions/{id}/rollback discard it
//	POST /v1/transactions/checks        a producer's long poll for check-backs
//
// An open transaction is checked back with a producer of its group: the
// broker queues the check for the group, and a producer that long-polls
// /v1/transactions/checks receives it and answers with commit or rollback
// (?fromCheck=true). A group nobody polled for producerLiveFor has no live
// producer: the check counts toward the limit all the same, as in RocketMQ.

// Check-back limits.
const (
	maxChecksQueued = 10000           // per group; the oldest are dropped past it
	maxCheckBatch   = 256             // checks one poll returns at most
	producerLiveFor = 2 * time.Minute // a group's producer counts as live this long after a poll
)

// prepareIn is a transactional message: a message (no delay, no timer)
// and the producer group whose producers answer its check-backs.
type prepareIn struct {
	Group string `json:"group"`
	messageIn
}

// prepared answers a prepare: the transaction's id and where its half sits.
type prepared struct {
	ID       int64     `json:"id"`
	Group    string    `json:"group"`
	Topic    string    `json:"topic"`
	QueueID  int       `json:"queueId"`
	StoredAt time.Time `json:"storedAt"`
}

// resolved answers a commit or rollback.
type resolved struct {
	ID         int64  `json:"id"`
	Resolution string `json:"resolution"`
}

// checksIn is a producer's poll for check-backs.
type checksIn struct {
	Group    string `json:"group"`
	ClientID string `json:"clientId"`
	Max      int    `json:"max"`
	Poll     string `json:"poll"`
}

// checkOut is one check-back: answer it with commit or rollback of ID.
type checkOut struct {
	ID    int64 `json:"id"`
	Times int   `json:"times"`
	messageOut
}

type checksOut struct {
	Checks []checkOut `json:"checks"`
}

// handlePrepare: POST /v1/transactions.
func (b *Broker) handlePrepare(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in prepareIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := validName("group", in.Group); err != nil {
		return nil, err
	}
	if in.DelayLevel != 0 || in.DeliverAt != "" || in.Delay != "" {
		return nil, badField("delay", "a transactional message cannot be delayed or timed")
	}
	m, err := b.toMessage("", in.messageIn)
	if err != nil {
		return nil, err
	}
	h, err := b.txns.Prepare(m, in.Group)
	if err != nil {
		return nil, b.fieldError("properties", err)
	}
	return prepared{ID: h.QueueOffset, Group: in.Group, Topic: m.Topic, QueueID: m.QueueID, StoredAt: h.StoredAt}, nil
}

// handleEnd serves /v1/transactions/{id}/commit and /rollback.
func (b *Broker) handleEnd(res txn.Resolution) func(http.ResponseWriter, *http.Request) (any, error) {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id < 0 {
			return nil, badField("id", "must be a transaction id (a non-negative integer)")
		}
		src := txn.FromClient
		switch v := r.URL.Query().Get("fromCheck"); v {
		case "", "false":
		case "true":
			src = txn.FromCheck
		default:
			return nil, badField("fromCheck", "must be true or false")
		}
		if err := b.txns.End(id, res, src); err != nil {
			return nil, err
		}
		return resolved{ID: id, Resolution: res.String()}, nil
	}
}

// handleChecks: POST /v1/transactions/checks, a long poll that ends with
// the checks queued for the group, when Poll runs out, when the client
// goes away or when the broker shuts down.
func (b *Broker) handleChecks(w http.ResponseWriter, r *http.Request) (any, error) {
	var in checksIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := validName("group", in.Group); err != nil {
		return nil, err
	}
	if in.ClientID != "" {
		if err := validName("clientId", in.ClientID); err != nil {
			return nil, err
		}
	}
	if in.Max < 0 || in.Max > maxCheckBatch {
		return nil, badField("max", "must be 1..%d (0 or left out: %d)", maxCheckBatch, maxCheckBatch)
	}
	if in.Max == 0 {
		in.Max = maxCheckBatch
	}
	poll, err := duration("poll", in.Poll, 0, b.cfg.MaxPoll)
	if err != nil {
		return nil, err
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(poll + b.cfg.WriteTimeout))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(b.pollCtx, cancel)
	defer stop()
	if poll > 0 {
		b.httpStats.LongPolls.Add(1)
		defer b.httpStats.LongPolls.Add(-1)
	}
	checks := b.checks.take(ctx, in.Group, in.Max, poll)
	if r.Context().Err() != nil {
		b.checks.putBack(in.Group, checks)
		return nil, errClientGone
	}
	out := checksOut{Checks: make([]checkOut, 0, len(checks))}
	for _, c := range checks {
		times, _ := strconv.Atoi(c.Message.Properties[txn.PropCheckTimes])
		mo := toMessageOut(c.Message)
		out.Checks = append(out.Checks, checkOut{ID: c.ID, Times: times, messageOut: mo})
	}
	return out, nil
}

// checkHub is the broker's txn.Checker: per producer group, a queue of
// checks that the group's producers long-poll.
type checkHub struct {
	now func() time.Time

	mu     sync.Mutex
	groups map[string]*checkGroup
}

type checkGroup struct {
	queue    []txn.Check
	wake     chan struct{} // closed and replaced when checks are queued
	polling  int
	lastPoll time.Time
}

func newCheckHub(now func() time.Time) *checkHub {
	return &checkHub{now: now, groups: map[string]*checkGroup{}}
}

func (h *checkHub) group(name string) *checkGroup {
	g := h.groups[name]
	if g == nil {
		g = &checkGroup{wake: make(chan struct{})}
		h.groups[name] = g
	}
	return g
}

// errNoProducer answers a check for a group with no live producer.
var errNoProducer = &apiError{Status: http.StatusServiceUnavailable, Message: "no producer of the group polls for checks", Code: "no_producer"}

// Check queues c for its group when a producer of the group is live.
func (h *checkHub) Check(c txn.Check) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.groups[c.Group]
	if g == nil || g.polling == 0 && h.now().Sub(g.lastPoll) > producerLiveFor {
		return errNoProducer
	}
	g.queue = append(g.queue, c)
	if len(g.queue) > maxChecksQueued {
		g.queue = g.queue[len(g.queue)-maxChecksQueued:]
	}
	close(g.wake)
	g.wake = make(chan struct{})
	return nil
}

// take returns up to max queued checks of group, waiting up to poll for
// one.
func (h *checkHub) take(ctx context.Context, group string, max int, poll time.Duration) []txn.Check {
	var timeout <-chan time.Time
	if poll > 0 {
		t := time.NewTimer(poll)
		defer t.Stop()
		timeout = t.C
	}
	h.mu.Lock()
	g := h.group(group)
	g.polling++
	defer func() {
		h.mu.Lock()
		g.polling--
		g.lastPoll = h.now()
		h.mu.Unlock()
	}()
	for {
		if n := min(max, len(g.queue)); n > 0 || poll == 0 {
			out := append([]txn.Check(nil), g.queue[:n]...)
			g.queue = g.queue[n:]
			h.mu.Unlock()
			return out
		}
		wake := g.wake
		h.mu.Unlock()
		select {
		case <-wake:
		case <-timeout:
			poll = 0
		case <-ctx.Done():
			poll = 0
		}
		h.mu.Lock()
	}
}

// putBack returns checks a poller could not hand over to the front of the
// group's queue.
func (h *checkHub) putBack(group string, checks []txn.Check) {
	if len(checks) == 0 {
		return
	}
	h.mu.Lock()
	g := h.group(group)
	g.queue = append(append([]txn.Check(nil), checks...), g.queue...)
	h.mu.Unlock()
}
