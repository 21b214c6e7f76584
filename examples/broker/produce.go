package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// Input limits. They keep one request from creating unbounded state (a
// million queues, a megabyte of keys); the store's own MaxMessageSize still
// bounds the body.
const (
	maxNameLen    = 255
	maxQueueID    = 1023
	maxKeys       = 32
	maxProperties = 64
	maxValueLen   = 4096
	maxBatch      = 256
)

// messageIn is one message a producer sends.
//
//	{"topic":"orders","queueId":0,"tags":"paid","keys":["order-1"],
//	 "properties":{"region":"eu"},"body":"hello","delayLevel":1}
//
// body is UTF-8 text; bodyBase64 carries binary instead (one of the two).
// At most one of delayLevel (a schedule level), deliverAt (an RFC 3339
// time) and delay (a Go duration from now) delays the message; the last
// two make it a timer (schedule.At), which POST /v1/timers/cancel stops.
type messageIn struct {
	Topic      string            `json:"topic"`
	QueueID    int               `json:"queueId"`
	Tags       string            `json:"tags"`
	Keys       []string          `json:"keys"`
	Properties map[string]string `json:"properties"`
	Body       *string           `json:"body"`
	BodyBase64 *string           `json:"bodyBase64"`
	DelayLevel int               `json:"delayLevel"`
	DeliverAt  string            `json:"deliverAt"`
	Delay      string            `json:"delay"`
}

// produced is the answer for one appended message. A delayed message is
// stored in the schedule topic first, so it has no queue offset in its real
// topic yet; deliverAt says when it will get one.
type produced struct {
	Topic       string     `json:"topic"`
	QueueID     int        `json:"queueId"`
	QueueOffset *int64     `json:"queueOffset,omitempty"`
	LogOffset   int64      `json:"logOffset"`
	StoredAt    time.Time  `json:"storedAt"`
	DelayLevel  int        `json:"delayLevel,omitempty"`
	DeliverAt   *time.Time `json:"deliverAt,omitempty"`
	// UniqKey is the message's unique key when it is delayed: what
	// POST /v1/timers/cancel takes for a timer.
	UniqKey string `json:"uniqKey,omitempty"`
}

type batchIn struct {
	Messages []messageIn `json:"messages"`
}

type batchOut struct {
	Messages []produced `json:"messages"`
}

// validName checks a name that is neither a topic nor a group (a broker
// name): letters, digits and -_.%|, at most maxNameLen bytes.
func validName(field, v string) error {
	if v == "" {
		return badField(field, "must not be empty")
	}
	if len(v) > maxNameLen {
		return badField(field, "longer than %d bytes", maxNameLen)
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.%|", c)) {
			return badField(field, "may only hold letters, digits and -_.%%|")
		}
	}
	return nil
}

// validTopic, validSendTopic and validGroup check names with the library's
// rules, so this front-end refuses what every other refuses: any topic
// name (brokercore.CheckTopicName: [%|a-zA-Z0-9_-]{1,127}), a topic a
// client may produce to — none the core reserves for the scheduler,
// transactions, retries or dead letters (brokercore.CheckClientTopic) —
// and a group name (brokercore.CheckGroupName).
func validTopic(field, v string) error     { return nameError(field, brokercore.CheckTopicName(v)) }
func validSendTopic(field, v string) error { return nameError(field, brokercore.CheckClientTopic(v)) }
func validGroup(field, v string) error     { return nameError(field, brokercore.CheckGroupName(v)) }

func nameError(field string, err error) error {
	if err == nil {
		return nil
	}
	return badField(field, "%v", err)
}

func validText(field, v string, max int) error {
	if len(v) > max {
		return badField(field, "longer than %d bytes", max)
	}
	if !utf8.ValidString(v) {
		return badField(field, "not valid UTF-8")
	}
	return nil
}

func validQueue(field string, q int) error {
	if q < 0 || q > maxQueueID {
		return badField(field, "must be 0..%d", maxQueueID)
	}
	return nil
}

// toMessage validates one incoming message; prefix names its place in a
// batch ("messages[3].").
func (b *Broker) toMessage(prefix string, in messageIn) (*store.Message, error) {
	if err := validSendTopic(prefix+"topic", in.Topic); err != nil {
		return nil, err
	}
	if err := validQueue(prefix+"queueId", in.QueueID); err != nil {
		return nil, err
	}
	if err := validText(prefix+"tags", in.Tags, maxNameLen); err != nil {
		return nil, err
	}
	if len(in.Keys) > maxKeys {
		return nil, badField(prefix+"keys", "more than %d keys", maxKeys)
	}
	for i, k := range in.Keys {
		f := fmt.Sprintf("%skeys[%d]", prefix, i)
		if k == "" {
			return nil, badField(f, "must not be empty")
		}
		if err := validText(f, k, maxNameLen); err != nil {
			return nil, err
		}
	}
	if len(in.Properties) > maxProperties {
		return nil, badField(prefix+"properties", "more than %d entries", maxProperties)
	}
	for k, v := range in.Properties {
		f := prefix + "properties." + k
		if k == "" {
			return nil, badField(prefix+"properties", "empty property name")
		}
		if err := validText(f, k, maxNameLen); err != nil {
			return nil, err
		}
		if err := validText(f, v, maxValueLen); err != nil {
			return nil, err
		}
	}
	var body []byte
	switch {
	case in.Body != nil && in.BodyBase64 != nil:
		return nil, badField(prefix+"bodyBase64", "give body or bodyBase64, not both")
	case in.Body != nil:
		body = []byte(*in.Body)
	case in.BodyBase64 != nil:
		var err error
		if body, err = base64.StdEncoding.DecodeString(*in.BodyBase64); err != nil {
			return nil, badField(prefix+"bodyBase64", "not standard base64: %v", err)
		}
	}
	if len(body) == 0 {
		return nil, badField(prefix+"body", "must not be empty")
	}
	if len(body) > store.DefaultMaxMessageSize {
		return nil, badField(prefix+"body", "larger than %d bytes", store.DefaultMaxMessageSize)
	}
	if in.DelayLevel < 0 || in.DelayLevel > len(b.levels) {
		return nil, badField(prefix+"delayLevel", "must be 0 (none) or 1..%d", len(b.levels))
	}
	m := &store.Message{
		Topic:      in.Topic,
		QueueID:    in.QueueID,
		Tags:       in.Tags,
		Keys:       in.Keys,
		Body:       body,
		Properties: in.Properties,
		BornAt:     b.cfg.Now(),
	}
	return b.delayed(prefix, in, m)
}

