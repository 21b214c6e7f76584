package pop

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/brokercore/brokercore/store"
)

// coreDriver drives the deterministic core of each group directly, step
// by step, with no goroutine, lock or clock: it is the test's own thin
// driver (plan → read → apply, ack → commit) around core.go.
type coreDriver struct {
	m       *popModel
	cores   map[string]*core
	handles map[string]handle
	st      counters
}

func (d *coreDriver) core(g string) *core {
	if d.cores[g] == nil {
		cfg := coreConfig{dlAt: mMaxAttempts, dlRetry: int64(mDLRetry)}
		d.cores[g] = newCore(g, mTopic, cfg, slog.New(slog.DiscardHandler), &d.st)
	}
	return d.cores[g]
}

func (d *coreDriver) view(g string) view {
	return gtView{src: d.m.src, offsets: d.m.offs, group: g, topic: mTopic}
}

// read fills a plan the way the Service's driver does, one message at a
// time.
func (d *coreDriver) read(p *popPlan) {
	for i := range p.queues {
		qp := &p.queues[i]
		qp.got, qp.read = make([]*store.Message, len(qp.again)), make([]bool, len(qp.again))
		for j, off := range qp.again {
			msgs, err := d.m.src.Read(mTopic, qp.qs.queue, off, 1)
			if err == nil && len(msgs) == 1 {
				qp.got[j], qp.read[j] = msgs[0], true
			}
		}
		if qp.n > 0 {
			qp.fresh, qp.err = d.m.src.Read(mTopic, qp.qs.queue, qp.from, qp.n)
		}
	}
}

func (d *coreDriver) pop(g string, q int, req popReq) []pick {
	c := d.core(g)
	queues := []int{q}
	if q == AllQueues {
		queues = d.m.src.Queues(mTopic)
	}
	rot := c.rotation(len(queues))
	now := d.m.clock.Now().UnixNano()
	for {
		p := c.plan(now, req, d.view(g), queues, rot)
		d.read(p)
		if p.deadLetters {
			ok := make([][]dlOutcome, len(p.queues))
			for i := range p.queues {
				ok[i] = make([]dlOutcome, len(p.queues[i].again))
				for j := range ok[i] {
					if !d.m.dlFail {
						ok[i][j] = dlDone
					}
				}
			}
			c.settleDeadLetters(p, ok)
			d.commit(g, p)
			continue
		}
		picks, _, err := c.apply(p)
		require.NoError(d.m.t, err)
		d.commit(g, p)
		return picks
	}
}

func (d *coreDriver) commit(g string, p *popPlan) {
	for _, qs := range needCommits(p, nil) {
		require.NoError(d.m.t, d.m.offs.CommitFenced(g, mTopic, qs.queue, qs.low(), qs.epoch))
		qs.committed, qs.mustSave = qs.low(), false
	}
}

func (d *coreDriver) ack(hs string) error {
	h := d.handles[hs]
	c := d.core(h.group)
	qs, e, err := c.resolve(h, d.m.offs.Epoch(h.group, mTopic, h.queue))
	if err != nil {
		return err
	}
	qs.detach(e)
	if low := qs.low(); low > qs.committed {
		if err := d.m.offs.CommitFenced(h.group, mTopic, h.queue, low, qs.epoch); err != nil {
			qs.hide(e, 0)
			return err
		}
		qs.committed = low
	}
	qs.settle(e)
	return nil
}

func (d *coreDriver) change(hs string, dur time.Duration) (string, error) {
	h := d.handles[hs]
	qs, e, err := d.core(h.group).resolve(h, d.m.offs.Epoch(h.group, mTopic, h.queue))
	if err != nil {
		return "", err
	}
	qs.change(e, d.m.clock.Now().UnixNano(), int64(max1s(dur)))
	h.gen = e.gen
	return d.name(h), nil
}

func (d *coreDriver) name(h handle) string {
	s := fmt.Sprintf("%s/%d/%d/%d/%d", h.group, h.queue, h.inc, h.offset, h.gen)
	d.handles[s] = h
	return s
}

