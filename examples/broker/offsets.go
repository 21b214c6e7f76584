package main

import (
	"fmt"
	"net/http"
	"slices"
	"time"
)

// commitIn: POST /v1/offsets/commit.
type commitIn struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int    `json:"queueId"`
	Offset  int64  `json:"offset"`
}

// resetIn: POST /v1/offsets/reset with exactly one of offset or time
// (RFC 3339). Without queueId every queue of the topic is reset.
type resetIn struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID *int   `json:"queueId"`
	Offset  *int64 `json:"offset"`
	Time    string `json:"time"`
}

type offsetOut struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	QueueID   int    `json:"queueId"`
	Committed *int64 `json:"committed"` // null: the group never committed here
	Epoch     uint64 `json:"epoch"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	Lag       int64  `json:"lag"`
}

type resetOut struct {
	Resets []offsetOut `json:"resets"`
}

func (b *Broker) offsetOf(group, topic string, q int) offsetOut {
	out := offsetOut{
		Group:     group,
		Topic:     topic,
		QueueID:   q,
		Epoch:     b.offsets.Epoch(group, topic, q),
		MinOffset: b.store.MinOffset(topic, q),
		MaxOffset: b.store.MaxOffset(topic, q),
	}
	if c, ok := b.offsets.Committed(group, topic, q); ok {
		out.Committed = &c
	}
	out.Lag = b.offsets.Lag(group, topic, q, out.MaxOffset)
	return out
}

func validGroupTopic(group, topic string) error {
	if err := validGroup("group", group); err != nil {
		return err
	}
	return validTopic("topic", topic)
}

// notFound is the 404 answer for a name the broker does not know.
func notFound(code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf(format, args...), Code: code}
}

// knownQueue answers 404 for a topic, or a queue of it, that holds nothing
// readable yet: offsets only exist for what is in the log.
func (b *Broker) knownQueue(topic string, q int) error {
	qs := b.store.Queues(topic)
	switch {
	case len(qs) == 0:
		return notFound("unknown_topic", "topic %s: no messages stored", topic)
	case !slices.Contains(qs, q):
		return notFound("unknown_queue", "topic %s has no queue %d (it has %v)", topic, q, qs)
	}
	return nil
}

// handleCommit: POST /v1/offsets/commit (a client-side consumer's
// progress; pop commits its own on ack). An offset past the queue's end is
// refused as a reset past it is.
func (b *Broker) handleCommit(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in commitIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := validGroupTopic(in.Group, in.Topic); err != nil {
		return nil, err
	}
	if err := validQueue("queueId", in.QueueID); err != nil {
		return nil, err
	}
	if in.Offset < 0 {
		return nil, badField("offset", "must not be negative")
	}
	if err := b.knownQueue(in.Topic, in.QueueID); err != nil {
		return nil, err
	}
	if max := b.store.MaxOffset(in.Topic, in.QueueID); in.Offset > max {
		return nil, badField("offset", "queue %d ends at %d", in.QueueID, max)
	}
	if err := b.offsets.Commit(in.Group, in.Topic, in.QueueID, in.Offset); err != nil {
		return nil, b.fieldError("offset", err)
	}
	return b.offsetOf(in.Group, in.Topic, in.QueueID), nil
}

// offsetsOut is the list answer of GET /v1/offsets.
type offsetsOut struct {
	Group   string      `json:"group"`
	Offsets []offsetOut `json:"offsets"`
}

// handleQueryOffset: GET /v1/offsets?group=g&topic=t&queueId=0 answers one
// queue; without queueId every queue of the topic; without topic every
// queue the group has committed an offset for.
func (b *Broker) handleQueryOffset(_ http.ResponseWriter, r *http.Request) (any, error) {
	qv := r.URL.Query()
	group, topic := qv.Get("group"), qv.Get("topic")
	if err := validGroup("group", group); err != nil {
		return nil, err
	}
	if topic == "" {
		if qv.Has("queueId") {
			return nil, badField("topic", "required with queueId")
		}
		return b.groupOffsets(group)
	}
	if err := validTopic("topic", topic); err != nil {
		return nil, err
	}
	if !qv.Has("queueId") {
		qs := b.store.Queues(topic)
		if len(qs) == 0 {
			return nil, notFound("unknown_topic", "topic %s: no messages stored", topic)
		}
		out := offsetsOut{Group: group, Offsets: make([]offsetOut, 0, len(qs))}
		for _, q := range qs {
			out.Offsets = append(out.Offsets, b.offsetOf(group, topic, q))
		}
		return out, nil
	}
	q, err := queryInt("queueId", qv.Get("queueId"))
	if err != nil {
		return nil, err
	}
	if err := validQueue("queueId", q); err != nil {
		return nil, err
	}
	if err := b.knownQueue(topic, q); err != nil {
		return nil, err
	}
	return b.offsetOf(group, topic, q), nil
}

// groupOffsets lists every queue the group has a committed offset for,
// sorted by topic and queue.
func (b *Broker) groupOffsets(group string) (any, error) {
	out := offsetsOut{Group: group, Offsets: []offsetOut{}}
	for _, topic := range b.offsets.Topics(group) {
		for _, q := range b.store.Queues(topic) {
			if _, ok := b.offsets.Committed(group, topic, q); ok {
				out.Offsets = append(out.Offsets, b.offsetOf(group, topic, q))
			}
		}
	}
	if len(out.Offsets) == 0 {
		return nil, notFound("unknown_group", "group %s has no committed offsets", group)
	}
	return out, nil
}

// handleReset: POST /v1/offsets/reset. The reset bumps the queue's epoch:
// pop drops what it had in flight for the queue on its next pop, and no
// older commit can land over the reset.
func (b *Broker) handleReset(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in resetIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := validGroupTopic(in.Group, in.Topic); err != nil {
		return nil, err
	}
	var at time.Time
	switch {
	case in.Offset != nil && in.Time != "":
		return nil, badField("time", "give offset or time, not both")
	case in.Offset == nil && in.Time == "":
		return nil, badField("offset", "give offset or time")
	case in.Offset != nil && *in.Offset < 0:
		return nil, badField("offset", "must not be negative")
	case in.Time != "":
		var err error
		if at, err = time.Parse(time.RFC3339Nano, in.Time); err != nil {
			return nil, badField("time", "not RFC 3339 (2006-01-02T15:04:05Z): %q", in.Time)
		}
	}
	var queues []int
	if in.QueueID != nil {
		if err := validQueue("queueId", *in.QueueID); err != nil {
			return nil, err
		}
		if err := b.knownQueue(in.Topic, *in.QueueID); err != nil {
			return nil, err
		}
		queues = []int{*in.QueueID}
	} else if queues = b.store.Queues(in.Topic); len(queues) == 0 {
		return nil, notFound("unknown_topic", "topic %s: no messages stored", in.Topic)
	}
	if in.Offset != nil {
		// Check every queue before resetting any: all or nothing.
		for _, q := range queues {
			if max := b.store.MaxOffset(in.Topic, q); *in.Offset > max {
				return nil, badField("offset", "queue %d ends at %d", q, max)
			}
		}
	}
	out := resetOut{Resets: []offsetOut{}}
	for _, q := range queues {
		var err error
		if in.Offset != nil {
			_, err = b.offsets.Reset(in.Group, in.Topic, q, *in.Offset)
		} else {
			_, err = b.offsets.ResetToTime(in.Group, in.Topic, q, at, b.store)
		}
		if err != nil {
			return nil, err
		}
		b.log.Info("offset reset", "group", in.Group, "topic", in.Topic, "queue", q,
			"offset", in.Offset, "time", in.Time, "remote", r.RemoteAddr)
		out.Resets = append(out.Resets, b.offsetOf(in.Group, in.Topic, q))
	}
	return out, nil
}

// statsOut is GET /v1/stats: every package's Stats, in snake_case with
// durations as strings (statsJSON), whatever shape each package gives it.
type statsOut struct {
	Store            any           `json:"store"`
	Pop              any           `json:"pop"`
	Lock             any           `json:"lock"`
	Schedule         any           `json:"schedule"`
	ScheduleProgress map[int]int64 `json:"schedule_progress"`
	Consumer         any           `json:"consumer"`
	Offset           any           `json:"offset"`
	Txn              any           `json:"txn"`
	HTTP             HTTPStats     `json:"http"`
}

func (b *Broker) handleStats(_ http.ResponseWriter, _ *http.Request) (any, error) {
	return statsOut{
		Store:            statsJSON(b.store.Stats()),
		Pop:              statsJSON(b.pop.Stats()),
		Lock:             statsJSON(b.locks.Stats()),
		Schedule:         statsJSON(b.sched.Stats()),
		ScheduleProgress: b.sched.Progress(),
		Consumer:         statsJSON(b.consumers.Stats()),
		Offset:           statsJSON(b.offsets.Stats()),
		Txn:              statsJSON(b.txns.Stats()),
		HTTP:             b.httpStats.snapshot(),
	}, nil
}
