package grpcapi

import (
	"errors"
	"io"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/brokercore/brokercore/consumer"
)

// Telemetry answers the first settings command of a stream with the
// server's settings: every client's Start waits for that answer (with no
// timeout), and the push consumer takes its FIFO flag, batch size,
// long-polling time and retry backoff from it (a missing one breaks it).
// Later settings commands on the stream (the client's periodic re-sync)
// only refresh what the server knows of the client: the settings do not
// change, and v5.1.4 applies an answer without synchronisation against its
// own readers. Nothing else waits for settings: sends and receives work
// before they arrive.
//
// Options.SettingsHold holds the first answer until the client's first
// re-sync (1 s after its Start) arrived, at most that long, so the client's
// own settings sync happens before it applies the answer (see SettingsHold).
// The commands of Start's burst (one per topic route the client looks up)
// come within milliseconds of each other; the re-sync is the first one at
// least resyncGap after the first.
//
// The stream stays open until the client goes away or the server closes;
// the v5 client never closes it, so its end releases nothing — a client
// that stops heartbeating is forgotten.
func (s *Server) Telemetry(stream grpc.BidiStreamingServer[v2.TelemetryCommand, v2.TelemetryCommand]) error {
	ctx := stream.Context()
	id, lang := clientID(ctx), language(ctx)
	cmds := make(chan *v2.Settings)
	errc := make(chan error, 1)
	s.wg.Add(1)
	go func() { // the reader; it ends with the stream
		defer s.wg.Done()
		for {
			cmd, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			if st := cmd.GetSettings(); st != nil { // thread stacks, verify results: nothing to do
				select {
				case cmds <- st:
				case <-ctx.Done():
					errc <- ctx.Err()
					return
				}
			}
		}
	}()
	var first *v2.Settings
	var firstAt time.Time
	var hold <-chan time.Time
	answered := false
	ps := &producerStream{client: id, push: make(chan *v2.TelemetryCommand, pushQueue)} // transaction.go
	defer s.producers.remove(ps)
	for {
		select {
		case cmd := <-ps.push: // a transaction check for this producer
			if err := stream.Send(cmd); err != nil {
				return err
			}
		case st := <-cmds:
			// A stream of a client id another connection holds is answered
			// but registers nothing (conns.go).
			owned := s.claim(ctx, "Telemetry", id) == nil
			if owned {
				s.producers.publishing(ps, st, s.opts.Now())
			}
			answer := s.settingsFor(id, st, lang, owned)
			if answered {
				continue
			}
			if first == nil && s.opts.SettingsHold > 0 {
				first, firstAt = answer, time.Now()
				t := time.NewTimer(s.opts.SettingsHold)
				defer t.Stop()
				hold = t.C
				continue
			}
			if first != nil && time.Since(firstAt) < s.opts.resyncGap() {
				// One more of Start's per-topic syncs (a client of several
				// topics sends one per route), not the re-sync yet.
				first = answer
				continue
			}
			if err := s.sendSettings(stream, answer); err != nil {
				return err
			}
			answered, hold = true, nil
		case <-hold:
			if err := s.sendSettings(stream, first); err != nil {
				return err
			}
			answered, hold = true, nil
		case err := <-errc:
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

func (s *Server) sendSettings(stream grpc.BidiStreamingServer[v2.TelemetryCommand, v2.TelemetryCommand], st *v2.Settings) error {
	return stream.Send(&v2.TelemetryCommand{Status: ok(), Command: &v2.TelemetryCommand_Settings{Settings: st}})
}

// producerBackoff is the send retry policy of every producer, Apache's
// proxy's (ProxyConfig.grpcClientProducer*): 3 attempts, exponential from
// 10 ms, ×2, up to 1 s. It is only ever marshalled, never changed.
var producerBackoff = &v2.RetryPolicy{
	MaxAttempts: ProducerMaxAttempts,
	Strategy: &v2.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &v2.ExponentialBackoff{
		Initial:    durationpb.New(ProducerBackoffInitial),
		Max:        durationpb.New(ProducerBackoffMax),
		Multiplier: ProducerBackoffMultiplier,
	}},
}

// settingsFor records what the client told (when record) and returns the
// server settings for its client type.
func (s *Server) settingsFor(id string, in *v2.Settings, lang string, record bool) *v2.Settings {
	out := &v2.Settings{
		ClientType:     in.ClientType,
		AccessPoint:    in.AccessPoint,
		RequestTimeout: in.RequestTimeout,
		UserAgent:      in.UserAgent,
		Metric:         &v2.Metric{On: false},
	}
	backoff := func(attempts int) *v2.RetryPolicy {
		return &v2.RetryPolicy{
			MaxAttempts: int32(attempts),
			Strategy: &v2.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &v2.ExponentialBackoff{
				Initial:    durationpb.New(s.opts.BackoffInitial),
				Max:        durationpb.New(s.opts.BackoffMax),
				Multiplier: float32(s.opts.BackoffMultiplier),
			}},
		}
	}
	switch in.GetClientType() {
	case v2.ClientType_PRODUCER:
		// Apache's proxy answers every producer with its send retry policy
		// (mergeProducerData); clients of other languages fail to start
		// without one. The answer waits for the client's first re-sync
		// (SettingsHold) because v5.1.4 writes the policy into the struct
		// that re-sync marshals.
		out.BackoffPolicy = producerBackoff
		out.PubSub = &v2.Settings_Publishing{Publishing: &v2.Publishing{
			Topics:              in.GetPublishing().GetTopics(),
			MaxBodySize:         int32(s.opts.MaxBodySize),
			ValidateMessageType: true,
		}}
		if record {
			s.clients.touch(id, s.opts.Now(), nil)
		}
	default:
		sub := in.GetSubscription()
		group := sub.GetGroup().GetName()
		fifo := s.opts.isFIFO(group)
		batch := int32(s.opts.BatchSize)
		if fifo {
			batch = 1
		}
		lp := s.opts.LongPolling
		if in.GetClientType() == v2.ClientType_SIMPLE_CONSUMER && sub.GetLongPollingTimeout() != nil {
			lp = sub.GetLongPollingTimeout().AsDuration()
		}
		out.BackoffPolicy = backoff(s.opts.MaxAttempts)
		out.PubSub = &v2.Settings_Subscription{Subscription: &v2.Subscription{
			Group:              sub.GetGroup(),
			Subscriptions:      sub.GetSubscriptions(),
			Fifo:               &fifo,
			ReceiveBatchSize:   &batch,
			LongPollingTimeout: durationpb.New(lp),
		}}
		if !record {
			break
		}
		s.clients.touch(id, s.opts.Now(), func(c *clientInfo) {
			c.group = group
			c.longPolling = lp
		})
		if reg := s.b.Consumers(); reg != nil && validGroup(group) {
			subs := make([]consumer.Subscription, 0, len(sub.GetSubscriptions()))
			for _, e := range sub.GetSubscriptions() {
				if t := e.GetTopic().GetName(); t != "" {
					subs = append(subs, consumer.Subscription{Topic: t, Expression: e.GetExpression().GetExpression(), Version: time.Now().UnixNano()})
				}
			}
			if _, err := reg.Register(group, consumer.Client{ChannelID: id, ClientID: id, Language: lang}, subs); err != nil {
				s.log.Debug("grpcapi: consumer registration refused", "group", group, "client", id, "err", err)
			}
		}
	}
	return out
}