// TestCoreMatchesModelStepByStep drives plan/apply of the core directly
// against the plain model of model_test.go: every pop's deliveries (queue,
// offset, attempts), every ack, stale handle and change, the dead letters
// and the committed offsets after every step.
func TestCoreMatchesModelStepByStep(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &popModel{t: rt, src: newMemSource(), clock: newFakeClock(), offs: NewMemoryOffsets(), q: map[modelKey]*mQueue{}, rr: map[string]int{}}
		d := &coreDriver{m: m, cores: map[string]*core{}, handles: map[string]handle{}}
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(t *rapid.T) {
				m.src.append(mTopic, rapid.IntRange(0, 1).Draw(t, "queue"), rapid.IntRange(1, 3).Draw(t, "n"))
			},
			"pop": func(t *rapid.T) {
				g := rapid.SampledFrom(mGroups).Draw(t, "group")
				q := rapid.IntRange(AllQueues, 1).Draw(t, "queue")
				fifo := g == "f" || rapid.Bool().Draw(t, "fifo")
				attempt := ""
				if fifo {
					attempt = rapid.SampledFrom([]string{"", "A", "B"}).Draw(t, "attempt")
				}
				max := rapid.IntRange(1, 4).Draw(t, "max")
				inv := rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, 30 * time.Second}).Draw(t, "inv")
				exp := m.pop(g, q, fifo, attempt, max, inv)
				got := d.pop(g, q, popReq{fifo: fifo, attempt: attempt, client: "c", max: max, inv: inv})
				require.Len(t, got, len(exp), "pop %s/%d fifo=%v attempt=%q", g, q, fifo, attempt)
				for i, p := range got {
					require.Equal(t, exp[i].queue, p.qs.queue)
					require.Equal(t, exp[i].off, p.off)
					require.Equal(t, exp[i].attempts, int(p.att))
					require.Equal(t, p.off, p.msg.QueueOffset, "the message read for the pick")
					exp[i].x.handle = d.name(handle{inc: p.qs.inc, queue: p.qs.queue, offset: p.off, gen: p.gen, group: g, topic: mTopic})
				}
			},
			"ack": func(t *rapid.T) {
				hs := m.allHandles()
				if len(hs) == 0 {
					t.Skip("no live handle")
				}
				h := rapid.SampledFrom(hs).Draw(t, "handle")
				x := m.findHandle(h)
				require.NoError(t, d.ack(h))
				x.acked, x.handle = true, ""
				m.stale = append(m.stale, h)
			},
			"ackStale": func(t *rapid.T) {
				if len(m.stale) == 0 {
					t.Skip("no stale handle")
				}
				h := rapid.SampledFrom(m.stale).Draw(t, "handle")
				require.ErrorIs(t, d.ack(h), ErrStaleHandle)
			},
			"changeInvisible": func(t *rapid.T) {
				hs := m.allHandles()
				if len(hs) == 0 {
					t.Skip("no live handle")
				}
				h := rapid.SampledFrom(hs).Draw(t, "handle")
				dur := rapid.SampledFrom([]time.Duration{time.Second, 10 * time.Second, time.Minute}).Draw(t, "d")
				x := m.findHandle(h)
				nh, err := d.change(h, dur)
				require.NoError(t, err)
				m.stale = append(m.stale, h)
				x.handle = nh
				x.visibleAt = m.clock.Now().Add(max1s(dur))
			},
			"advance": func(t *rapid.T) {
				m.clock.Advance(rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second, 10 * time.Second, 40 * time.Second}).Draw(t, "by"))
			},
			"toggleDeadLetter": func(t *rapid.T) { m.dlFail = !m.dlFail },
			"reset": func(t *rapid.T) {
				g := rapid.SampledFrom(mGroups).Draw(t, "group")
				q := rapid.IntRange(0, 1).Draw(t, "queue")
				to := rapid.Int64Range(0, m.appended(q)).Draw(t, "to")
				m.offs.Reset(g, mTopic, q, to)
				m.resetModel(m.queue(g, q), to)
			},
			"": func(t *rapid.T) { m.checkCommitted(t) },
		})
	})
}
