package main

import (
	"fmt"
	"os"
	"time"

	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// The pop workload (issue 15): pop+ack of 1 KiB messages, batch 32, one
// consumer, over a SyncNone store holding the messages in 1, 16 or 256
// queues (popped with pop.AllQueues when more than one), committed to pop's
// default in-memory Offsets: pop's own cost per message with the store's
// read path, as pop's BenchmarkPopAckBatch32 and BenchmarkPopAckQueues
// measure it. The 16- and 256-queue rows are compared with the 1-queue row.
const wPop = "pop"

const popRef = "brokercore pop 32 + Ack, 1 queue"

// popCases lists the rows of the pop workload; every run pops n messages.
func popCases(cfg *config) []*bcase {
	return []*bcase{
		popQueuesCase(popRef, "", 1, cfg.consumeN),
		popQueuesCase("brokercore pop 32 + Ack, 16 queues AllQueues", popRef, 16, cfg.consumeN),
		popQueuesCase("brokercore pop 32 + Ack, 256 queues AllQueues", popRef, 256, cfg.consumeN),
	}
}

// popQueuesCase prefills n messages spread evenly over queues queues of the
// bench topic; every repetition pops and acks all of them under a new
// consumer group, and checks that each non-empty queue's committed offset
// reached its end.
func popQueuesCase(system, ref string, queues int, n int64) *bcase {
	var (
		st    *store.Store
		dir   string
		round int
	)
	c := &bcase{system: system, ref: ref, op: "Pop of 32 + 32 Acks"}
	c.prepare = func(e *env) error {
		var err error
		st, dir, err = spreadStore(e, n, queues)
		return err
	}
	c.cleanup = func() {
		if st != nil {
			st.Close()
		}
		os.RemoveAll(dir)
	}
	c.run = func(e *env) (sample, error) {
		round++
		offsets := pop.NewMemoryOffsets()
		svc := pop.New(st, pop.Options{Offsets: offsets})
		defer svc.Close()
		qid := 0
		if queues > 1 {
			qid = pop.AllQueues
		}
		req := pop.Request{Group: fmt.Sprintf("g%d", round), Topic: benchTopic, ClientID: "c", QueueID: qid,
			Max: pop.MaxBatch, Invisible: time.Minute}
		got, lat, el, cpu, err := popAckAll(e.ctx, svc, req, n)
		if err != nil {
			return sample{}, err
		}
		for q := range queues {
			end := st.MaxOffset(benchTopic, q)
			if com, ok := offsets.Committed(req.Group, benchTopic, q); end > 0 && (!ok || com != end) {
				return sample{}, fmt.Errorf("pop: queue %d committed %d (%v), its end is %d", q, com, ok, end)
			}
		}
		note := ""
		if queues > 1 {
			note = fmt.Sprintf("%.1f msgs per queue", float64(n)/float64(queues))
		}
		return sample{msgs: got, bytes: got * bodySize, elapsed: el, cpu: cpu, lat: lat, note: note}, svc.Close()
	}
	return c
}

// spreadStore opens a SyncNone store in a fresh directory holding n
// messages of bodySize bytes spread over queues queues of the bench topic
// (queue q gets n/queues, the first n%queues one more, each queue's
// messages in one run of the log); the caller owns it.
func spreadStore(e *env, n int64, queues int) (*store.Store, string, error) {
	per, extra := n/int64(queues), n%int64(queues)
	return freshStore(e, "popq", n, bodySize, store.Options{}, func(i int64) int {
		long := extra * (per + 1) // the first extra queues' messages
		if i < long {
			return int(i / (per + 1))
		}
		return int(extra + (i-long)/per)
	})
}
