package transport

import (
	"log/slog"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// DefaultMaxInflight is the default of ServerOptions.MaxInflight.
const DefaultMaxInflight = 4096

// ServerOptions configure a Server.
type ServerOptions struct {
	// Name labels the server's log lines ("namesrv", "broker").
	Name string
	// MaxFrame bounds an incoming frame (default wire.DefaultMaxFrame). A larger
	// one breaks the framing: the connection is closed.
	MaxFrame int
	// MaxInflight bounds the requests of one connection being served at once
	// (default 4096); past it the connection stops reading until one ends.
	MaxInflight int
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
