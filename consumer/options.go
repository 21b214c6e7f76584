package consumer

import (
	"log/slog"
	"time"
)

// DefaultChannelExpiry is how long a (group, channel) registration lives
// without a registration of that group on that channel before Scan expires
// it (RocketMQ's channelExpiredTimeout).
const DefaultChannelExpiry = 120 * time.Second

// Options configures a Registry. The zero value is a working default.
type Options struct {
	// ChannelExpiry is how long a registration may stay silent before Scan
	// removes it. Zero or negative means DefaultChannelExpiry.
	ChannelExpiry time.Duration
	// Now is the clock read by every liveness decision; nil means time.Now.
	Now func() time.Time
	// Logger receives rejected requests, expiries, channel closes and
	// channel takeovers with their keys; nil discards.
	Logger *slog.Logger
	// OnEvent, if set, is called for every event: synchronously, one at a
	// time, in the order the changes happened, never while a registry lock
	// is held (it may call back into the Registry).
	OnEvent func(Event)
}

// withDefaults returns o with every zero field that has a default filled
// in.
func (o Options) withDefaults() Options {
	if o.ChannelExpiry <= 0 {
		o.ChannelExpiry = DefaultChannelExpiry
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
