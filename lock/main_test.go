package lock

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/internal/testkit"
)

// fakeClock is the test clock injected as Options.Now.
type fakeClock = testkit.Clock

func newFakeClock() *fakeClock { return testkit.NewClock(time.Date(2021, 7, 1, 7, 11, 0, 0, time.UTC)) }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func q(id int) Queue { return Queue{Topic: "orders", Broker: "broker-2", QueueID: id} }

func queues(n int) []Queue {
	qs := make([]Queue, n)
	for i := range qs {
		qs[i] = q(i)
	}
	return qs
}
