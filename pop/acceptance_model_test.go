package pop_test

// Acceptance tests of pop: rapid model-based tests against a plain Go model.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// accModelMsg is the model's view of one message of queue t/0.
type accModelMsg struct {
	acked     bool
	attempts  int           // deliveries so far (0: never delivered since the last restart/reset)
	visibleAt time.Duration // clock offset from which it may be delivered again
	handle    string        // the live handle ("" if none)
	stale     []string      // superseded handles
}

// TestAcceptRandomOpsMatchPlainModel drives the real store, offset.Manager and
// Service with random appends, non-FIFO pops, acks with live and stale
// handles, invisible-time changes, clock moves, restarts and offset resets,
// against a model of the contract: a delivered message was visible, Attempts
// is exact, an acked message never comes again, stale handles answer
// ErrStaleHandle and change nothing, the committed offset is the lowest
// unacked offset right after every ack, and nothing is ever lost.
func TestAcceptRandomOpsMatchPlainModel(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	defer st.Close()
	offs, err := offset.Open(offset.Options{})
	require.NoError(t, err)
	defer offs.Close()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		topic := fmt.Sprintf("m%d", runs) // a fresh topic per run on one shared store
		clk := newAccClock()
		start := clk.Now()
		opts := pop.Options{Now: clk.Now, Offsets: offs, Tick: time.Hour}
		svc := pop.New(st, opts)
		defer func() { _ = svc.Close() }()

		var msgs []*accModelMsg
		var oldHandles []string // from before a restart: Bad or Stale
		now := func() time.Duration { return clk.Now().Sub(start) }
		lowestUnacked := func() int64 {
			for i, m := range msgs {
				if !m.acked {
					return int64(i)
				}
			}
			return int64(len(msgs))
		}
		committed := func() int64 {
			c, ok := offs.Committed("g", topic, 0)
			if !ok {
				return 0
			}
			return c
		}
		live := func() []int {
			var out []int
			for i, m := range msgs {
				if m.handle != "" && !m.acked {
					out = append(out, i)
				}
			}
			return out
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 4).Draw(rt, "n")
				for i := 0; i < n; i++ {
					require.NoError(rt, st.Append(&store.Message{Topic: topic, Body: []byte(fmt.Sprint(len(msgs)))}))
					msgs = append(msgs, &accModelMsg{})
				}
			},
			"pop": func(rt *rapid.T) {
				r := accReq()
				r.Topic = topic
				r.Max = rapid.IntRange(1, 5).Draw(rt, "max")
				res, err := svc.Pop(context.Background(), r)
				require.NoError(rt, err)
				visible := 0
				for _, m := range msgs {
					if !m.acked && (m.attempts == 0 || m.visibleAt <= now()) {
						visible++
					}
				}
				require.LessOrEqual(rt, len(res.Messages), r.Max)
				if visible > 0 {
					require.NotEmpty(rt, res.Messages, "%d visible messages but the pop was empty", visible)
				}
				for _, d := range res.Messages {
					off := d.Message.QueueOffset
					require.Less(rt, off, int64(len(msgs)))
					m := msgs[off]
					require.False(rt, m.acked, "acked message %d delivered again", off)
					require.True(rt, m.attempts == 0 || m.visibleAt <= now(), "message %d delivered while invisible", off)
					require.Equal(rt, m.attempts+1, d.Attempts, "attempts of message %d", off)
					require.Equal(rt, fmt.Sprint(off), string(d.Message.Body))
					if m.handle != "" {
						m.stale = append(m.stale, m.handle)
					}
					m.attempts, m.handle, m.visibleAt = d.Attempts, d.Handle, now()+30*time.Second
				}
			},
			"ack": func(rt *rapid.T) {
				l := live()
				if len(l) == 0 {
					rt.Skip("nothing in flight")
				}
				off := rapid.SampledFrom(l).Draw(rt, "off")
				m := msgs[off]
				require.NoError(rt, svc.Ack(m.handle))
				m.acked, m.stale, m.handle = true, append(m.stale, m.handle), ""
				require.Equal(rt, lowestUnacked(), committed(), "committed offset right after the ack")
			},
			"stale": func(rt *rapid.T) {
				var cands []string
				for _, m := range msgs {
					cands = append(cands, m.stale...)
				}
				if len(cands) == 0 {
					rt.Skip("no stale handle")
				}
				h := rapid.SampledFrom(cands).Draw(rt, "h")
				before := committed()
				if rapid.Bool().Draw(rt, "ack") {
					require.ErrorIs(rt, svc.Ack(h), pop.ErrStaleHandle)
				} else {
					_, err := svc.ChangeInvisible(h, time.Hour)
					require.ErrorIs(rt, err, pop.ErrStaleHandle)
				}
				require.Equal(rt, before, committed())
			},
			"old": func(rt *rapid.T) {
				if len(oldHandles) == 0 {
					rt.Skip("no pre-restart handle")
				}
				h := rapid.SampledFrom(oldHandles).Draw(rt, "h")
				before := committed()
				err := svc.Ack(h)
				require.True(rt, errors.Is(err, pop.ErrStaleHandle) || errors.Is(err, pop.ErrBadHandle), "pre-restart handle: %v", err)
				require.Equal(rt, before, committed())
			},
			"change": func(rt *rapid.T) {
				l := live()
				if len(l) == 0 {
					rt.Skip("nothing in flight")
				}
				off := rapid.SampledFrom(l).Draw(rt, "off")
				d := rapid.SampledFrom([]time.Duration{10 * time.Second, 60 * time.Second}).Draw(rt, "d")
				m := msgs[off]
				nh, err := svc.ChangeInvisible(m.handle, d)
				require.NoError(rt, err)
				m.stale, m.handle, m.visibleAt = append(m.stale, m.handle), nh, now()+d
			},
			"advance": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(1, 6).Draw(rt, "k")) * 7 * time.Second)
			},
			"restart": func(rt *rapid.T) {
				require.NoError(rt, svc.Close())
				svc = pop.New(st, opts)
				c := committed()
				for i, m := range msgs {
					if m.handle != "" {
						oldHandles = append(oldHandles, m.handle)
					}
					oldHandles = append(oldHandles, m.stale...)
					require.True(rt, m.acked || int64(i) >= c, "unacked message %d behind the committed offset %d", i, c)
					if int64(i) >= c {
						*m = accModelMsg{} // delivered again, attempt counting starts over
					} else {
						*m = accModelMsg{acked: true}
					}
				}
			},
			"reset": func(rt *rapid.T) {
				to := rapid.IntRange(0, len(msgs)).Draw(rt, "to")
				_, err := offs.Reset("g", topic, 0, int64(to))
				require.NoError(rt, err)
				for i, m := range msgs {
					stale := m.stale
					if m.handle != "" {
						stale = append(stale, m.handle)
					}
					*m = accModelMsg{acked: i < to, stale: stale}
				}
			},
			"": func(rt *rapid.T) {
				require.LessOrEqual(rt, committed(), lowestUnacked(), "the committed offset passed an unacked message")
			},
		})

		// Nothing lost: after the invisible times end, popping drains every
		// unacked message.
		clk.Advance(time.Hour)
		drain := accReq()
		drain.Topic = topic
		for i := 0; i < len(msgs)+2; i++ {
			res, err := svc.Pop(context.Background(), drain)
			require.NoError(rt, err)
			for _, d := range res.Messages {
				require.False(rt, msgs[d.Message.QueueOffset].acked)
				require.NoError(rt, svc.Ack(d.Handle))
				msgs[d.Message.QueueOffset].acked = true
			}
		}
		for i, m := range msgs {
			require.True(rt, m.acked, "message %d lost", i)
		}
		require.Equal(rt, int64(len(msgs)), committed())
	})
}

