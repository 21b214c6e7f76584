package replica

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// stageTrace times each raft entry's way through the cluster (benchmarks
// only, through Config's trace hooks): proposal, the leader's StoreLogs,
// every follower's StoreLogs, the leader's FSM Apply, the answer to the
// proposer. report turns it into mean microseconds per stage.
type stageTrace struct {
	mu      sync.Mutex
	leader  string
	entries map[uint64]*entryTrace
	stores  map[string][][2]time.Time // per node: StoreLogs calls, in order
}

type entryTrace struct {
	proposed, answered     time.Time
	storeStart, storeEnd   map[string]time.Time // per node
	applyStart, applyEnd   time.Time            // on the leader
	durableAt              time.Time            // the leader's log held it on disk (seen by the FSM)
	leaderBatch, followerB map[string]int       // entries in the StoreLogs call that wrote it
}

func newStageTrace() *stageTrace {
	return &stageTrace{entries: map[uint64]*entryTrace{}, stores: map[string][][2]time.Time{}}
}

func (t *stageTrace) entry(i uint64) *entryTrace {
	e := t.entries[i]
	if e == nil {
		e = &entryTrace{storeStart: map[string]time.Time{}, storeEnd: map[string]time.Time{}}
		t.entries[i] = e
	}
	return e
}

// hook installs the trace on cfg (node id cfg.ID).
func (t *stageTrace) hook(cfg *Config) {
	id := cfg.ID
	cfg.wrapLogStore = func(s raft.LogStore) raft.LogStore { return &tracedLog{LogStore: s, t: t, id: id} }
	cfg.wrapFSM = func(f raft.FSM) raft.FSM { return &tracedFSM{FSM: f, t: t, id: id} }
	cfg.traceEntry = func(index uint64, proposed, answered time.Time) {
		t.mu.Lock()
		e := t.entry(index)
		e.proposed, e.answered = proposed, answered
		t.leader = id
		t.mu.Unlock()
	}
}

type tracedLog struct {
	raft.LogStore
	t  *stageTrace
	id string
}

func (l *tracedLog) IsMonotonic() bool { return true }

func (l *tracedLog) StoreLogs(logs []*raft.Log) error {
	t0 := time.Now()
	err := l.LogStore.StoreLogs(logs)
	t1 := time.Now()
	l.t.mu.Lock()
	l.t.stores[l.id] = append(l.t.stores[l.id], [2]time.Time{t0, t1})
	for _, lg := range logs {
		e := l.t.entry(lg.Index)
		e.storeStart[l.id], e.storeEnd[l.id] = t0, t1
	}
	l.t.mu.Unlock()
	return err
}

func (l *tracedLog) StoreLog(lg *raft.Log) error { return l.StoreLogs([]*raft.Log{lg}) }

type tracedFSM struct {
	raft.FSM
	t  *stageTrace
	id string
}

func (f *tracedFSM) Apply(l *raft.Log) any {
	t0 := time.Now()
	if in, ok := f.FSM.(*fsm); ok && in.durable != nil {
		_ = in.durable(l.Index) // the FSM's own wait then returns at once
	}
	td := time.Now()
	r := f.FSM.Apply(l)
	t1 := time.Now()
	f.t.mu.Lock()
	if f.id == f.t.leader {
		e := f.t.entry(l.Index)
		e.applyStart, e.applyEnd, e.durableAt = t0, t1, td
	}
	f.t.mu.Unlock()
	return r
}

// stallOver is how long a round must take (proposal to answer) for its
// longest stage to count as a stall: the normal round is ~1–1.5 ms here.
const stallOver = 3 * time.Millisecond

// report reports the mean of each stage over the entries the leader
// proposed and traced whole, in µs. The follower that counts is the
// first to finish its StoreLogs (it makes the majority). stall-ms sums,
// over the rounds longer than stallOver, their longest stage (and
// tN-stall-ms per stage): where the p99 comes from.
func (t *stageTrace) report(b *testing.B) {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := []string{
		"t1-propose→lstore", "t2-lstore", "t3-lstore→fstore", "t4-fstore",
		"t5-fstore→apply", "t6-apply", "t7-apply→answer",
		"t3a-fbusy", "t5a-ldurable-wait",
	}
	sums := make([]float64, len(names))
	stalls := make([]time.Duration, 7)
	var n int
	for _, e := range t.entries {
		ls, ok1 := e.storeStart[t.leader]
		le := e.storeEnd[t.leader]
		if e.proposed.IsZero() || !ok1 || e.applyStart.IsZero() {
			continue
		}
		var fs, fe time.Time
		var fid string
		for id, end := range e.storeEnd {
			if id == t.leader {
				continue
			}
			if fe.IsZero() || end.Before(fe) {
				fs, fe, fid = e.storeStart[id], end, id
			}
		}
		if fe.IsZero() {
			continue
		}
		st := []time.Time{e.proposed, ls, le, fs, fe, e.applyStart, e.applyEnd, e.answered}
		longest := 0
		for i := range st[1:] {
			sums[i] += float64(st[i+1].Sub(st[i]).Microseconds())
			if st[i+1].Sub(st[i]) > st[longest+1].Sub(st[longest]) {
				longest = i
			}
		}
		if st[7].Sub(st[0]) > stallOver {
			stalls[longest] += st[longest+1].Sub(st[longest])
		}
		// t3a: the part of t3 the follower was still storing an earlier batch.
		calls := t.stores[fid]
		k, _ := slices.BinarySearchFunc(calls, fs, func(c [2]time.Time, at time.Time) int { return c[0].Compare(at) })
		if k > 0 && calls[k-1][1].After(le) {
			sums[7] += float64(calls[k-1][1].Sub(le).Microseconds())
		}
		sums[8] += float64(e.durableAt.Sub(e.applyStart).Microseconds())
		n++
	}
	if n == 0 {
		return
	}
	for i, name := range names {
		b.ReportMetric(sums[i]/float64(n), name+"-µs")
	}
	b.ReportMetric(float64(n), "traced-entries")
	var all time.Duration
	for i, d := range stalls {
		all += d
		if d > 0 {
			b.ReportMetric(float64(d.Milliseconds()), names[i][:2]+"-stall-ms")
		}
	}
	b.ReportMetric(float64(all.Milliseconds()), "stall-ms")
}
