package pop

import (
	"errors"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/brokercore/brokercore/store"
)

// The model: per (group, queue), one plain record per offset. It states
// the contract directly — no generations, no trimming, no earliest-time
// shortcut — so the real Service must match it step by step.

const (
	mMaxAttempts = 3
	mDLRetry     = 5 * time.Second
)

type mMsg struct {
	popped    bool
	acked     bool // acked or dead-lettered
	visibleAt time.Time
	attempts  int
	batch     int
	handle    string // the live handle; "" if none
}

type mQueue struct {
	start   int64 // offsets below were skipped by a reset
	msgs    map[int64]*mMsg
	batch   int
	attempt string
}

type modelKey struct {
	group string
	queue int
}

type popModel struct {
	t       *rapid.T
	src     *memSource
	clock   *fakeClock
	offs    *MemoryOffsets
	svc     *Service
	opts    Options
	q       map[modelKey]*mQueue
	stale   []string // handles that were superseded
	dlMu    sync.Mutex
	dlFail  bool
	dlGot   map[string]int
	batchID int
	rr      map[string]int // AllQueues rotation per group (lost on restart)
}

// pop is the model of one Pop: dead letters of every queue it covers
// first, then queue by queue (rotating for AllQueues) until max.
func (m *popModel) pop(g string, q int, fifo bool, attempt string, max int, inv time.Duration) []want {
	now := m.clock.Now()
	queues := []int{q}
	if q == AllQueues {
		queues = nil
		for x := range 2 {
			if m.appended(x) > 0 {
				queues = append(queues, x)
			}
		}
		if len(queues) > 1 {
			r := m.rr[g] % len(queues)
			m.rr[g]++
			queues = append(queues[r:], queues[:r]...)
		}
	}
	for _, x := range queues {
		m.deadLetterStep(g, m.queue(g, x), x, now)
	}
	owned := map[int]bool{}
	for _, x := range queues {
		mq := m.queue(g, x)
		if !fifo || attempt == "" || mq.batch == 0 || mq.attempt != attempt {
			continue
		}
		for off, y := range mq.msgs {
			if off >= mq.start && y.popped && !y.acked && y.batch == mq.batch {
				owned[x] = true
			}
		}
	}
	var out []want
	for _, x := range queues {
		if len(out) >= max {
			break
		}
		if len(owned) > 0 && !owned[x] {
			continue
		}
		mq := m.queue(g, x)
		var got []want
		if fifo {
			got = m.popFIFO(mq, x, now, inv, max-len(out), attempt)
		} else {
			got = m.popPlain(mq, x, now, inv, max-len(out))
		}
		for i := range got {
			got[i].queue = x
		}
		out = append(out, got...)
	}
	return out
}

const mTopic = "T"

var mGroups = []string{"f", "m"} // f: FIFO pops only; m: FIFO and not, mixed

func (m *popModel) queue(g string, q int) *mQueue {
	k := modelKey{g, q}
	if m.q[k] == nil {
		m.q[k] = &mQueue{msgs: map[int64]*mMsg{}}
	}
	return m.q[k]
}

func (m *popModel) appended(q int) int64 { return m.src.MaxOffset(mTopic, q) }

func (m *popModel) msg(mq *mQueue, off int64) *mMsg {
	if mq.msgs[off] == nil {
		mq.msgs[off] = &mMsg{}
	}
	return mq.msgs[off]
}

// low is the lowest offset not acked: what must be committed.
func (m *popModel) low(mq *mQueue, q int) int64 {
	off := mq.start
	for off < m.appended(q) && m.msg(mq, off).acked {
		off++
	}
	return off
}

func (m *popModel) supersede(x *mMsg) {
	if x.handle != "" {
		m.stale = append(m.stale, x.handle)
		x.handle = ""
	}
}

func (m *popModel) deadLetterStep(g string, mq *mQueue, q int, now time.Time) {
	for off := mq.start; off < m.appended(q); off++ {
		x := m.msg(mq, off)
		if !x.popped || x.acked || x.visibleAt.After(now) || x.attempts < mMaxAttempts {
			continue
		}
		m.supersede(x)
		x.batch = 0
		if m.dlFail {
			x.visibleAt = now.Add(mDLRetry)
			continue
		}
		x.acked = true
	}
}

type want struct {
	queue    int
	off      int64
	attempts int
	x        *mMsg
}

func (m *popModel) deliver(x *mMsg, off int64, now time.Time, inv time.Duration, count bool, out []want) []want {
	m.supersede(x)
	x.popped = true
	x.visibleAt = now.Add(inv)
	if count {
		x.attempts++
	}
	return append(out, want{-1, off, x.attempts, x})
}

