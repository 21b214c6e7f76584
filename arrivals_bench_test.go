package brokercore_test

import (
	"testing"

	"github.com/brokercore/brokercore"
)

// BenchmarkArrivalsNotifyNoWaiter is the cost every append pays for the
// waiter: an arrival in a queue nobody waits on.
func BenchmarkArrivalsNotifyNoWaiter(b *testing.B) {
	a := brokercore.NewArrivals(&ends{})
	defer a.Close()
	b.ReportAllocs()
	for b.Loop() {
		a.Notify("orders", 3, 1)
	}
}

// BenchmarkArrivalsWatchNotify is one long-poll cycle: watch, then the
// arrival that closes the channel.
func BenchmarkArrivalsWatchNotify(b *testing.B) {
	a := brokercore.NewArrivals(&ends{})
	defer a.Close()
	b.ReportAllocs()
	for b.Loop() {
		ch := a.Watch("orders", 3)
		a.Notify("orders", 3, 1)
		<-ch
	}
}
