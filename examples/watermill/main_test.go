package brokercore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests: every
// subscription goroutine, long poll and background loop must have been
// stopped by Close.
//
// Two goroutines of Watermill's own test helper are exempt: the suite's
// subscriber multiplier forwards each subscriber's channel into one output
// channel, and once a test stops reading that output, a forwarder holding a
// message blocks on it forever (and its WaitGroup waiter with it). They
// belong to the suite (internal/subscriber/multiplier.go), not to brokercore.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/ThreeDotsLabs/watermill/internal/subscriber.(*multiplier).Subscribe.func2"),
		goleak.IgnoreAnyFunction("github.com/ThreeDotsLabs/watermill/internal/subscriber.(*multiplier).Subscribe.func3"),
	)
}
