package brokertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/brokercore/brokercore/brokertest"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// A test of a consumer that does not ack: the message comes back once its
// invisible time is over, and the test moves the clock instead of sleeping.
func ExampleNew() {
	testRedelivery := func(t *testing.T) {
		clk := brokertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		b := brokertest.New(t, brokertest.WithClock(clk)) // closed when t ends

		if err := b.Store().Append(&store.Message{Topic: "orders", Body: []byte("o1")}); err != nil {
			t.Fatal(err)
		}
		req := pop.Request{Group: "billing", Topic: "orders", ClientID: "w1", Max: 1, Invisible: time.Minute}
		first, _ := b.Pop().Pop(context.Background(), req) // not acked
		clk.Advance(time.Minute + time.Second)
		again, _ := b.Pop().Pop(context.Background(), req)
		if len(first.Messages) != 1 || len(again.Messages) != 1 || again.Messages[0].Attempts != 2 {
			t.Fatalf("want a redelivery, got %v then %v", first, again)
		}
	}
	_ = testRedelivery // a test function: func TestRedelivery(t *testing.T)
}
