package replica

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/brokercore/brokercore/store"
)

// nullFSM applies nothing: the raft floor's state machine.
type nullFSM struct{}

func (*nullFSM) Apply(*raft.Log) any { return nil }

func (*nullFSM) Snapshot() (raft.FSMSnapshot, error) { return nullSnapshot{}, nil }

func (*nullFSM) Restore(rc io.ReadCloser) error { return rc.Close() }

type nullSnapshot struct{}

func (nullSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (nullSnapshot) Release()                             {}

// BenchmarkRaftFloor is what hashicorp/raft itself reaches in
// BenchmarkProduceGroups' setting on this machine: the same 64 producers of
// 1 KiB over the same queues and groups, three members of each group in
// this process over TCP on 127.0.0.1 with the product's raft timeouts, but
// with strictly less work than the product's: log and votes in memory (no
// write, no fsync), a state machine that applies nothing, no store, one
// listener per member and group. With batch=none each produce is one
// raft.Apply to its group's leader (raft joins the applies waiting for it
// into one AppendEntries); with batch=1 a minimal batcher makes the
// produces waiting for a group one entry, one entry in flight (measured: 2
// or 4 in flight ran slower). Compare msgs/s with
// BenchmarkProduceGroups/single in the same run (examples/bench's modules
// table does): what separates the replicated rows from it is durability,
// the stores and the product's own work, not raft's rounds.
func BenchmarkRaftFloor(b *testing.B) {
	for _, groups := range []int{1, 4} {
		for _, inflight := range []int{0, 1} {
			name := fmt.Sprintf("inmem/groups=%d/batch=%d/producers=64", groups, inflight)
			if inflight == 0 {
				name = fmt.Sprintf("inmem/groups=%d/batch=none/producers=64", groups)
			}
			b.Run(name, func(b *testing.B) {
				leaders := floorGroups(b, groups)
				batches := make([]*floorBatcher, groups)
				for g, r := range leaders {
					batches[g] = &floorBatcher{r: r, max: inflight}
				}
				_ = withCPU(b, func() {
					runProducers(b, 64, func(m *store.Message) error {
						// the producers' queues spread over the groups as Groups does
						g := m.QueueID % groups
						if inflight == 0 {
							return leaders[g].Apply(m.Body, 10*time.Second).Error()
						}
						return batches[g].produce(m.Body)
					})
				})
				var p, e uint64
				for _, fb := range batches {
					p, e = p+fb.produces.Load(), e+fb.entries.Load()
				}
				if e > 0 {
					b.ReportMetric(float64(p)/float64(e), "produces/entry")
				}
			})
		}
	}
}

// floorBatcher joins the produces waiting for a group into one entry, at
// most max entries in flight: whoever finds room proposes everything
// queued, answers it, and proposes again while more waits.
type floorBatcher struct {
	r   *raft.Raft
	max int

	mu       sync.Mutex
	bodies   [][]byte
	waiting  []chan error
	inflight int

	produces, entries atomic.Uint64
}

func (f *floorBatcher) produce(body []byte) error {
	done := make(chan error, 1)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.waiting = append(f.waiting, done)
	for f.inflight < f.max && len(f.waiting) > 0 {
		bodies, waiting := f.bodies, f.waiting
		f.bodies, f.waiting = nil, nil
		f.inflight++
		f.mu.Unlock()
		entry := make([]byte, 0, len(bodies)*len(body))
		for _, b := range bodies {
			entry = append(entry, b...)
		}
		err := f.r.Apply(entry, 10*time.Second).Error()
		f.produces.Add(uint64(len(waiting)))
		f.entries.Add(1)
		for _, w := range waiting {
			w <- err
		}
		f.mu.Lock()
		f.inflight--
	}
	f.mu.Unlock()
	return <-done
}

// floorGroups starts groups raft groups of three in-memory members each
// and returns every group's leader.
func floorGroups(b *testing.B, groups int) []*raft.Raft {
	b.Helper()
	var all []*raft.Raft
	var trans []*raft.NetworkTransport
	b.Cleanup(func() {
		for _, r := range all {
			_ = r.Shutdown().Error()
		}
		for _, t := range trans {
			t.CloseStreams() // pooled connections: the peers' handlers end
			_ = t.Close()
		}
	})
	leaders := make([]*raft.Raft, groups)
	for g := range groups {
		var members []*raft.Raft
		var servers []raft.Server
		var ts []*raft.NetworkTransport
		for i := 1; i <= 3; i++ {
			t, err := raft.NewTCPTransport("127.0.0.1:0", nil, 4, 10*time.Second, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			trans = append(trans, t)
			ts = append(ts, t)
			servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: t.LocalAddr()})
		}
		for i, t := range ts {
			rc := raft.DefaultConfig()
			rc.LocalID = servers[i].ID
			rc.HeartbeatTimeout = DefaultHeartbeatTimeout
			rc.ElectionTimeout = DefaultElectionTimeout
			rc.LeaderLeaseTimeout = DefaultLeaderLease
			rc.CommitTimeout = min(rc.CommitTimeout, DefaultHeartbeatTimeout/4)
			rc.SnapshotThreshold = 1 << 30
			rc.BatchApplyCh = true
			rc.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
			logs, votes, snaps := raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()
			if err := raft.BootstrapCluster(rc, logs, votes, snaps, t, raft.Configuration{Servers: servers}); err != nil {
				b.Fatal(err)
			}
			r, err := raft.NewRaft(rc, &nullFSM{}, logs, votes, snaps, t)
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, r)
			members = append(members, r)
		}
		deadline := time.Now().Add(15 * time.Second)
		for leaders[g] == nil {
			for _, r := range members {
				if r.State() == raft.Leader {
					leaders[g] = r
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("group %d: no leader", g)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return leaders
}