func (m *popModel) popPlain(mq *mQueue, q int, now time.Time, inv time.Duration, max int) []want {
	var out []want
	for off := mq.start; off < m.appended(q) && len(out) < max; off++ {
		if x := m.msg(mq, off); x.popped && !x.acked && !x.visibleAt.After(now) {
			x.batch = 0
			out = m.deliver(x, off, now, inv, true, out)
		}
	}
	for off := mq.start; off < m.appended(q) && len(out) < max; off++ {
		if x := m.msg(mq, off); !x.popped {
			out = m.deliver(x, off, now, inv, true, out)
		}
	}
	return out
}

func (m *popModel) popFIFO(mq *mQueue, q int, now time.Time, inv time.Duration, max int, attempt string) []want {
	var members []int64
	for off := mq.start; off < m.appended(q); off++ {
		if x := m.msg(mq, off); mq.batch != 0 && x.popped && !x.acked && x.batch == mq.batch {
			members = append(members, off)
		}
	}
	var out []want
	if len(members) > 0 {
		if attempt != "" && attempt == mq.attempt {
			for i, off := range members {
				if i < max {
					out = m.deliver(m.msg(mq, off), off, now, inv, false, out)
				}
			}
			return out
		}
		for _, off := range members {
			if m.msg(mq, off).visibleAt.After(now) {
				return nil // blocked by another attempt's live batch
			}
		}
		mq.attempt = attempt
		for i, off := range members {
			if i >= max {
				m.msg(mq, off).batch = 0
				continue
			}
			out = m.deliver(m.msg(mq, off), off, now, inv, true, out)
		}
		return out
	}
	mq.batch = 0
	for off := mq.start; off < m.appended(q); off++ {
		if x := m.msg(mq, off); x.popped && !x.acked && x.visibleAt.After(now) {
			return nil // FIFO order: something earlier is in flight
		}
	}
	m.batchID++
	for off := mq.start; off < m.appended(q) && len(out) < max; off++ {
		if x := m.msg(mq, off); !x.acked {
			x.batch = m.batchID
			out = m.deliver(x, off, now, inv, true, out)
		}
	}
	if len(out) > 0 {
		mq.batch, mq.attempt = m.batchID, attempt
	}
	return out
}

func (m *popModel) newService() {
	m.svc = New(m.src, m.opts)
	svc := m.svc
	m.src.onAppend = svc.Arrived // as a host wires a Source that cannot Subscribe
}

func (m *popModel) checkCommitted(t *rapid.T) {
	for k, mq := range m.q {
		c, ok := m.offs.Committed(mTopicGroup(k.group), mTopic, k.queue)
		if !ok {
			c = 0
		}
		require.Equal(t, m.low(mq, k.queue), c, "committed offset of %v", k)
	}
}

func mTopicGroup(g string) string { return g }

func (m *popModel) allHandles() []string {
	var hs []string
	for _, mq := range m.q {
		for _, x := range mq.msgs {
			if x.handle != "" {
				hs = append(hs, x.handle)
			}
		}
	}
	return hs
}

// findHandle returns the model record a live handle belongs to.
func (m *popModel) findHandle(h string) *mMsg {
	for _, mq := range m.q {
		for _, x := range mq.msgs {
			if x.handle == h {
				return x
			}
		}
	}
	return nil
}

