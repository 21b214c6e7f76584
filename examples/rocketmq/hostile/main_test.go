package hostile_test

import (
	"os"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the broker of the descriptor-limit test.
	if os.Getenv("HOSTILE_CHILD") == "broker" {
		os.Exit(childBroker())
	}
	rmqtest.Main(m)
}
