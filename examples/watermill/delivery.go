package brokercore

import (
	"context"
	"errors"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/brokercore/brokercore/pop"
)

// inflight is one popped message the consumer still holds: its current
// receipt handle and when its invisible time was last (re)started.
type inflight struct {
	d     pop.Delivery
	since time.Time
	// settled: acked, nacked or handed back; lost: its handle went stale (it
	// was redelivered to someone else), so it is not ours to hand back.
	settled, lost bool
}

func newBatch(ds []pop.Delivery) []inflight {
	now := time.Now()
	b := make([]inflight, len(ds))
	for i, d := range ds {
		b[i] = inflight{d: d, since: now}
	}
	return b
}

// shortNackDelay is the longest FIFO nack delay the consumer waits out
// before its next pop (see deliver).
const shortNackDelay = 50 * time.Millisecond

// minExtendEvery keeps a tiny InvisibleTime from turning the extension timer
// into a spin.
const minExtendEvery = time.Millisecond

// Reasons for handBack.
const (
	whyNacked = "nacked"
	whyEnded  = "subscription ended"
)

type outcome int

const (
	acked outcome = iota
	nacked
	cancelled
)

// deliver hands the batch to the output channel in order, one message at a
// time, each after the previous one was acked or nacked. Whatever is left
// when ctx ends is handed back to the group at once, so the next subscriber
// of the group gets it without waiting for the invisible time.
func (c *consumer) deliver(ctx context.Context, batch []inflight) {
	defer c.handBack(batch, minHandBack, whyEnded)
	for i := range batch {
		if ctx.Err() != nil || !c.deliverOne(ctx, batch, i) {
			return
		}
	}
}

// deliverOne hands batch[i] out and settles it in pop. It reports whether
// the rest of the batch may follow.
func (c *consumer) deliverOne(ctx context.Context, batch []inflight, i int) bool {
	// Messages waiting behind slow handlers would otherwise reach their
	// invisible time and go to another subscriber while still queued here.
	c.extend(batch[i:], false)
	f := &batch[i]
	if f.lost {
		return true
	}
	msg := fromStore(f.d.Message)
	msgCtx, msgCancel := context.WithCancel(context.WithValue(ctx, deliveryKey{}, Delivery{
		Topic:       f.d.Message.Topic,
		QueueID:     f.d.Message.QueueID,
		QueueOffset: f.d.Message.QueueOffset,
		Attempts:    f.d.Attempts,
	}))
	// The message's context ends once its Ack or Nack took effect in pop
	// (or the subscription ended).
	defer msgCancel()
	msg.SetContext(msgCtx)
	select {
	case c.out <- msg:
		c.st.delivered.Add(1)
	case <-ctx.Done():
		return false
	}
	switch c.await(ctx, msg, batch[i:]) {
	case acked:
		c.ack(f)
		return true
	case nacked:
		if !c.cfg.FIFO {
			c.handBack(batch[i:i+1], c.cfg.NackDelay, whyNacked)
			return true
		}
		// The rest of the batch must not overtake the nacked message: all
		// of it goes back with the same delay, in order.
		c.handBack(batch[i:], c.cfg.NackDelay, whyNacked)
		msgCancel()
		// The queue is blocked until the delay is over, and a pop that finds
		// it blocked waits for pop's next tick (100 ms by default). For a
		// short delay, waiting it out here first makes the redelivery come
		// right after it.
		if d := max(c.cfg.NackDelay, minHandBack); d <= shortNackDelay {
			sleep(ctx, d+minHandBack)
		}
		return false
	default:
		return false
	}
}

// await waits for msg's Ack or Nack while keeping the held messages
// invisible, or for ctx to end.
func (c *consumer) await(ctx context.Context, msg *message.Message, held []inflight) outcome {
	every := max(c.cfg.InvisibleTime/3, minExtendEvery)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-msg.Acked():
			return acked
		case <-msg.Nacked():
			return nacked
		case <-ctx.Done():
			// An answer that raced with the end still counts.
			select {
			case <-msg.Acked():
				return acked
			case <-msg.Nacked():
				return nacked
			default:
				return cancelled
			}
		case <-t.C:
			c.extend(held, true)
			t.Reset(every)
		}
	}
}

// extend restarts the invisible time of held messages that used a third of
// it (all of them when force is set), taking their new handles.
func (c *consumer) extend(held []inflight, force bool) {
	now := time.Now()
	for i := range held {
		f := &held[i]
		if f.settled || f.lost || (!force && now.Sub(f.since) < c.cfg.InvisibleTime/3) {
			continue
		}
		h, err := c.pop.ChangeInvisible(f.d.Handle, c.cfg.InvisibleTime)
		if err != nil {
			c.lose(f, "extending invisible time", err)
			continue
		}
		f.d.Handle, f.since = h, now
		c.st.extended.Add(1)
	}
}

// ack acks f through pop; the ack that advances the group's lowest unacked
// offset commits it before returning.
func (c *consumer) ack(f *inflight) {
	f.settled = true
	if f.lost {
		c.logger.Info("acked a message that was already redelivered (its invisible time ran out)", c.fields(f))
		return
	}
	if err := c.pop.Ack(f.d.Handle); err != nil {
		c.lose(f, "ack", err)
		return
	}
	c.st.acked.Add(1)
}

// handBack makes the unsettled messages of held visible to the group again
// after d (at least minHandBack).
func (c *consumer) handBack(held []inflight, d time.Duration, why string) {
	d = max(d, minHandBack)
	for i := range held {
		f := &held[i]
		if f.settled || f.lost {
			continue
		}
		f.settled = true
		if _, err := c.pop.ChangeInvisible(f.d.Handle, d); err != nil {
			c.lose(f, "hand back ("+why+")", err)
			continue
		}
		if why == whyNacked && i == 0 {
			c.st.nacked.Add(1)
		} else {
			c.st.handedBack.Add(1)
		}
		fields := c.fields(f)
		fields["why"], fields["visible_in"] = why, d.String()
		c.logger.Trace("handed back", fields)
	}
}

// lose logs a failed pop call on f. A stale handle means the message went to
// someone else after its invisible time: expected under slow handlers, at
// least once delivery covers it.
func (c *consumer) lose(f *inflight, what string, err error) {
	f.lost = true
	fields := c.fields(f)
	fields["op"] = what
	if errors.Is(err, pop.ErrStaleHandle) {
		c.st.stale.Add(1)
		fields["err"] = err.Error()
		c.logger.Info("message no longer held: it was redelivered", fields)
		return
	}
	c.logger.Error("pop call failed", err, fields)
}

func (c *consumer) fields(f *inflight) watermill.LogFields {
	return watermill.LogFields{
		"queue":    f.d.Message.QueueID,
		"offset":   f.d.Message.QueueOffset,
		"attempts": f.d.Attempts,
	}
}
