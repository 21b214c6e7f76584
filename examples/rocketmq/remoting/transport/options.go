package transport

import (
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Defaults of ServerOptions.
const (
	// DefaultMaxInflight bounds the requests of one connection served at
	// once on their own goroutines.
	DefaultMaxInflight = 1024
	// DefaultIdleTimeout is Apache RocketMQ's serverChannelMaxIdleTimeSeconds.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxReadBytes bounds the memory of requests being read or
	// served, over every connection of a Server.
	DefaultMaxReadBytes = 256 << 20
	// DefaultMaxConnReadBytes bounds it for one connection: one frame of
	// the largest size and then some.
	DefaultMaxConnReadBytes = wire.DefaultMaxFrame + 1<<20
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// Name labels the server's log lines ("namesrv", "broker").
	Name string
	// MaxFrame bounds an incoming frame (default wire.DefaultMaxFrame). A larger
	// one breaks the framing: the connection is closed.
	MaxFrame int
	// MaxInflight bounds the requests of one connection being served at once
	// (default 1024); past it the connection stops reading until one ends.
	MaxInflight int
	// MaxConnReadBytes and MaxReadBytes bound the memory of requests read
	// (or being read) and not yet served, per connection and over the
	// Server (defaults DefaultMaxConnReadBytes, DefaultMaxReadBytes; raised
	// to MaxFrame when below it). A frame's memory is reserved as its bytes
	// arrive; past a bound the connection stops reading until memory frees,
	// and is closed after waiting IdleTimeout.
	MaxConnReadBytes, MaxReadBytes int64
	// IdleTimeout closes a connection with no read, no write and no request
	// in service for this long (default 120 s, Apache's; negative = never).
	IdleTimeout time.Duration
	// Now is the clock of the idle timeout (nil = time.Now).
	Now func() time.Time
	// Logger receives connection open/close and rejected frames (nil =
	// discard).
	Logger *slog.Logger
}

func (o ServerOptions) withDefaults() ServerOptions {
	if o.MaxFrame <= 0 {
		o.MaxFrame = wire.DefaultMaxFrame
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.MaxConnReadBytes <= 0 {
		o.MaxConnReadBytes = DefaultMaxConnReadBytes
	}
	o.MaxConnReadBytes = max(o.MaxConnReadBytes, int64(o.MaxFrame))
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = DefaultMaxReadBytes
	}
	o.MaxReadBytes = max(o.MaxReadBytes, o.MaxConnReadBytes)
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// idleCheck is the period of the idle sweep: a quarter of the timeout, at
// least a second.
func (o ServerOptions) idleCheck() time.Duration { return max(o.IdleTimeout/4, time.Second) }