// TestAcceptRandomFIFOOpsMatchPlainModel is the FIFO counterpart: random FIFO
// pops with a few attemptIds, acks with live and stale handles, clock moves,
// restarts and resets. Model: at most one in-flight batch, always the lowest
// unacked messages in order; other attemptIds get nothing until it is fully
// acked or its invisible time ends (then the next pop gets the same batch
// with Attempts+1); the batch's own attemptId gets the same batch with fresh
// handles and no attempt counted (and, as SQS does, a fresh invisible time —
// the contract leaves that open, the model follows what the service does).
func TestAcceptRandomFIFOOpsMatchPlainModel(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	defer st.Close()
	offs, err := offset.Open(offset.Options{})
	require.NoError(t, err)
	defer offs.Close()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		topic := fmt.Sprintf("m%d", runs) // a fresh topic per run on one shared store
		clk := newAccClock()
		opts := pop.Options{Now: clk.Now, Offsets: offs, Tick: time.Hour}
		svc := pop.New(st, opts)
		defer func() { _ = svc.Close() }()

		type fmsg struct {
			acked    bool
			attempts int
			handle   string
			stale    []string
		}
		maxBatch := rapid.IntRange(1, 4).Draw(rt, "max")
		var msgs []*fmsg
		var batch []int64 // unacked members of the in-flight batch, in order
		var owner string
		var blockEnd time.Time
		committed := func() int64 {
			c, ok := offs.Committed("g", topic, 0)
			if !ok {
				return 0
			}
			return c
		}
		lowestUnacked := func() int64 {
			for i, m := range msgs {
				if !m.acked {
					return int64(i)
				}
			}
			return int64(len(msgs))
		}
		dropBatch := func() {
			for _, m := range msgs {
				if m.handle != "" {
					m.stale = append(m.stale, m.handle)
					m.handle = ""
				}
			}
			batch, owner = nil, ""
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 4).Draw(rt, "n")
				for i := 0; i < n; i++ {
					require.NoError(rt, st.Append(&store.Message{Topic: topic, Body: []byte(fmt.Sprint(len(msgs)))}))
					msgs = append(msgs, &fmsg{})
				}
			},
			"pop": func(rt *rapid.T) {
				r := fifoReq(rapid.SampledFrom([]string{"A", "B", "C"}).Draw(rt, "attempt"))
				r.Topic = topic
				r.Max = maxBatch // a re-pop asking for fewer than the batch holds is left open by the contract
				res, err := svc.Pop(context.Background(), r)
				require.NoError(rt, err)
				now := clk.Now()
				var want []int64
				var wantAtt []int
				switch {
				case len(batch) > 0 && r.AttemptID == owner:
					want = batch
					for _, o := range batch {
						wantAtt = append(wantAtt, msgs[o].attempts)
					}
				case len(batch) > 0 && now.Before(blockEnd):
					// blocked
				case len(batch) > 0:
					want = batch
					for _, o := range batch {
						msgs[o].attempts++
						wantAtt = append(wantAtt, msgs[o].attempts)
					}
				default:
					for i, m := range msgs {
						if len(want) == r.Max {
							break
						}
						if !m.acked {
							want = append(want, int64(i))
							m.attempts = 1
							wantAtt = append(wantAtt, 1)
						}
					}
				}
				if want == nil {
					want = []int64{}
					wantAtt = []int{}
				}
				require.Equal(rt, want, offsetsOf(res), "attempt %s, owner %s, batch %v", r.AttemptID, owner, batch)
				require.Equal(rt, wantAtt, attemptsOf(res))
				if len(want) > 0 {
					batch, owner, blockEnd = append([]int64(nil), want...), r.AttemptID, now.Add(30*time.Second)
					for _, d := range res.Messages {
						m := msgs[d.Message.QueueOffset]
						if m.handle != "" {
							m.stale = append(m.stale, m.handle)
						}
						m.handle = d.Handle
					}
				}
			},
			"ack": func(rt *rapid.T) {
				if len(batch) == 0 {
					rt.Skip("no batch")
				}
				off := rapid.SampledFrom(batch).Draw(rt, "off")
				m := msgs[off]
				require.NoError(rt, svc.Ack(m.handle))
				m.acked, m.stale, m.handle = true, append(m.stale, m.handle), ""
				var rest []int64
				for _, o := range batch {
					if o != off {
						rest = append(rest, o)
					}
				}
				batch = rest
				if len(batch) == 0 {
					owner = ""
				}
				require.Equal(rt, lowestUnacked(), committed())
			},
			"stale": func(rt *rapid.T) {
				var cands []string
				for _, m := range msgs {
					cands = append(cands, m.stale...)
				}
				if len(cands) == 0 {
					rt.Skip("no stale handle")
				}
				h := rapid.SampledFrom(cands).Draw(rt, "h")
				before := committed()
				err := svc.Ack(h)
				require.True(rt, errors.Is(err, pop.ErrStaleHandle) || errors.Is(err, pop.ErrBadHandle), "superseded handle: %v", err)
				require.Equal(rt, before, committed())
			},
			"advance": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(1, 6).Draw(rt, "k")) * 7 * time.Second)
			},
			"restart": func(rt *rapid.T) {
				require.NoError(rt, svc.Close())
				svc = pop.New(st, opts)
				dropBatch()
				c := committed()
				for i, m := range msgs {
					require.True(rt, m.acked || int64(i) >= c)
					m.acked, m.attempts = int64(i) < c, 0
				}
			},
			"reset": func(rt *rapid.T) {
				to := rapid.IntRange(0, len(msgs)).Draw(rt, "to")
				_, err := offs.Reset("g", topic, 0, int64(to))
				require.NoError(rt, err)
				dropBatch()
				for i, m := range msgs {
					m.acked, m.attempts = i < to, 0
				}
			},
			"": func(rt *rapid.T) {
				require.LessOrEqual(rt, committed(), lowestUnacked())
			},
		})
	})
}
