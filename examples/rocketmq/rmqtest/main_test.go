package rmqtest_test

import (
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

func TestMain(m *testing.M) { rmqtest.Main(m) }
