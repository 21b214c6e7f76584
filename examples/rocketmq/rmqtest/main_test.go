package rmqtest_test

import (
	"os"
	"path/filepath"
	"testing"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

// TestMain keeps the v5 client's log out of $HOME (in one reused temporary directory) (through its documented
// variables) and checks, with rmqtest.Main, that no broker goroutine is left.
func TestMain(m *testing.M) {
	dir := filepath.Join(os.TempDir(), "rmqtest-client-logs") // one, reused: Main exits without deferred calls
	_ = os.Setenv("rocketmq.client.logRoot", dir)
	_ = os.Setenv("rocketmq.client.logLevel", "error")
	_ = os.Setenv("mq.consoleAppender.enabled", "false")
	rmq.ResetLogger()
	rmqtest.Main(m)
}
