package namesrv

import "log/slog"

// Defaults of the options (the broker package's DefaultBrokerName is the
// same name).
const (
	DefaultBrokerName = "broker-a"
	DefaultCluster    = "DefaultCluster"
)

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
	// LeaderAddr, when set, names the broker address routes carry (a
	// replicated cluster's leader, where writes must go); BrokerAddr when
	// it answers "" (no leader known).
	LeaderAddr func() string
	// WriteOnly, when set, lists more brokers (name -> address) that
	// routes carry beside the broker, with write permission only: a
	// replicated cluster's followers, which forward sends to the leader.
	// The official clients retry a failed send on a queue of another
	// broker name, so a producer whose leader died reaches a live node
	// before its next route refresh; consumers read the broker's queues
	// only.
	WriteOnly func() map[string]string
	Logger    *slog.Logger

	// TopicConfig, if set, gives the read and write queue numbers and
	// permission an admin set for a topic (admin.go); ok false = defaults.
	TopicConfig func(topic string) (read, write, perm int, ok bool)
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
