package offset

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// pqModel is one process queue in the model: dropped or not, where it pulls
// next, and the offsets and bytes it buffers.
type pqModel struct {
	real    *ProcessQueue
	dropped bool
	next    int64
	buf     []int64
	bytes   int64
}

var modelQueues = []Queue{{Topic: "a", QueueID: 0}, {Topic: "a", QueueID: 1}, {Topic: "b", QueueID: 0}}

const (
	modelMaxMsgs  = 6
	modelMaxBytes = 40
)

func modelBatch(q Queue, from int64, sizes []int) []*store.Message {
	msgs := make([]*store.Message, len(sizes))
	for i, s := range sizes {
		msgs[i] = &store.Message{Topic: q.Topic, QueueID: q.QueueID, QueueOffset: from + int64(i), Body: make([]byte, s)}
	}
	return msgs
}

// TestQueueTableMatchesModel checks the table, op by op, against a map of
// queue -> live pqModel plus the list of every process queue ever created
// (old instances keep being delivered to, as orphaned pulls would).
func TestQueueTableMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tab := NewQueueTable(TableOptions{MaxBuffered: modelMaxMsgs, MaxBufferedBytes: modelMaxBytes})
		live := map[Queue]*pqModel{}
		var all []*pqModel
		install := func(t *rapid.T, reset bool) {
			q := rapid.SampledFrom(modelQueues).Draw(t, "queue")
			next := rapid.Int64Range(0, 100).Draw(t, "next")
			epoch := rapid.Uint64Range(0, 5).Draw(t, "epoch")
			var pq *ProcessQueue
			if reset {
				pq = tab.Reset(q, next, epoch)
			} else {
				pq = tab.Assign(q, next, epoch)
			}
			if old := live[q]; old != nil {
				old.dropped, old.buf, old.bytes = true, nil, 0
			}
			m := &pqModel{real: pq, next: next}
			live[q] = m
			all = append(all, m)
			require.Equal(t, epoch, pq.Epoch())
			require.Equal(t, q, pq.Queue())
		}
		rt.Repeat(map[string]func(*rapid.T){
			"assign": func(t *rapid.T) { install(t, false) },
			"reset":  func(t *rapid.T) { install(t, true) },
			"revoke": func(t *rapid.T) {
				q := rapid.SampledFrom(modelQueues).Draw(t, "queue")
				old := live[q]
				require.Equal(t, old != nil, tab.Revoke(q))
				if old != nil {
					old.dropped, old.buf, old.bytes = true, nil, 0
					delete(live, q)
				}
			},
			"deliver": func(t *rapid.T) {
				if len(all) == 0 {
					t.Skip("nothing assigned yet")
				}
				m := rapid.SampledFrom(all).Draw(t, "pq")
				sizes := rapid.SliceOfN(rapid.IntRange(0, 15), 0, 8).Draw(t, "sizes")
				err := m.real.Deliver(modelBatch(m.real.Queue(), m.next, sizes))
				var size int64
				for _, s := range sizes {
					size += int64(s)
				}
				switch {
				case m.dropped:
					require.ErrorIs(t, err, ErrDropped)
				case len(sizes) == 0:
					require.NoError(t, err)
				case len(m.buf) > 0 && (len(m.buf)+len(sizes) > modelMaxMsgs || m.bytes+size > modelMaxBytes):
					require.ErrorIs(t, err, ErrBackpressure)
				default:
					require.NoError(t, err)
					for i := range sizes {
						m.buf = append(m.buf, m.next+int64(i))
					}
					m.bytes += size
					m.next += int64(len(sizes))
				}
			},
			"take": func(t *rapid.T) {
				if len(all) == 0 {
					t.Skip("nothing assigned yet")
				}
				m := rapid.SampledFrom(all).Draw(t, "pq")
				n := rapid.IntRange(0, 8).Draw(t, "max")
				got := m.real.Take(n)
				want := m.buf[:min(n, len(m.buf))]
				require.Len(t, got, len(want))
				for i, msg := range got {
					require.Equal(t, want[i], msg.QueueOffset)
					m.bytes -= int64(len(msg.Body))
				}
				m.buf = m.buf[len(want):]
			},
			"": func(t *rapid.T) {
				require.Equal(t, len(live), tab.Len())
				for _, q := range modelQueues {
					got, ok := tab.Get(q)
					if m := live[q]; m != nil {
						require.True(t, ok)
						require.Same(t, m.real, got)
					} else {
						require.False(t, ok)
					}
				}
				for _, m := range all {
					require.Equal(t, m.dropped, m.real.Dropped())
					require.Equal(t, m.next, m.real.NextOffset())
					n, b := m.real.Buffered()
					require.Equal(t, len(m.buf), n)
					require.Equal(t, m.bytes, b)
				}
			},
		})
	})
}

