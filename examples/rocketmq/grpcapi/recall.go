package grpcapi

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// recallVersion is the first field of a recall handle (Apache's HandleV1).
const recallVersion = "v1"

// recallHandle is Apache RocketMQ 5.3's recall handle of a timer message
// (RecallMessageHandle.HandleV1): base64url, padded, of "v1 <topic>
// <broker name> <timestamp> <message id>", the timestamp being the timer's
// time in Unix ms plus one (Apache adds one to its floored timer time).
// Like Apache's it is not signed: it only names a timer, and cancelling is
// what a producer of the topic may do anyway.
func recallHandle(topic, broker string, dueMS int64, id string) string {
	raw := strings.Join([]string{recallVersion, topic, broker, strconv.FormatInt(dueMS+1, 10), id}, " ")
	return base64.URLEncoding.EncodeToString([]byte(raw))
}

// parsedRecall is a decoded recall handle.
type parsedRecall struct {
	topic, broker, id string
	dueMS             int64 // the timer's time (the handle's timestamp - 1)
}

var errBadRecall = errors.New("recall handle is invalid") // Apache's words

// parseRecallHandle decodes a handle, padded or not, as Apache's
// decodeHandle does (a timestamp that is not a number is refused later, as
// an invalid timestamp).
func parseRecallHandle(h string) (parsedRecall, error) {
	if h == "" {
		return parsedRecall{}, errBadRecall
	}
	raw, err := base64.URLEncoding.DecodeString(h)
	if err != nil {
		raw, err = base64.RawURLEncoding.DecodeString(h)
	}
	if err != nil {
		return parsedRecall{}, errBadRecall
	}
	f := strings.Split(string(raw), " ")
	if len(f) < 5 || f[0] != recallVersion {
		return parsedRecall{}, errBadRecall
	}
	ts, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		ts = -1
	}
	return parsedRecall{topic: f[1], broker: f[2], id: f[4], dueMS: ts - 1}, nil
}

// recallHandleFor is the handle of a stored message if it is a timer (a
// DELAY message handed to the scheduler), else "".
func (s *Server) recallHandleFor(topic, id string, m *store.Message) string {
	if m.Topic != schedule.TimerTopic {
		return ""
	}
	due, err := strconv.ParseInt(m.Properties[schedule.PropTimerDeliverMS], 10, 64)
	if err != nil {
		return ""
	}
	return recallHandle(topic, s.opts.BrokerName, due, id)
}

// RecallMessage cancels a scheduled (DELAY) message by the recall handle
// its send answered, through the scheduler's timer cancel
// (schedule.Scheduler.CancelAt, or Options.Timers': a Timers refusing
// with ErrNotWritable is UNAVAILABLE). The answers are Apache's proxy's:
// a bad topic name is ILLEGAL_TOPIC; a handle that does not decode, names
// another topic or broker, or a time already passed is
// INTERNAL_SERVER_ERROR with Apache's words (its broker's ILLEGAL_OPERATION,
// which the proxy maps so); recalling twice is OK. One difference: a
// handle that names no timer is NOT_FOUND (Apache writes a delete marker
// blindly and answers OK).
func (s *Server) RecallMessage(ctx context.Context, req *v2.RecallMessageRequest) (*v2.RecallMessageResponse, error) {
	s.seen(ctx)
	topic := req.GetTopic().GetName()
	refuse := func(st *v2.Status) (*v2.RecallMessageResponse, error) {
		return &v2.RecallMessageResponse{Status: s.reject(ctx, "RecallMessage", st, "topic", topic)}, nil
	}
	if !validTopic(topic) {
		return refuse(status(v2.Code_ILLEGAL_TOPIC, "illegal topic name %q", topic))
	}
	timers := s.opts.Timers
	if sched := s.b.Scheduler(); timers == nil && sched != nil {
		timers = sched
	}
	if timers == nil {
		return refuse(status(v2.Code_UNSUPPORTED, "recall failed, the broker has no timer scheduler"))
	}
	h, err := parseRecallHandle(req.GetRecallHandle())
	switch {
	case err != nil:
		return refuse(status(v2.Code_INTERNAL_SERVER_ERROR, "%v", err))
	case h.topic != topic:
		return refuse(status(v2.Code_INTERNAL_SERVER_ERROR, "recall failed, topic not match"))
	case h.broker != s.opts.BrokerName:
		return refuse(status(v2.Code_INTERNAL_SERVER_ERROR, "recall failed, broker service not available"))
	case h.dueMS < 0 || h.dueMS+1 <= s.opts.Now().UnixMilli():
		return refuse(status(v2.Code_INTERNAL_SERVER_ERROR, "recall failed, timestamp invalid"))
	}
	err = timers.CancelAt(h.id, time.UnixMilli(h.dueMS))
	switch {
	case err == nil, errors.Is(err, schedule.ErrCancelled):
	case errors.Is(err, ErrNotWritable):
		return nil, unavailable(err) // the client retries (a follower forwards to the leader)
	case errors.Is(err, schedule.ErrTimerNotFound):
		return refuse(status(v2.Code_NOT_FOUND, "recall failed, no scheduled message %s at %d on topic %s", h.id, h.dueMS, topic))
	case errors.Is(err, schedule.ErrDelivered):
		return refuse(status(v2.Code_INTERNAL_SERVER_ERROR, "recall failed, message %s was already delivered", h.id))
	default:
		s.log.Warn("grpcapi: recall failed", "topic", topic, "id", h.id, "err", err)
		return refuse(status(v2.Code_INTERNAL_SERVER_ERROR, "recall failed, execute error: %v", err))
	}
	s.log.Debug("grpcapi: recalled", "client", clientID(ctx), "topic", topic, "id", h.id)
	return &v2.RecallMessageResponse{Status: ok(), MessageId: h.id}, nil
}