// delayed rewrites m for the scheduler when in asks for a delay: a level,
// or a timer at deliverAt or after delay.
func (b *Broker) delayed(prefix string, in messageIn, m *store.Message) (*store.Message, error) {
	set := 0
	for _, on := range []bool{in.DelayLevel != 0, in.DeliverAt != "", in.Delay != ""} {
		if on {
			set++
		}
	}
	switch {
	case set > 1:
		return nil, badField(prefix+"delay", "give one of delayLevel, deliverAt and delay")
	case in.DelayLevel != 0:
		d, err := b.sched.Delay(m, in.DelayLevel)
		if err != nil {
			return nil, b.fieldError(prefix+"delayLevel", err)
		}
		return d, nil
	case in.DeliverAt != "":
		at, err := time.Parse(time.RFC3339Nano, in.DeliverAt)
		if err != nil {
			return nil, badField(prefix+"deliverAt", "not RFC 3339 (2006-01-02T15:04:05Z): %q", in.DeliverAt)
		}
		d, err := b.sched.At(m, at)
		if err != nil {
			return nil, b.fieldError(prefix+"deliverAt", err)
		}
		return d, nil
	case in.Delay != "":
		wait, err := duration(prefix+"delay", in.Delay, 0, 0)
		if err != nil {
			return nil, err
		}
		d, err := b.sched.At(m, b.cfg.Now().Add(wait))
		if err != nil {
			return nil, b.fieldError(prefix+"delay", err)
		}
		return d, nil
	}
	return m, nil
}

// deliverAt is when the scheduler delivers the delayed message m, as
// stored: a level's wait after StoredAt, or a timer's time.
func (b *Broker) deliverAt(in messageIn, m *store.Message) time.Time {
	if in.DelayLevel > 0 {
		return m.StoredAt.Add(b.levels[in.DelayLevel-1])
	}
	ms, _ := strconv.ParseInt(m.Properties[schedule.PropTimerDeliverMS], 10, 64)
	if at := time.UnixMilli(ms).UTC(); at.After(m.StoredAt) {
		return at
	}
	return m.StoredAt // a time in the past is delivered at once

}

func (b *Broker) produced(in messageIn, m *store.Message) produced {
	p := produced{
		Topic:      in.Topic,
		QueueID:    in.QueueID,
		LogOffset:  m.LogOffset,
		StoredAt:   m.StoredAt,
		DelayLevel: in.DelayLevel,
	}
	if m.Topic == in.Topic { // not delayed
		off := m.QueueOffset
		p.QueueOffset = &off
		return p
	}
	at := b.deliverAt(in, m)
	p.DeliverAt = &at
	p.UniqKey = m.Properties[schedule.PropUniqKey]
	return p
}

// handleProduce: POST /v1/messages appends one message (through the
// scheduler when it has a delayLevel).
func (b *Broker) handleProduce(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in messageIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	m, err := b.toMessage("", in)
	if err != nil {
		return nil, err
	}
	if err := b.store.Append(m); err != nil {
		return nil, err
	}
	return b.produced(in, m), nil
}

// handleProduceBatch: POST /v1/messages/batch appends every message in one
// atomic store batch: all are stored or none.
func (b *Broker) handleProduceBatch(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in batchIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if len(in.Messages) == 0 {
		return nil, badField("messages", "must not be empty")
	}
	if len(in.Messages) > maxBatch {
		return nil, badField("messages", "more than %d messages", maxBatch)
	}
	msgs := make([]*store.Message, len(in.Messages))
	for i, mi := range in.Messages {
		m, err := b.toMessage(fmt.Sprintf("messages[%d].", i), mi)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	if err := b.store.Append(msgs...); err != nil {
		return nil, err
	}
	out := batchOut{Messages: make([]produced, len(msgs))}
	for i, m := range msgs {
		out.Messages[i] = b.produced(in.Messages[i], m)
	}
	return out, nil
}

type cancelIn struct {
	UniqKey string `json:"uniqKey"`
}

// handleCancelTimer: POST /v1/timers/cancel stops a timer (a message
// produced with deliverAt or delay) that has not been delivered, durably.
func (b *Broker) handleCancelTimer(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in cancelIn
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.UniqKey == "" {
		return nil, badField("uniqKey", "must not be empty")
	}
	if err := validText("uniqKey", in.UniqKey, maxNameLen); err != nil {
		return nil, err
	}
	if err := b.sched.Cancel(in.UniqKey); err != nil {
		return nil, err
	}
	return map[string]bool{"cancelled": true}, nil
}
