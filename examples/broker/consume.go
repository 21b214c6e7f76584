package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Pop limits. Invisible times are not limited here: pop clamps them into
// [pop.DefaultMinInvisible, pop.DefaultMaxInvisible] and the answer says
// what it applied. A max or invisible left out is pop's own default (1
// message, pop.DefaultInvisible).
const (
	maxPopBatch     = 32
	maxAttemptIDLen = 128
	maxHandleLen    = 1024
)

// popIn carries every pop.Request field. queueId left out means every
// queue of the topic (pop.AllQueues). Durations are Go duration strings
// ("30s", "1m").
//
//	{"group":"g","topic":"orders","clientId":"c1","max":8,"invisible":"30s",
//	 "poll":"10s","fifo":true,"attemptId":"a-1","filter":"paid || shipped"}
type popIn struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	ClientID  string `json:"clientId"`
	QueueID   *int   `json:"queueId"`
	Max       int    `json:"max"`
	Invisible string `json:"invisible"`
	Poll      string `json:"poll"`
	FIFO      bool   `json:"fifo"`
	AttemptID string `json:"attemptId"`
	Filter    string `json:"filter"`
}

// messageOut is a stored message as the API shows it. body is set when the
// bytes are valid UTF-8, bodyBase64 otherwise.
type messageOut struct {
	Topic          string            `json:"topic"`
	QueueID        int               `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	LogOffset      int64             `json:"logOffset"`
	Tags           string            `json:"tags,omitempty"`
	Keys           []string          `json:"keys,omitempty"`
	Properties     map[string]string `json:"properties,omitempty"`
	Body           *string           `json:"body,omitempty"`
	BodyBase64     *string           `json:"bodyBase64,omitempty"`
	BornAt         time.Time         `json:"bornAt"`
	StoredAt       time.Time         `json:"storedAt"`
	ReconsumeTimes int               `json:"reconsumeTimes,omitempty"`
}

type deliveryOut struct {
	Handle   string `json:"handle"`
	Attempts int    `json:"attempts"`
	messageOut
}

// popOut is the pop answer. invisible is the invisible time pop applied
// (the request's, clamped into 1s..12h; clamped says it was).
type popOut struct {
	Messages  []deliveryOut `json:"messages"`
	Invisible string        `json:"invisible"`
	Clamped   bool          `json:"clamped,omitempty"`
}

// ackIn acks one handle, or several with handles (each answered on its
// own: one bad handle does not fail the others).
type ackIn struct {
	Handle  string   `json:"handle,omitempty"`
	Handles []string `json:"handles,omitempty"`
}

type ackResult struct {
	Handle string `json:"handle"`
	Acked  bool   `json:"acked"`
	Error  string `json:"error,omitempty"`
	Code   string `json:"code,omitempty"`
}

type ackBatchOut struct {
	Results []ackResult `json:"results"`
}

type changeIn struct {
	Handle    string `json:"handle"`
	Invisible string `json:"invisible"`
}

// changeOut is the change-invisible answer: the new handle, and the
// invisible time applied (clamped into 1s..12h like a pop's; clamped says
// it was).
type changeOut struct {
	Handle    string `json:"handle"`
	Invisible string `json:"invisible"`
	Clamped   bool   `json:"clamped,omitempty"`
}

func toMessageOut(m *store.Message) messageOut {
	o := messageOut{
		Topic:          m.Topic,
		QueueID:        m.QueueID,
		QueueOffset:    m.QueueOffset,
		LogOffset:      m.LogOffset,
		Tags:           m.Tags,
		Keys:           m.Keys,
		Properties:     m.Properties,
		BornAt:         m.BornAt,
		StoredAt:       m.StoredAt,
		ReconsumeTimes: m.ReconsumeTimes,
	}
	if utf8.Valid(m.Body) {
		s := string(m.Body)
		o.Body = &s
	} else {
		s := base64.StdEncoding.EncodeToString(m.Body)
		o.BodyBase64 = &s
	}
	return o
}

// duration parses an optional Go duration field within [0, max] (max 0:
// no upper bound).
func duration(field, v string, def, max time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, badField(field, "not a duration like \"30s\": %q", v)
	}
	if d < 0 {
		return 0, badField(field, "must not be negative")
	}
	if max > 0 && d > max {
		return 0, badField(field, "must be 0..%s", max)
	}
	return d, nil
}

// clampInvisible is what pop applies to an invisible time (the broker runs
// pop with its default bounds).
func clampInvisible(d time.Duration) (time.Duration, bool) {
	switch {
	case d < pop.DefaultMinInvisible:
		return pop.DefaultMinInvisible, true
	case d > pop.DefaultMaxInvisible:
		return pop.DefaultMaxInvisible, true
	}
	return d, false
}

func (b *Broker) popRequest(in popIn) (pop.Request, error) {
	req := pop.Request{Group: in.Group, Topic: in.Topic, ClientID: in.ClientID, FIFO: in.FIFO, AttemptID: in.AttemptID, Filter: in.Filter}
	if err := validGroup("group", in.Group); err != nil {
		return req, err
	}
	if err := validTopic("topic", in.Topic); err != nil {
		return req, err
	}
	if in.ClientID == "" {
		return req, badField("clientId", "must not be empty")
	}
	if err := validText("clientId", in.ClientID, maxNameLen); err != nil {
		return req, err
	}
	req.QueueID = pop.AllQueues
	if in.QueueID != nil {
		if err := validQueue("queueId", *in.QueueID); err != nil {
			return req, err
		}
		req.QueueID = *in.QueueID
	}
	req.Max = in.Max // 0: pop's default, one message
	if req.Max < 0 || req.Max > maxPopBatch {
		return req, badField("max", "must be 1..%d (0 or left out: 1)", maxPopBatch)
	}
	var err error
	// Left out: 0, pop's default. An explicit "0s" is refused rather than
	// read as "the default", which nobody writing it means.
	if req.Invisible, err = duration("invisible", in.Invisible, 0, 0); err != nil {
		return req, err
	}
	if in.Invisible != "" && req.Invisible == 0 {
		return req, badField("invisible", "must be more than 0 (leave it out for the default %s)", pop.DefaultInvisible)
	}
	if req.Poll, err = duration("poll", in.Poll, 0, b.cfg.MaxPoll); err != nil {
		return req, err
	}
	if in.AttemptID != "" && !in.FIFO {
		return req, badField("attemptId", "only FIFO pops carry an attemptId")
	}
	if err := validText("attemptId", in.AttemptID, maxAttemptIDLen); err != nil {
		return req, err
	}
	return req, validText("filter", in.Filter, maxValueLen)
}

// handlePop: POST /v1/pop. A long poll ends when a message arrives, when
// Poll runs out, when the client goes away (request context) or when the
// broker shuts down (pollCtx).
func (b *Broker) handlePop(w http.ResponseWriter, r *http.Request) (any, error) {
	var in popIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	req, err := b.popRequest(in)
	if err != nil {
		return nil, err
	}
	// The server's WriteTimeout counts from the request's arrival; a long
	// poll gets its Poll on top. A FIFO pop with Poll 0 may still wait for
	// the group lock up to pop's LockWait, which the base timeout covers.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(req.Poll + b.cfg.WriteTimeout))

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(b.pollCtx, cancel)
	defer stop()

	if req.Poll > 0 {
		b.httpStats.LongPolls.Add(1)
		defer b.httpStats.LongPolls.Add(-1)
	}
	res, err := b.pop.Pop(ctx, req)
	if err != nil {
		switch {
		case r.Context().Err() != nil:
			return nil, errClientGone
		case b.pollCtx.Err() != nil:
			return nil, errShuttingDown
		case errors.Is(err, pop.ErrInvalid) && strings.Contains(err.Error(), "filter"):
			return nil, b.fieldError("filter", err) // the filter's syntax is pop's to check
		}
		return nil, err
	}
	out := popOut{Messages: make([]deliveryOut, 0, len(res.Messages)), Invisible: res.Invisible.String(), Clamped: res.Clamped}
	for _, d := range res.Messages {
		out.Messages = append(out.Messages, deliveryOut{Handle: d.Handle, Attempts: d.Attempts, messageOut: toMessageOut(d.Message)})
	}
	return out, nil
}

func validHandle(field, h string) error {
	if h == "" {
		return badField(field, "must not be empty")
	}
	if len(h) > maxHandleLen {
		return badField(field, "longer than %d bytes", maxHandleLen)
	}
	return nil
}

// handleAck: POST /v1/ack.
func (b *Broker) handleAck(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in ackIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Handles == nil {
		if err := validHandle("handle", in.Handle); err != nil {
			return nil, err
		}
		if err := b.pop.Ack(in.Handle); err != nil {
			return nil, err
		}
		return map[string]bool{"acked": true}, nil
	}
	switch {
	case in.Handle != "":
		return nil, badField("handles", "give handle or handles, not both")
	case len(in.Handles) == 0:
		return nil, badField("handles", "must not be empty")
	case len(in.Handles) > maxBatch:
		return nil, badField("handles", "more than %d handles", maxBatch)
	}
	for i, h := range in.Handles {
		if err := validHandle(fmt.Sprintf("handles[%d]", i), h); err != nil {
			return nil, err
		}
	}
	out := ackBatchOut{Results: make([]ackResult, len(in.Handles))}
	for i, h := range in.Handles {
		out.Results[i] = ackResult{Handle: h, Acked: true}
		if err := b.pop.Ack(h); err != nil {
			ae := b.toAPIError(err)
			out.Results[i] = ackResult{Handle: h, Error: ae.Message, Code: ae.Code}
		}
	}
	return out, nil
}

// handleChangeInvisible: POST /v1/change-invisible. "0s" makes the message
// visible again after pop's least invisible time, 1 s (a nak); the answer
// carries the new handle and the time applied, and the old handle is stale
// from now on.
func (b *Broker) handleChangeInvisible(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in changeIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := validHandle("handle", in.Handle); err != nil {
		return nil, err
	}
	if in.Invisible == "" {
		return nil, badField("invisible", "required, e.g. \"30s\"")
	}
	d, err := duration("invisible", in.Invisible, 0, 0)
	if err != nil {
		return nil, err
	}
	h, err := b.pop.ChangeInvisible(in.Handle, d)
	if err != nil {
		return nil, err
	}
	applied, clamped := clampInvisible(d)
	return changeOut{Handle: h, Invisible: applied.String(), Clamped: clamped}, nil
}
