package consumer

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// fill registers nChannels channels, each in nGroups groups.
func fill(b *testing.B, r *Registry, nChannels, nGroups int) []Client {
	b.Helper()
	clients := make([]Client, nChannels)
	for i := range clients {
		clients[i] = Client{ChannelID: fmt.Sprintf("10.0.%d.%d:%d", i/65536, i%65536/256, 40000+i%256), ClientID: fmt.Sprintf("client-%d", i), Language: "GO", Version: 1}
		for g := range nGroups {
			if _, err := r.RegisterWithoutSub(fmt.Sprintf("group-%d", g), clients[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	return clients
}

// BenchmarkHeartbeat is RegisterWithoutSub of known clients, 10k channels ×
// 4 groups, from GOMAXPROCS goroutines.
func BenchmarkHeartbeat(b *testing.B) {
	const nChannels, nGroups = 10_000, 4
	r := New(Options{})
	clients := fill(b, r, nChannels, nGroups)
	groups := make([]string, nGroups)
	for g := range groups {
		groups[g] = fmt.Sprintf("group-%d", g)
	}
	var seed atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seed.Add(1)) * 7919
		for pb.Next() {
			i++
			if _, err := r.RegisterWithoutSub(groups[i%nGroups], clients[(i/nGroups)%nChannels]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
}

// BenchmarkChannelClosed closes a channel registered in 4 groups among n
// channels. Every n closes the timer stops while all channels re-register.
// The cost per close must not grow with n.
func BenchmarkChannelClosed(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("channels=%d", n), func(b *testing.B) {
			const nGroups = 4
			r := New(Options{})
			clients := fill(b, r, n, nGroups)
			groups := make([]string, nGroups)
			for g := range groups {
				groups[g] = fmt.Sprintf("group-%d", g)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%n == 0 {
					b.StopTimer()
					for _, c := range clients {
						for _, g := range groups {
							_, _ = r.RegisterWithoutSub(g, c)
						}
					}
					b.StartTimer()
				}
				if got := r.ChannelClosed(clients[i%n].ChannelID); len(got) != nGroups {
					b.Fatalf("closed %d groups", len(got))
				}
			}
		})
	}
}

// BenchmarkRegisterNewClient is the locked path: a new channel joining a
// group with subscriptions.
func BenchmarkRegisterNewClient(b *testing.B) {
	r := New(Options{})
	subs := []Subscription{{Topic: "orders", Expression: "*", Version: 1}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := Client{ChannelID: fmt.Sprintf("ch-%d", i), ClientID: "c", Language: "GO", Version: 1}
		if _, err := r.Register(fmt.Sprintf("group-%d", i%64), c, subs); err != nil {
			b.Fatal(err)
		}
	}
}
