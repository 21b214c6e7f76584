package replica

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
)

// benchCluster is three nodes in this process talking raft over TCP on
// 127.0.0.1, each with its own raft log of the kind asked for (fsynced)
// and store.
func benchCluster(b *testing.B, logStore string, fast bool, tr ...*stageTrace) []*Node {
	return benchClusterWith(b, logStore, fast, nil, tr...)
}

func benchClusterWith(b *testing.B, logStore string, fast bool, tweak func(*Config), tr ...*stageTrace) []*Node {
	b.Helper()
	root := b.TempDir()
	var servers []raft.Server
	var cfgs []Config
	for i := 1; i <= 3; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		id := fmt.Sprintf("n%d", i)
		cfg := Config{ID: id, Dir: filepath.Join(root, id), RaftAddr: addr, LogStore: logStore}
		// Throughput runs keep the default timeouts: a leader on this
		// loaded machine's disk must not lose its lease to an fsync
		// stall mid-run. The failover benchmark wants fast ones.
		if fast {
			fastConfig(&cfg)
		}
		cfg.ApplyTimeout = 10 * time.Second
		cfg.SnapshotThreshold = 1 << 30
		for _, t := range tr {
			t.hook(&cfg)
		}
		if tweak != nil {
			tweak(&cfg)
		}
		cfgs = append(cfgs, cfg)
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	var nodes []*Node
	for _, cfg := range cfgs {
		cfg.Bootstrap = servers
		n, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	b.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	})
	return nodes
}

