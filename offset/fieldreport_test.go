package offset

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The field report (RocketMQ "Reset Offset causes frequent Full GC and
// blocked consumer threads"): a reset every 10 s, for hours, against a
// consumer whose pulls keep completing. Reset removed process queues from the
// table without dropping them, so their pull requests lived on as orphans:
// messages piled up in memory, and an orphan could commit old progress.
// The scenario below compresses that: 100 resets from 8 goroutines.

// resettableTable is what the scenario needs from a consumer's table; the
// real *QueueTable and the broken leakyTable both provide it.
type resettableTable interface {
	Reset(q Queue, next int64, epoch uint64) *ProcessQueue
	Get(q Queue) (*ProcessQueue, bool)
}

// leakyTable is the broken design of the field report: Reset replaces the
// process queue in the map without dropping the old one.
type leakyTable struct {
	limits *QueueTable // limits and counters for the process queues
	mu     sync.Mutex
	queues map[Queue]*ProcessQueue
}

func (l *leakyTable) Reset(q Queue, next int64, epoch uint64) *ProcessQueue {
	pq := newProcessQueue(l.limits, q, next, epoch)
	l.mu.Lock()
	l.queues[q] = pq // the old one is forgotten, not dropped
	l.mu.Unlock()
	return pq
}

func (l *leakyTable) Get(q Queue) (*ProcessQueue, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pq, ok := l.queues[q]
	return pq, ok
}

// queues0 returns the table whose limits and counters the process queues use.
func limitsOf(table resettableTable) *QueueTable {
	if l, ok := table.(*leakyTable); ok {
		return l.limits
	}
	return table.(*QueueTable)
}

// pull is one pull request loop, issued for one process queue.
type pull struct {
	pq               *ProcessQueue
	start            int64
	replaced         atomic.Bool  // its process queue was taken out of the table
	running          atomic.Bool  // still issuing pulls
	orphanDeliveries atomic.Int64 // deliveries accepted after replaced was set
	consumed         atomic.Int64 // messages taken and committed from it
}

// endlessTopic answers every read with max fresh messages from offset on:
// a topic that producers keep filling.
func endlessTopic(q Queue, offset int64, max int) []*store.Message {
	msgs := make([]*store.Message, max)
	for i := range msgs {
		msgs[i] = &store.Message{Topic: q.Topic, QueueID: q.QueueID, QueueOffset: offset + int64(i), Body: []byte("0123456789")}
	}
	return msgs
}

type fieldReport struct {
	liveInstances    int   // process queues ever created and not dropped
	orphansRunning   int   // pulls of replaced process queues still running at the end
	orphanDeliveries int64 // deliveries accepted by replaced process queues
	orphanBuffered   int   // messages held by replaced process queues
	liveBuffered     []int // messages held by each live process queue
	commitMismatch   []string
}

const (
	frGroup      = "g"
	frResets     = 100
	frResetters  = 8
	frMaxBuffer  = 64
	frPullBatch  = 16
	frTakeBatch  = 8
	frQueueCount = 4
)

// runResetStorm runs the scenario against table (which must use limits for
// its process queues) and returns what it observed. settle bounds how long
// it waits for replaced pulls to notice they were dropped.
func runResetStorm(t *testing.T, table resettableTable, settle time.Duration) fieldReport {
	mgr, err := Open(Options{})
	require.NoError(t, err)
	defer mgr.Close()

	queues := make([]Queue, frQueueCount)
	for i := range queues {
		queues[i] = Queue{Topic: "orders", QueueID: i}
	}
	var (
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		mu        sync.Mutex // guards pulls, live, lastReset
		pulls     []*pull
		live      = map[Queue]*pull{}
		lastReset = map[Queue]int64{}
		qmu       = make([]sync.Mutex, frQueueCount) // the host applies one queue's resets in epoch order
	)
	issue := func(q Queue, pq *ProcessQueue, start int64) {
		p := &pull{pq: pq, start: start}
		p.running.Store(true)
		mu.Lock()
		if old := live[q]; old != nil {
			old.replaced.Store(true)
		}
		live[q], lastReset[q] = p, start
		pulls = append(pulls, p)
		mu.Unlock()
		wg.Go(func() {
			defer p.running.Store(false)
			for {
				select {
				case <-stop:
					return
				default:
				}
				wasReplaced := p.replaced.Load() // read before Deliver: no false positives
				err := p.pq.Deliver(endlessTopic(q, p.pq.NextOffset(), frPullBatch))
				switch {
				case err == nil:
					if wasReplaced {
						p.orphanDeliveries.Add(1)
					}
					runtime.Gosched()
				case errors.Is(err, ErrDropped):
					return // the pull is not re-issued
				case errors.Is(err, ErrBackpressure):
					time.Sleep(50 * time.Microsecond) // pull back-off, as the client's delayed pull
				default:
					t.Errorf("deliver: %v", err)
					return
				}
			}
		})
	}
	for _, q := range queues {
		issue(q, table.Reset(q, 0, mgr.Epoch(frGroup, q.Topic, q.QueueID)), 0)
	}
	// Consumers: one per queue, always on the table's current process queue.
	for _, q := range queues {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				pq, _ := table.Get(q)
				msgs := pq.Take(frTakeBatch)
				if len(msgs) == 0 {
					runtime.Gosched()
					continue
				}
				err := pq.Commit(mgr, frGroup, msgs[len(msgs)-1].QueueOffset+1)
				if err == nil {
					mu.Lock()
					for _, p := range pulls {
						if p.pq == pq {
							p.consumed.Add(int64(len(msgs)))
						}
					}
					mu.Unlock()
				} else if !errors.Is(err, ErrDropped) && !errors.Is(err, ErrStaleEpoch) {
					t.Errorf("commit: %v", err)
				}
			}
		})
	}
	// 100 resets from 8 goroutines while pulls keep completing.
	var resetters sync.WaitGroup
	for r := range frResetters {
		resetters.Go(func() {
			for j := r; j < frResets; j += frResetters {
				q := queues[j%frQueueCount]
				off := int64(1000 * (j + 1))
				delivered := &limitsOf(table).st.delivered
				before := delivered.Load()
				qmu[q.QueueID].Lock()
				epoch, err := mgr.Reset(frGroup, q.Topic, q.QueueID, off)
				if assert.NoError(t, err) {
					issue(q, table.Reset(q, off, epoch), off)
				}
				qmu[q.QueueID].Unlock()
				for i := 0; i < 100000 && delivered.Load() == before; i++ {
					runtime.Gosched() // let pulls complete before the next reset
				}
			}
		})
	}
	resetters.Wait()

	// Let the live queues consume for a while after the last reset.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, q := range queues {
			if live[q].consumed.Load() < 3*frPullBatch {
				return false
			}
		}
		return true
	}, 20*time.Second, time.Millisecond, "live queues stopped consuming")
	orphansRunning := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, p := range pulls {
			if p.replaced.Load() && p.running.Load() {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(settle)
	for orphansRunning() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	var rep fieldReport
	rep.orphansRunning = orphansRunning()
	close(stop)
	wg.Wait()

	for _, p := range pulls {
		n, _ := p.pq.Buffered()
		if !p.pq.Dropped() {
			rep.liveInstances++
		}
		if p.replaced.Load() {
			rep.orphanDeliveries += p.orphanDeliveries.Load()
			rep.orphanBuffered += n
		} else {
			rep.liveBuffered = append(rep.liveBuffered, n)
		}
	}
	for _, q := range queues {
		got, _ := mgr.Committed(frGroup, q.Topic, q.QueueID)
		p := live[q]
		if want := lastReset[q] + p.consumed.Load(); got != want {
			rep.commitMismatch = append(rep.commitMismatch, fmt.Sprintf("%v: committed %d, want last reset %d + consumed %d", q, got, lastReset[q], p.consumed.Load()))
		}
	}
	return rep
}

// TestRepeatedResetsLeaveNoOrphanPullRequests is the field report as a test.
// Checked to fail on the broken design twice: by the leakyTable test below
// (every run), and by hand by deleting the old.drop call in
// QueueTable.install, which made this test report 104 live instances, 100
// orphan pulls still running, 348 orphan deliveries and 6360 messages held
// by orphans.
func TestRepeatedResetsLeaveNoOrphanPullRequests(t *testing.T) {
	table := NewQueueTable(TableOptions{MaxBuffered: frMaxBuffer})
	rep := runResetStorm(t, table, 10*time.Second)

	assert.Equal(t, frQueueCount, table.Len())
	assert.Equal(t, frQueueCount, rep.liveInstances, "exactly one live process queue per assigned queue")
	assert.Zero(t, rep.orphansRunning, "pulls of dropped process queues must stop")
	assert.Zero(t, rep.orphanDeliveries, "no delivery may land in a dropped process queue")
	assert.Zero(t, rep.orphanBuffered, "dropping releases buffered messages")
	for _, n := range rep.liveBuffered {
		assert.LessOrEqual(t, n, frMaxBuffer)
	}
	assert.Empty(t, rep.commitMismatch, "committed = last reset + what the live queue consumed")
	st := table.Stats()
	assert.Equal(t, uint64(frResets), st.Dropped)
	assert.LessOrEqual(t, st.BufferedMessages, uint64(frQueueCount*frMaxBuffer))
}

// TestResetStormScenarioCatchesATableThatRemovesWithoutDropping runs the same
// scenario on the field report's design (remove without drop) and checks that
// the scenario's assertions would fail there: this is how the test above is
// known to be able to fail.
func TestResetStormScenarioCatchesATableThatRemovesWithoutDropping(t *testing.T) {
	limits := NewQueueTable(TableOptions{MaxBuffered: frMaxBuffer})
	rep := runResetStorm(t, &leakyTable{limits: limits, queues: map[Queue]*ProcessQueue{}}, 50*time.Millisecond)

	assert.Equal(t, frQueueCount+frResets, rep.liveInstances, "every replaced process queue stays live")
	assert.Equal(t, frResets, rep.orphansRunning, "every replaced pull keeps pulling")
	assert.Positive(t, rep.orphanBuffered, "orphans hold messages nobody will consume")
	// Epoch fencing still keeps orphans from writing over the reset.
	assert.Empty(t, rep.commitMismatch)
}
