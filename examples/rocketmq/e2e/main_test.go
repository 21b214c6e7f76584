package e2e

import (
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

func TestMain(m *testing.M) { rmqtest.Main(m) }