func leaderOf(b *testing.B, nodes []*Node) *Node {
	b.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.IsLeader() {
				return n
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatal("no leader")
	return nil
}

// runProducers calls produce b.N times from p goroutines and reports
// throughput and latency percentiles.
func runProducers(b *testing.B, p int, produce func(*store.Message) error) {
	body := make([]byte, 1024)
	lat := make([][]time.Duration, p)
	var wg sync.WaitGroup
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	for g := 0; g < p; g++ {
		n := b.N / p
		if g < b.N%p {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if err := produce(&store.Message{Topic: "bench", QueueID: g % 8, Body: body}); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(all)), "mean-µs")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkProduce compares a replicated produce (3 nodes, raft over TCP on
// loopback, committed = on a majority's disk) with one store's SyncGroup
// append (fsynced, group commit), 1 KiB messages, in the same run.
func BenchmarkProduce(b *testing.B) {
	for _, p := range []int{1, 64} {
		for _, kind := range []string{LogStoreSegment, LogStoreBolt} {
			b.Run(fmt.Sprintf("replicated/log=%s/producers=%d", kind, p), func(b *testing.B) {
				nodes := benchCluster(b, kind, false)
				l := leaderOf(b, nodes)
				runProducers(b, p, func(m *store.Message) error { _, err := l.Produce(m); return err })
				reportLogWrites(b, l, nodes)
			})
		}
		b.Run(fmt.Sprintf("single/SyncGroup/producers=%d", p), func(b *testing.B) {
			st, err := store.Open(b.TempDir(), store.Options{Sync: store.SyncGroup})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			runProducers(b, p, func(m *store.Message) error { return st.Append(m) })
		})
	}
}

// BenchmarkProduceTrace is the 64-producer replicated row with every
// entry's stages timed (trace_test.go): where a produce's time goes.
func BenchmarkProduceTrace(b *testing.B) {
	tr := newStageTrace()
	nodes := benchCluster(b, LogStoreSegment, false, tr)
	l := leaderOf(b, nodes)
	runProducers(b, 64, func(m *store.Message) error { _, err := l.Produce(m); return err })
	reportLogWrites(b, l, nodes)
	tr.report(b)
}

// BenchmarkFailover measures, per iteration, the time from killing the
// leader to the first produce acknowledged by the new one (the fast test
// timeouts: 250 ms heartbeat and election timeout): its mean, its median
// (p50-ms) and the election timeout it runs with, for the target p50 ≤ 2×
// the election timeout; raft-elected-p50-ms is raft's own part, until a
// survivor's raft state is Leader (the rest is this package's: barrier,
// services, the produce).
func BenchmarkFailover(b *testing.B) {
	nodes := benchCluster(b, "", true)
	var total time.Duration
	var each, elected []time.Duration
	for i := 0; i < b.N; i++ {
		l := leaderOf(b, nodes)
		cfg := l.cfg
		cfg.Bootstrap = nil
		killed := time.Now()
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		var won time.Duration // raft's own part: until a survivor's raft leads
		for {
			var ok bool
			for _, n := range nodes {
				if n != l && won == 0 && n.raft.State() == raft.Leader {
					won = time.Since(killed)
				}
				if n != l && n.IsLeader() {
					if _, err := n.Produce(&store.Message{Topic: "f", Body: []byte("x")}); err == nil {
						ok = true
					}
				}
			}
			if ok {
				break
			}
			time.Sleep(time.Millisecond)
		}
		total += time.Since(killed)
		each = append(each, time.Since(killed))
		elected = append(elected, cmp.Or(won, each[len(each)-1]))
		b.StopTimer()
		n, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		for j := range nodes {
			if nodes[j] == l {
				nodes[j] = n
			}
		}
		time.Sleep(300 * time.Millisecond) // let it rejoin before the next kill
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
	slices.Sort(each)
	b.ReportMetric(float64(each[len(each)/2].Milliseconds()), "p50-ms")
	slices.Sort(elected)
	b.ReportMetric(float64(elected[len(elected)/2].Milliseconds()), "raft-elected-p50-ms")
	b.ReportMetric(float64(nodes[0].cfg.ElectionTimeout.Milliseconds()), "election-timeout-ms")
}

// reportLogWrites reports how the segment logs were written: messages per
// StoreLogs call (= per fsync) on the leader and on a follower, and the
// mean fsync time.
func reportLogWrites(b *testing.B, leader *Node, nodes []*Node) {
	bs := &leader.batch.stats
	if p, e := bs.Produces.Load(), bs.Entries.Load(); p > 0 && e > 0 {
		b.ReportMetric(float64(bs.QueuedNanos.Load())/float64(p)/1e3, "queued-µs/produce")
		b.ReportMetric(float64(bs.RaftNanos.Load())/float64(e)/1e3, "raft-µs/entry")
		b.ReportMetric(float64(bs.WakeNanos.Load())/float64(p)/1e3, "wake-µs/produce")
		b.ReportMetric(float64(p)/float64(e), "produces/entry")
	}
	follower := false
	for _, n := range nodes {
		ls, ok := n.logs.(*logStore)
		if !ok {
			return
		}
		role := "leader"
		if n != leader {
			if follower {
				continue
			}
			role, follower = "follower", true
		}
		st := ls.stats()
		if st.Batches == 0 {
			continue
		}
		b.ReportMetric(float64(b.N)/float64(st.Batches), "msgs/fsync-"+role)
		b.ReportMetric(float64(st.Entries)/float64(st.Batches), "entries/fsync-"+role)
		b.ReportMetric(float64(st.SyncNanos)/float64(st.Batches)/1e3, "fsync-µs-"+role)
	}
}

// reportGroupSyncs reports the fdatasyncs of every raft log of every
// member and group per message (fsyncs/msg) and their mean time: with
// BenchmarkFsyncFloor's syncs/s on the same disk, what the disk alone lets
// the case reach.
func reportGroupSyncs(b *testing.B, members []*Groups) {
	var syncs, nanos uint64
	for _, gs := range members {
		for g := range gs.N() {
			if ls, ok := gs.Group(g).logs.(*logStore); ok {
				st := ls.stats()
				syncs, nanos = syncs+st.Batches, nanos+st.SyncNanos
			}
		}
	}
	if syncs > 0 {
		b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/msg")
		b.ReportMetric(float64(nanos)/float64(syncs)/1e3, "fsync-µs")
	}
}

// BenchmarkProducePolicy runs the 64-producer replicated row under the
// batcher's policies side by side (depth = entries in flight, yields =
// how long a cut waits for ready producers to queue; depth=4/yields=0 with
// a synchronous leader log was the previous round's design), with
// SyncGroup after them for same-run ratios.
func BenchmarkProducePolicy(b *testing.B) {
	defer func(d, y int) { maxInflight, maxYields = d, y }(maxInflight, maxYields)
	for _, p := range []struct {
		depth, yields int
		syncLeader    bool
	}{{4, 0, true}, {4, 0, false}, {1, 0, false}, {1, 8, true}, {1, 8, false}, {2, 8, false}} {
		b.Run(fmt.Sprintf("depth=%d/yields=%d/leaderlog=%s", p.depth, p.yields, map[bool]string{true: "sync", false: "deferred"}[p.syncLeader]), func(b *testing.B) {
			maxInflight, maxYields = p.depth, p.yields
			nodes := benchClusterWith(b, LogStoreSegment, false, func(c *Config) { c.syncLeaderLog = p.syncLeader })
			l := leaderOf(b, nodes)
			runProducers(b, 64, func(m *store.Message) error { _, err := l.Produce(m); return err })
			reportLogWrites(b, l, nodes)
		})
	}
	b.Run("single/SyncGroup", func(b *testing.B) {
		st, err := store.Open(b.TempDir(), store.Options{Sync: store.SyncGroup})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		runProducers(b, 64, func(m *store.Message) error { return st.Append(m) })
	})
}

// benchGroups is three members of groups raft groups in this process
// (OpenGroups: one TCP listener per member on 127.0.0.1, each group with
// its own fsynced raft log and store), with the throughput runs' timeouts.
func benchGroups(b *testing.B, groups int) []*Groups {
	b.Helper()
	root := b.TempDir()
	var servers []raft.Server
	var cfgs []Config
	for i := 1; i <= 3; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		id := fmt.Sprintf("n%d", i)
		cfgs = append(cfgs, Config{ID: id, Dir: filepath.Join(root, id), RaftAddr: addr,
			ApplyTimeout: 10 * time.Second, SnapshotThreshold: 1 << 30})
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	var members []*Groups
	b.Cleanup(func() {
		for _, gs := range members {
			_ = gs.Close()
		}
	})
	for _, cfg := range cfgs {
		cfg.Bootstrap = servers
		gs, err := OpenGroups(cfg, groups)
		if err != nil {
			b.Fatal(err)
		}
		members = append(members, gs)
	}
	return members
}

// groupLeaders is, per group, the member that leads it.
func groupLeaders(b *testing.B, members []*Groups) []*Groups {
	b.Helper()
	out := make([]*Groups, members[0].N())
	for g := range out {
		nodes := make([]*Node, len(members))
		for i, gs := range members {
			nodes[i] = gs.Group(g)
		}
		l := leaderOf(b, nodes)
		for _, gs := range members {
			if gs.Group(g) == l {
				out[g] = gs
			}
		}
	}
	return out
}

// BenchmarkProduceGroups is the 64-producer, 1 KiB replicated row over N
// raft groups (Groups: queue q in group q mod N, the producers' eight
// queues spread over the groups; each produce goes to its group's leader
// through Groups.Produce), with single-node SyncGroup in the same run for
// ratios. cpu-µs/msg and cores say what the run cost the machine. Run one
// sub-benchmark per process, alternated (-bench
// 'ProduceGroups/replicated/groups=4' then 'ProduceGroups/single', ...).
func BenchmarkProduceGroups(b *testing.B) {
	for _, groups := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("replicated/groups=%d/producers=64", groups), func(b *testing.B) {
			members := benchGroups(b, groups)
			leaders := make([]atomic.Pointer[Groups], groups)
			for g, l := range groupLeaders(b, members) {
				leaders[g].Store(l)
			}
			var retries atomic.Int64
			cpu := withCPU(b, func() {
				runProducers(b, 64, func(m *store.Message) error {
					g := members[0].GroupOf(m.QueueID)
					for deadline := time.Now().Add(30 * time.Second); ; {
						_, err := leaders[g].Load().Produce(m)
						if err == nil || (!errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNotCommitted)) || time.Now().After(deadline) {
							return err
						}
						// a leader change under load: find the new one
						retries.Add(1)
						for _, gs := range members {
							if gs.IsLeader(g) {
								leaders[g].Store(gs)
							}
						}
						time.Sleep(time.Millisecond)
					}
				})
			})
			b.ReportMetric(float64(retries.Load()), "retries")
			reportGroupSyncs(b, members)
			var p, e, qn, rn, wn uint64
			for g := range leaders {
				l := leaders[g].Load()
				bs := &l.Group(g).batch.stats
				p, e = p+bs.Produces.Load(), e+bs.Entries.Load()
				qn, rn, wn = qn+bs.QueuedNanos.Load(), rn+bs.RaftNanos.Load(), wn+bs.WakeNanos.Load()
			}
			if e > 0 {
				b.ReportMetric(float64(qn)/float64(p)/1e3, "queued-µs/produce")
				b.ReportMetric(float64(rn)/float64(e)/1e3, "raft-µs/entry")
				b.ReportMetric(float64(wn)/float64(p)/1e3, "wake-µs/produce")
				b.ReportMetric(float64(p)/float64(e), "produces/entry")
				if cpu > 0 {
					b.ReportMetric(float64(cpu.Microseconds())/float64(e), "cpu-µs/entry")
				}
			}
		})
	}
	b.Run("single/SyncGroup/producers=64", func(b *testing.B) {
		st, err := store.Open(b.TempDir(), store.Options{Sync: store.SyncGroup})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		_ = withCPU(b, func() { runProducers(b, 64, func(m *store.Message) error { return st.Append(m) }) })
	})
}
