package brokercore

import "sync/atomic"

// PublisherStats counts a Publisher's work, for hosts to export as metrics.
type PublisherStats struct {
	Batches  uint64 // successful Publish calls that appended something
	Messages uint64 // messages appended
	Failed   uint64 // Publish calls the store refused
}

// SubscriberStats counts a Subscriber's work over all its subscriptions.
type SubscriberStats struct {
	Pops       uint64 // pops that brought messages
	PopErrors  uint64 // failed pops (retried after RetryDelay, or ending the subscription)
	Delivered  uint64 // messages handed to an output channel
	Acked      uint64 // acks applied in pop
	Nacked     uint64 // nacks applied in pop (ChangeInvisible to NackDelay)
	HandedBack uint64 // unacked messages given back when a subscription ended
	Extended   uint64 // invisible-time extensions while a handler ran or a message waited
	Stale      uint64 // pop calls answered ErrStaleHandle: the message had already been redelivered
}

type subscriberCounters struct {
	pops, popErrors, delivered, acked, nacked, handedBack, extended, stale atomic.Uint64
}

func (c *subscriberCounters) snapshot() SubscriberStats {
	return SubscriberStats{
		Pops: c.pops.Load(), PopErrors: c.popErrors.Load(), Delivered: c.delivered.Load(),
		Acked: c.acked.Load(), Nacked: c.nacked.Load(), HandedBack: c.handedBack.Load(),
		Extended: c.extended.Load(), Stale: c.stale.Load(),
	}
}

type publisherCounters struct {
	batches, messages, failed atomic.Uint64
}

// Stats returns the Publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{Batches: p.st.batches.Load(), Messages: p.st.messages.Load(), Failed: p.st.failed.Load()}
}

// Stats returns the Subscriber's counters.
func (s *Subscriber) Stats() SubscriberStats { return s.st.snapshot() }
