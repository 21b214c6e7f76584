package rmqtest

import (
	"path/filepath"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// withGRPC gives cfg the gRPC listener (RocketMQ 5 clients, TLS and
// plaintext) on a free loopback port unless the caller chose otherwise;
// Broker.GRPC is then its endpoint.
func withGRPC(cfg *server.Config) {
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:0"
	}
	if cfg.GRPC != nil {
		return
	}
	dir := cfg.Dir
	cfg.GRPC = func(s *server.Server, addr string) (server.Service, error) {
		g, err := grpcapi.Start(s.Core(), addr, grpcapi.Options{
			CertDir:    filepath.Join(dir, "grpc"),
			Logger:     s.Logger().With("pkg", "grpc"),
			QueueCount: func(topic string) (int, error) { return s.Topics().Ensure(topic, 0) },
			ACL:        s.ACL(),

			// The admin tables: FIFO groups and topic message types.
			GroupFIFO:        s.Groups().Orderly,
			TopicMessageType: s.TopicConfigs().MessageType,
		})
		if err != nil {
			return nil, err
		}
		return g, nil
	}
}
