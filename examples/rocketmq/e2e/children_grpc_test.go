package e2e

import (
	"os"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// childGRPCBroker is childBroker with the gRPC listener (RocketMQ 5
// clients) on E2E_GRPC, as rmqtest starts it.
func childGRPCBroker() int {
	return serveChild(func() (func() error, error) {
		b, err := rmqtest.New(server.Config{Dir: os.Getenv("E2E_DIR"), NameSrvAddr: os.Getenv("E2E_NS"),
			BrokerAddr: os.Getenv("E2E_BR"), GRPCAddr: os.Getenv("E2E_GRPC"), MetricsAddr: "-",
			Core: brokercore.Options{Txn: childTxnOptions()}})
		if err != nil {
			return nil, err
		}
		return b.Close, nil
	})
}
