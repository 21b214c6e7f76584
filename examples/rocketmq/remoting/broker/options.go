package broker

import (
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/meta"
)

// Defaults of the options.
const (
	DefaultBrokerName       = "broker-a"
	DefaultCluster          = "DefaultCluster"
	DefaultMaxPullWait      = 25 * time.Second
	DefaultMaxReconsume     = 16
	DefaultMaxPullBytes     = 4 << 20
	DefaultResetNotifyDelay = 11 * time.Second
)

// BrokerOptions configure a Broker.
type BrokerOptions struct {
	// Addr is the broker address advertised to clients (store host of
	// messages, routes).
	Addr string
	// BrokerName labels the broker (default "broker-a").
	BrokerName string
	// Cluster is the broker's cluster, stamped on every stored message as
	// CLUSTER (default DefaultCluster, the name server's too).
	Cluster string
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
	// their connection's read loop (see transport.InlineHandler). Leave it false
	// under SyncGroup: there a send waits for its group's fsync, and the
	// other sends of its connection must join that group, not wait behind
	// it.
	AsyncFlush bool
	// Writer, when set, takes every write over (see Writer): a replicated
	// core. Sends then wait for it on their own goroutines.
	Writer Writer
	Logger *slog.Logger

	// Groups and TopicConfigs are the subscription group and topic
	// configuration tables the admin requests change (admin.go); nil = in
	// memory.
	Groups       *meta.Groups
	TopicConfigs *meta.Topics
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
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	if o.Groups == nil {
		o.Groups, _ = meta.OpenGroups("")
	}
	if o.TopicConfigs == nil {
		o.TopicConfigs, _ = meta.OpenTopics("")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Writer != nil {
		o.AsyncFlush = false // a Writer's append waits for its log
	}
	return o
}
