// Package rmqtest starts the RocketMQ-compatible broker (name server and
// broker in one) from a Go test in one call: the embedded RocketMQ that
// RocketMQ users do not have. It listens on free loopback ports, keeps its
// data in t.TempDir(), and stops on t.Cleanup.
//
//	func TestOrders(t *testing.T) {
//		b := rmqtest.Start(t)
//		p, _ := rocketmq.NewProducer(producer.WithNameServer([]string{b.NameSrv}))
//		...
//	}
//
// Set RMQTEST_LOG=1 to see the broker's log on stderr.
package rmqtest

import (
	"errors"
	"log/slog"
	"os"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// Broker is a running broker and its endpoints.
type Broker struct {
	// NameSrv is the name server address to give clients
	// (producer.WithNameServer / consumer.WithNameServer).
	NameSrv string
	// Broker is the broker's address.
	Broker string
	// Metrics is the /metrics and /admin/ HTTP address.
	Metrics string
	// GRPC is the gRPC endpoint (RocketMQ 5 clients), "" when the program
	// has none.
	GRPC string
	// Dir is the data directory.
	Dir string
	// Server is the running program (its core, topics, broker stats).
	Server *server.Server

	cfg server.Config
}

// Start starts a broker with the default configuration on free loopback
// ports; it is closed when the test ends.
func Start(t testing.TB) *Broker {
	t.Helper()
	return StartConfig(t, server.Config{})
}

// StartConfig starts a broker with cfg (an empty Dir becomes t.TempDir()),
// closed when the test ends.
func StartConfig(t testing.TB, cfg server.Config) *Broker {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatalf("rmqtest: start broker: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("rmqtest: close broker: %v", err)
		}
	})
	return b
}

// New starts a broker outside a test. Empty addresses become free loopback
// ports; cfg.Dir is required. Close stops it.
func New(cfg server.Config) (*Broker, error) {
	if cfg.Dir == "" {
		return nil, errors.New("rmqtest: Dir is required")
	}
	if cfg.Logger == nil && os.Getenv("RMQTEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	withGRPC(&cfg)
	for _, a := range []*string{&cfg.NameSrvAddr, &cfg.BrokerAddr, &cfg.MetricsAddr} {
		if *a == "" {
			*a = "127.0.0.1:0"
		}
	}
	b := &Broker{cfg: cfg}
	if err := b.start(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Broker) start() error {
	s, err := server.Start(b.cfg)
	if err != nil {
		return err
	}
	b.Server, b.NameSrv, b.Broker, b.Metrics, b.GRPC, b.Dir = s, s.NameSrvAddr(), s.BrokerAddr(), s.MetricsAddr(), s.GRPCAddr(), b.cfg.Dir
	// A restart binds the same ports, so clients reconnect to it.
	b.cfg.NameSrvAddr, b.cfg.BrokerAddr = b.NameSrv, b.Broker
	if b.Metrics != "" {
		b.cfg.MetricsAddr = b.Metrics
	}
	if b.GRPC != "" {
		b.cfg.GRPCAddr = b.GRPC
	}
	return nil
}

// Close stops the broker; it is idempotent.
func (b *Broker) Close() error {
	if b.Server == nil {
		return nil
	}
	err := b.Server.Close()
	b.Server = nil
	return err
}

// Restart stops the broker and starts it again on the same ports and data,
// as a broker restart looks to its clients.
func (b *Broker) Restart() error {
	if err := b.Close(); err != nil {
		return err
	}
	return b.start()
}
