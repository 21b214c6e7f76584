package e2e

import (
	"os"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the child processes of the kill tests.
	switch os.Getenv("E2E_CHILD") {
	case "orderly":
		os.Exit(childOrderly())
	case "broker":
		os.Exit(childBroker())
	case "grpcbroker":
		os.Exit(childGRPCBroker()) // txn_kill9_v5_test.go
	case "nullbroker":
		os.Exit(childNullBroker())
	}
	rmqtest.Main(m)
}