func TestServiceMatchesModel(t *testing.T) {
	// Longer sequences than rapid's default, unless -rapid.steps was given:
	// FIFO blocks, expiries and dead letters need several steps to build up.
	if f := flag.Lookup("rapid.steps"); f != nil && f.Value.String() == f.DefValue {
		require.NoError(t, flag.Set("rapid.steps", "120"))
		defer flag.Set("rapid.steps", f.DefValue) //nolint:errcheck
	}
	rapid.Check(t, func(rt *rapid.T) {
		m := &popModel{t: rt, src: newMemSource(), clock: newFakeClock(), offs: NewMemoryOffsets(), q: map[modelKey]*mQueue{}, dlGot: map[string]int{}, rr: map[string]int{}}
		m.opts = Options{
			Now: m.clock.Now, Offsets: m.offs, MaxAttempts: mMaxAttempts, DeadLetterRetry: mDLRetry,
			HandleKey: []byte("model"), Tick: time.Hour,
			DeadLetter: func(group string, msg *store.Message) error {
				m.dlMu.Lock()
				defer m.dlMu.Unlock()
				if m.dlFail {
					return errors.New("dlq down")
				}
				m.dlGot[fmt.Sprintf("%s/%d/%d", group, msg.QueueID, msg.QueueOffset)]++
				return nil
			},
		}
		m.newService()
		defer func() { m.svc.Close() }()
		for _, g := range mGroups {
			for q := range 2 {
				m.queue(g, q)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(t *rapid.T) {
				q := rapid.IntRange(0, 1).Draw(t, "queue")
				m.src.append(mTopic, q, rapid.IntRange(1, 3).Draw(t, "n"))
			},
			"pop": func(t *rapid.T) {
				g := rapid.SampledFrom(mGroups).Draw(t, "group")
				q := rapid.IntRange(AllQueues, 1).Draw(t, "queue")
				fifo := g == "f" || rapid.Bool().Draw(t, "fifo")
				attempt := ""
				if fifo {
					attempt = rapid.SampledFrom([]string{"", "A", "B", "C"}).Draw(t, "attempt")
				}
				max := rapid.IntRange(1, 4).Draw(t, "max")
				inv := rapid.SampledFrom([]time.Duration{0, time.Second, 5 * time.Second, 30 * time.Second}).Draw(t, "inv")
				exp := m.pop(g, q, fifo, attempt, max, popInvisible(inv))
				r, err := m.svc.Pop(bg, Request{Group: g, Topic: mTopic, ClientID: "c", QueueID: q, Max: max, Invisible: inv, FIFO: fifo, AttemptID: attempt})
				require.NoError(t, err)
				require.Len(t, r.Messages, len(exp), "pop %s/%d fifo=%v attempt=%q: got %v", g, q, fifo, attempt, offsetsOf(r))
				for i, d := range r.Messages {
					require.Equal(t, exp[i].queue, d.Message.QueueID)
					require.Equal(t, exp[i].off, d.Message.QueueOffset)
					require.Equal(t, exp[i].attempts, d.Attempts, "attempts of %d", exp[i].off)
					exp[i].x.handle = d.Handle
				}
				if g == "f" { // FIFO order: each queue's batch is the head of the queue
					first := map[int]int64{}
					last := map[int]int64{}
					for _, w := range exp {
						if _, ok := first[w.queue]; !ok {
							first[w.queue] = w.off
							require.Equal(t, m.low(m.queue(g, w.queue), w.queue), w.off)
						} else {
							require.Less(t, last[w.queue], w.off)
						}
						last[w.queue] = w.off
					}
				}
			},
			"ack": func(t *rapid.T) {
				hs := m.allHandles()
				if len(hs) == 0 {
					t.Skip("no live handle")
				}
				h := rapid.SampledFrom(hs).Draw(t, "handle")
				x := m.findHandle(h)
				require.NoError(t, m.svc.Ack(h))
				x.acked, x.handle = true, ""
				m.stale = append(m.stale, h)
			},
			"ackStale": func(t *rapid.T) {
				if len(m.stale) == 0 {
					t.Skip("no stale handle")
				}
				h := rapid.SampledFrom(m.stale).Draw(t, "handle")
				require.ErrorIs(t, m.svc.Ack(h), ErrStaleHandle)
				_, err := m.svc.ChangeInvisible(h, time.Minute)
				require.ErrorIs(t, err, ErrStaleHandle)
			},
			"changeInvisible": func(t *rapid.T) {
				hs := m.allHandles()
				if len(hs) == 0 {
					t.Skip("no live handle")
				}
				h := rapid.SampledFrom(hs).Draw(t, "handle")
				d := rapid.SampledFrom([]time.Duration{0, time.Second, 10 * time.Second, time.Minute}).Draw(t, "d")
				x := m.findHandle(h)
				nh, err := m.svc.ChangeInvisible(h, d)
				require.NoError(t, err)
				m.stale = append(m.stale, h)
				x.handle = nh
				x.visibleAt = m.clock.Now().Add(max1s(d))
			},
			"advance": func(t *rapid.T) {
				m.clock.Advance(rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second, 10 * time.Second, 40 * time.Second}).Draw(t, "by"))
			},
			"toggleDeadLetter": func(t *rapid.T) {
				m.dlMu.Lock()
				m.dlFail = !m.dlFail
				m.dlMu.Unlock()
			},
			"restart": func(t *rapid.T) {
				require.NoError(t, m.svc.Close())
				m.newService()
				m.rr = map[string]int{}
				for k, mq := range m.q {
					low := m.low(mq, k.queue)
					m.resetModel(mq, low)
				}
			},
			"reset": func(t *rapid.T) {
				g := rapid.SampledFrom(mGroups).Draw(t, "group")
				q := rapid.IntRange(0, 1).Draw(t, "queue")
				to := rapid.Int64Range(0, m.appended(q)).Draw(t, "to")
				m.offs.Reset(g, mTopic, q, to)
				m.resetModel(m.queue(g, q), to)
			},
			"": func(t *rapid.T) { // checked after every step
				m.checkCommitted(t)
			},
		})
	})
}

// resetModel makes offsets >= from undelivered and forgets the batch.
func (m *popModel) resetModel(mq *mQueue, from int64) {
	for off, x := range mq.msgs {
		m.supersede(x)
		if off >= from {
			delete(mq.msgs, off)
		}
	}
	mq.start, mq.batch, mq.attempt = from, 0, ""
}

// popInvisible is a pop's invisible time: zero means DefaultInvisible.
func popInvisible(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultInvisible
	}
	return max1s(d)
}

func max1s(d time.Duration) time.Duration {
	if d < time.Second {
		return time.Second
	}
	return d
}
