package lock

import (
	"log/slog"
	"time"
)

// DefaultMaxLiveTime is the lease length used when Options.MaxLiveTime is
// zero or negative.
const DefaultMaxLiveTime = 60 * time.Second

// RenewRatio is the 1:3 rule: a Keeper renews at least RenewRatio times per
// MaxLiveTime, so two renewals can be late or lost before a live
// consumer's lease expires. NewKeeper enforces it, and a zero
// KeeperOptions.Every renews exactly RenewRatio times per MaxLiveTime.
const RenewRatio = 3

// Options configures a Table. The zero value is a working default.
type Options struct {
	// MaxLiveTime is how long a lease lives after it was last locked or
	// renewed. Zero or negative means DefaultMaxLiveTime.
	MaxLiveTime time.Duration
	// Now is the clock read by every expiry decision, inside the critical
	// step of the key it decides for. Nil means time.Now.
	Now func() time.Time
	// Logger receives contention, takeover, expiry and rejected requests
	// with group, queue, old and new client. Nil discards.
	Logger *slog.Logger
	// OnEvent, if set, is called synchronously after every lease change
	// or refusal, outside the table's locks. It must be fast. Events of
	// concurrent calls may arrive out of order; Token orders handovers.
	OnEvent func(Event)
	// TokenBase makes every token issued greater than it. A host that
	// restarts a table sets it to (at least) the last token the previous
	// table issued, so tokens stay unique across restarts. Zero is fine
	// for a table that lives as long as the process it fences.
	TokenBase uint64
}

// withDefaults returns o with every zero field that has a default filled
// in.
func (o Options) withDefaults() Options {
	if o.MaxLiveTime <= 0 {
		o.MaxLiveTime = DefaultMaxLiveTime
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// KeeperOptions configures a Keeper. The zero value is a working default.
type KeeperOptions struct {
	// Every is the renewal period. Zero means the Locker's MaxLiveTime /
	// RenewRatio; a period longer than that is ErrRenewTooSlow, a negative
	// one ErrInvalid.
	Every time.Duration
	// OnLost, if set, is called with the queues a renewal (or Hold) found
	// taken by another client; the consumer must stop processing them. It
	// is set before the Keeper's goroutine starts, runs on the goroutine
	// that renewed (the Keeper's, or a caller of Hold or Renew), and must
	// not call Close.
	OnLost func(lost []Queue)
	// Logger receives lost queues and failed renewals with group, queue
	// and client. Nil discards.
	Logger *slog.Logger
}

// withDefaults returns o with every zero field that has a default filled
// in, for a Keeper on a Locker whose lease lasts maxLive.
func (o KeeperOptions) withDefaults(maxLive time.Duration) KeeperOptions {
	if o.Every == 0 {
		o.Every = maxLive / RenewRatio
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
