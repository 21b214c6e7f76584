// Package rmqtest starts the RocketMQ-compatible broker from a Go test in
// one call: the embedded RocketMQ that RocketMQ users do not have. It
// listens on free loopback ports, keeps its data in t.TempDir(), and stops
// on t.Cleanup.
//
//	func TestOrders(t *testing.T) {
//		b := rmqtest.Start(t)
//		p, _ := rocketmq.NewProducer(producer.WithNameServer([]string{b.NameSrv}))
//		...
//	}
package rmqtest

import (
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

	t   testing.TB
	cfg server.Config
}

// Start starts a broker with the default configuration on free loopback
// ports; it is closed when the test ends.
func Start(t testing.TB) *Broker {
	return StartConfig(t, server.Config{})
}

// StartConfig starts a broker with cfg. Empty addresses become free
// loopback ports and an empty Dir a t.TempDir().
func StartConfig(t testing.TB, cfg server.Config) *Broker {
	t.Helper()
	if cfg.Logger == nil && os.Getenv("RMQTEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.NameSrvAddr == "" {
		cfg.NameSrvAddr = "127.0.0.1:0"
	}
	if cfg.BrokerAddr == "" {
		cfg.BrokerAddr = "127.0.0.1:0"
	}
	if cfg.MetricsAddr == "" {
		cfg.MetricsAddr = "127.0.0.1:0"
	}
	b := &Broker{t: t, cfg: cfg}
	b.start()
	t.Cleanup(func() { b.Stop() })
	return b
}

func (b *Broker) start() {
	b.t.Helper()
	s, err := server.Start(b.cfg)
	if err != nil {
		b.t.Fatalf("rmqtest: start broker: %v", err)
	}
	b.Server, b.NameSrv, b.Broker, b.Metrics, b.GRPC, b.Dir = s, s.NameSrvAddr(), s.BrokerAddr(), s.MetricsAddr(), s.GRPCAddr(), b.cfg.Dir
	// A restart binds the same ports, so clients reconnect to it.
	b.cfg.NameSrvAddr, b.cfg.BrokerAddr = b.NameSrv, b.Broker
	if b.Metrics != "" {
		b.cfg.MetricsAddr = b.Metrics
	}
}

// Stop stops the broker (idempotent); Restart starts it again.
func (b *Broker) Stop() {
	if b.Server != nil {
		if err := b.Server.Close(); err != nil {
			b.t.Errorf("rmqtest: close broker: %v", err)
		}
		b.Server = nil
	}
}

// Restart stops the broker and starts it again on the same ports and data.
func (b *Broker) Restart() {
	b.t.Helper()
	b.Stop()
	b.start()
}
