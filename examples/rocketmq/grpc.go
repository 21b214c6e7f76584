package main

import (
	"flag"
	"path/filepath"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// DefaultGRPCAddr is where RocketMQ 5 clients (gRPC, TLS or plaintext)
// connect by default.
const DefaultGRPCAddr = "127.0.0.1:8081"

// grpcFlags adds -grpc-addr and wires the gRPC listener (package grpcapi)
// into cfg: RocketMQ 5's MessagingService on the same core, TLS with a
// self-signed certificate kept under -data/grpc, plaintext on the same port.
func grpcFlags(fs *flag.FlagSet, cfg *server.Config) {
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", DefaultGRPCAddr, `RocketMQ 5 gRPC listen address, TLS and plaintext ("-" = off)`)
	cfg.GRPC = func(s *server.Server, addr string) (server.Service, error) {
		if addr == "-" {
			return nil, nil
		}
		g, err := startGRPC(s, addr, cfg.Dir)
		if err != nil {
			return nil, err // not a typed nil: the program closes what it got
		}
		return g, nil
	}
}

// startGRPC starts the gRPC listener of a running program; its routes use
// the program's topic table, so both protocols see the same queues.
func startGRPC(s *server.Server, addr, dir string) (*grpcapi.Server, error) {
	return grpcapi.Start(s.Core(), addr, grpcapi.Options{
		CertDir:    filepath.Join(dir, "grpc"),
		Logger:     s.Logger().With("pkg", "grpc"),
		QueueCount: func(topic string) (int, error) { return s.Topics().Ensure(topic, 0) },
		ACL:        s.ACL(),

		// The admin tables: FIFO groups and topic message types.
		GroupFIFO:        s.Groups().Orderly,
		TopicMessageType: s.TopicConfigs().MessageType,
	})
}
