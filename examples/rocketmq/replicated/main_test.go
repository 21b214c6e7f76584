package replicated

import (
	"os"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

// quietLogger silences the client (it logs through logrus to stderr).
type quietLogger struct{}

func (quietLogger) Debug(string, map[string]interface{})   {}
func (quietLogger) Info(string, map[string]interface{})    {}
func (quietLogger) Warning(string, map[string]interface{}) {}
func (quietLogger) Error(string, map[string]interface{})   {}
func (quietLogger) Fatal(string, map[string]interface{})   {}
func (quietLogger) Level(string)                           {}
func (quietLogger) OutputPath(string) error                { return nil }

func TestMain(m *testing.M) {
	if os.Getenv("RMQHA_CHILD") != "" {
		// The test binary doubles as a node process of the kill -9 test.
		os.Exit(childNode())
	}
	if os.Getenv("RMQ_CLIENT_LOG") == "" {
		rlog.SetLogger(quietLogger{})
		// The v5 client logs to a file under $HOME unless told otherwise
		// (rmqtest.Main exits: the few kilobytes stay in the temp dir).
		dir, err := os.MkdirTemp("", "replicated-v5-logs")
		if err != nil {
			panic(err)
		}
		_ = os.Setenv("rocketmq.client.logRoot", dir)
		_ = os.Setenv("rocketmq.client.logLevel", "error")
		_ = os.Setenv("mq.consoleAppender.enabled", "false")
		rmq.ResetLogger()
	}
	rmqtest.Main(m)
}