// tableOp is one operation of one goroutine in the concurrent test.
type tableOp struct {
	Kind  int // 0 assign, 1 reset, 2 revoke, 3 deliver, 4 take
	Queue int
	N     int
}

// TestConcurrentResetsRevokesAndDeliveriesKeepOneLivePullPerQueue runs random
// operation lists from 4 goroutines at once (pullers always deliver to the
// process queue they got earlier, which may have been dropped meanwhile) and
// checks the invariants that must hold after any interleaving. Like the
// model test above, it was checked to fail (rapid finds a counterexample at
// once) when QueueTable.install replaces without calling old.drop.
func TestConcurrentResetsRevokesAndDeliveriesKeepOneLivePullPerQueue(t *testing.T) {
	opGen := rapid.Custom(func(t *rapid.T) tableOp {
		return tableOp{
			Kind:  rapid.IntRange(0, 4).Draw(t, "kind"),
			Queue: rapid.IntRange(0, len(modelQueues)-1).Draw(t, "queue"),
			N:     rapid.IntRange(1, 8).Draw(t, "n"),
		}
	})
	rapid.Check(t, func(rt *rapid.T) {
		tab := NewQueueTable(TableOptions{MaxBuffered: modelMaxMsgs, MaxBufferedBytes: modelMaxBytes})
		plans := make([][]tableOp, 4)
		for i := range plans {
			plans[i] = rapid.SliceOfN(opGen, 1, 40).Draw(rt, "plan")
		}
		var (
			mu        sync.Mutex
			created   []*ProcessQueue
			lateOK    int // deliveries accepted by a process queue already seen dropped before the call
			wg        sync.WaitGroup
			failures  = make(chan error, 64)
			perWorker = make([]map[int]*ProcessQueue, len(plans))
		)
		for w, plan := range plans {
			perWorker[w] = map[int]*ProcessQueue{}
			wg.Go(func() {
				held := perWorker[w] // the process queue this worker's puller was issued for
				for _, op := range plan {
					runtime.Gosched() // interleave the workers more finely
					q := modelQueues[op.Queue]
					switch op.Kind {
					case 0, 1:
						var pq *ProcessQueue
						if op.Kind == 0 {
							pq = tab.Assign(q, 0, uint64(op.N))
						} else {
							pq = tab.Reset(q, 0, uint64(op.N))
						}
						mu.Lock()
						created = append(created, pq)
						mu.Unlock()
						held[op.Queue] = pq
					case 2:
						tab.Revoke(q)
					case 3:
						pq := held[op.Queue]
						if pq == nil {
							continue
						}
						wasDropped := pq.Dropped()
						err := pq.Deliver(modelBatch(q, pq.NextOffset(), make([]int, op.N)))
						if err == nil && wasDropped {
							mu.Lock()
							lateOK++
							mu.Unlock()
						}
						if err != nil && !errors.Is(err, ErrDropped) && !errors.Is(err, ErrBackpressure) {
							failures <- err
						}
					case 4:
						if pq, ok := tab.Get(q); ok {
							pq.Take(op.N)
						}
					}
				}
			})
		}
		wg.Wait()
		close(failures)
		for err := range failures {
			rt.Fatalf("unexpected deliver error: %v", err)
		}
		require.Zero(rt, lateOK, "a dropped process queue accepted a delivery")

		inTable := map[*ProcessQueue]bool{}
		tab.Range(func(pq *ProcessQueue) bool { inTable[pq] = true; return true })
		require.Equal(rt, tab.Len(), len(inTable))
		for _, q := range modelQueues {
			if pq, ok := tab.Get(q); ok {
				require.True(rt, inTable[pq])
			}
		}
		var live, buffered int
		for _, pq := range created {
			n, b := pq.Buffered()
			buffered += n
			if inTable[pq] {
				live++
				require.False(rt, pq.Dropped(), "a process queue in the table is live")
				require.LessOrEqual(rt, n, max(modelMaxMsgs, 8), "buffer within limits (or one batch)")
				continue
			}
			require.True(rt, pq.Dropped(), "a process queue out of the table is dropped")
			require.Zero(rt, n+int(b), "a dropped process queue holds nothing")
		}
		require.Equal(rt, tab.Len(), live, "exactly one live process queue per assigned queue")
		st := tab.Stats()
		require.Equal(rt, int(st.Delivered-st.Taken-st.ReleasedMessages), buffered, "every delivered message is buffered, taken or released")
		require.Equal(rt, uint64(len(created)-live), st.Dropped)
	})
}
