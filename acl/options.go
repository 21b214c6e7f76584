package acl

import (
	"log/slog"
	"time"
)

// Defaults used when the Options field is zero.
const (
	// DefaultMaxSkew is how far a v5 request's signed x-mq-date-time may be
	// from the broker's clock, either way (AWS Signature V4 allows the same).
	DefaultMaxSkew = 15 * time.Minute

	// DefaultReplayWindow is how long after a v5 signature was first seen
	// it is still accepted. A client signs every call with its current
	// second, so calls in the same second share a signature; a copy played
	// back later than this is refused.
	DefaultReplayWindow = 5 * time.Second

	// DefaultReplayCacheSize bounds the signatures remembered for replay
	// detection (about 100 bytes each). When full, expired ones are
	// dropped first, then arbitrary ones until half of it is free (a
	// dropped signature could then be replayed within MaxSkew).
	DefaultReplayCacheSize = 1 << 17
)

// Options configure an Authorizer. The zero value works.
type Options struct {
	// MaxSkew: the clock-skew window of v5 signatures (DefaultMaxSkew).
	MaxSkew time.Duration
	// ReplayWindow: how long a v5 signature may be reused after it was
	// first seen (DefaultReplayWindow).
	ReplayWindow time.Duration
	// ReplayCacheSize: signatures remembered (DefaultReplayCacheSize).
	ReplayCacheSize int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger receives denials (INFO, with user, resource, action, ip and
	// reason), authentication failures (INFO) and reloads (INFO/WARN).
	// Nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxSkew <= 0 {
		o.MaxSkew = DefaultMaxSkew
	}
	if o.ReplayWindow <= 0 {
		o.ReplayWindow = DefaultReplayWindow
	}
	if o.ReplayCacheSize <= 0 {
		o.ReplayCacheSize = DefaultReplayCacheSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
