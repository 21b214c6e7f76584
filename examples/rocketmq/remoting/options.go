package remoting

import (
	"log/slog"
	"time"
)

// Defaults of the options.
const (
	DefaultBrokerName       = "broker-a"
	DefaultCluster          = "DefaultCluster"
	DefaultMaxPullWait      = 25 * time.Second
	DefaultMaxReconsume     = 16
	DefaultMaxPullBytes     = 4 << 20
	DefaultResetNotifyDelay = 11 * time.Second
	DefaultMaxInflight      = 4096
)

// BrokerOptions configure a Broker.
type BrokerOptions struct {
	// Addr is the broker address advertised to clients (store host of
	// messages, routes).
	Addr string
	// BrokerName labels the broker (default "broker-a").
	BrokerName string
	// MaxPullWait caps the long poll of one PULL_MESSAGE (default 25 s; the
	// client asks for 20 s and gives up after 30 s).
	MaxPullWait time.Duration
	// MaxReconsumeTimes is used when a send-back does not say (default 16).
	MaxReconsumeTimes int
	// MaxPullBytes caps the bodies of one pull answer (default 4 MiB).
	MaxPullBytes int
	// ResetNotifyDelay is how long after answering a pull with
	// PULL_OFFSET_MOVED for an admin reset the group is told to rebalance, so
	// its member takes the queue back (the client drops it for 10 s).
	// Default 11 s; negative turns it off.
	ResetNotifyDelay time.Duration
	// AsyncFlush says the store answers an Append without waiting for an
	// fsync (store.SyncInterval or SyncNone). Sends are then served on
	// their connection's read loop (see InlineHandler). Leave it false
	// under SyncGroup: there a send waits for its group's fsync, and the
	// other sends of its connection must join that group, not wait behind
	// it.
	AsyncFlush bool
	Logger     *slog.Logger
}

func (o BrokerOptions) withDefaults() BrokerOptions {
	if o.BrokerName == "" {
		o.BrokerName = DefaultBrokerName
	}
	if o.MaxPullWait <= 0 {
		o.MaxPullWait = DefaultMaxPullWait
	}
	if o.MaxReconsumeTimes <= 0 {
		o.MaxReconsumeTimes = DefaultMaxReconsume
	}
	if o.MaxPullBytes <= 0 {
		o.MaxPullBytes = DefaultMaxPullBytes
	}
	if o.ResetNotifyDelay == 0 {
		o.ResetNotifyDelay = DefaultResetNotifyDelay
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// Name labels the server's log lines ("namesrv", "broker").
	Name string
	// MaxFrame bounds an incoming frame (default DefaultMaxFrame). A larger
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
		o.MaxFrame = DefaultMaxFrame
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// NameServerOptions configure a NameServer.
type NameServerOptions struct {
	// BrokerName and Cluster label the one broker (defaults "broker-a",
	// "DefaultCluster").
	BrokerName, Cluster string
	// BrokerAddr is the broker address advertised in routes: one the client
	// can dial (127.0.0.1:port, never 0.0.0.0).
	BrokerAddr string
	// NoAutoCreate turns off creating a topic when its route is asked for.
	// Producers then go through TBW102 and the broker creates the topic on
	// the first send; consumers of a topic nobody sent to fail to start.
	NoAutoCreate bool
	Logger       *slog.Logger
}

func (o NameServerOptions) withDefaults() NameServerOptions {
	if o.BrokerName == "" {
		o.BrokerName = DefaultBrokerName
	}
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
