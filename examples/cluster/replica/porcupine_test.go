package replica

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// The model is one queue's log: a produce appends a value at the next
// offset, a read returns the whole log.
type logInput struct {
	produce bool
	value   string
}

type logOutput struct {
	offset int64    // produce: the assigned queue offset
	values []string // read
	maybe  bool     // produce whose outcome is unknown (not committed as far as the client knows)
}

var logModel = porcupine.Model{
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		s, i, o := state.(string), in.(logInput), out.(logOutput)
		n := 0
		if s != "" {
			n = strings.Count(s, ",") + 1
		}
		if i.produce {
			next := i.value
			if s != "" {
				next = s + "," + i.value
			}
			if o.maybe {
				return true, next
			}
			return o.offset == int64(n), next
		}
		return strings.Join(o.values, ",") == s, s
	},
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(state.(string)))
		return h.Sum64()
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(logInput), out.(logOutput)
		if i.produce {
			return fmt.Sprintf("produce(%s) -> %d maybe=%v", i.value, o.offset, o.maybe)
		}
		return fmt.Sprintf("read -> %v", o.values)
	},
}

// A randomized history of produces and linearizable reads by three clients,
// while nodes are killed and restarted and leaders cut off and healed, is
// linearizable: acknowledged produces are never lost nor reordered, and a
// read never misses one acknowledged before it began.
func TestRandomHistoryAcrossKillsAndPartitionsIsLinearizable(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.ApplyTimeout = 300 * time.Millisecond })
	c.leader()
	dur := 3 * time.Second
	if long() {
		dur = 30 * time.Second
	}
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(op porcupine.Operation) {
		mu.Lock()
		history = append(history, op)
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var seq sync.Mutex
	next := 0
	for client := 0; client < 3; client++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(client), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				nodes := c.live()
				if len(nodes) == 0 {
					continue
				}
				n := nodes[rng.IntN(len(nodes))]
				call := time.Since(start).Nanoseconds()
				if rng.IntN(3) > 0 {
					seq.Lock()
					next++
					v := fmt.Sprint(next)
					seq.Unlock()
					out, err := n.Produce(msg("p", 0, v))
					ret := time.Since(start).Nanoseconds()
					switch {
					case err == nil:
						record(porcupine.Operation{ClientId: client, Input: logInput{true, v}, Call: call, Output: logOutput{offset: out[0].QueueOffset}, Return: ret})
					case errors.Is(err, ErrNotLeader) || errors.Is(err, ErrClosed):
						// refused before proposing: no effect, not part of the history
					default:
						// may or may not have committed: it may take effect any time after its call
						record(porcupine.Operation{ClientId: client, Input: logInput{true, v}, Call: call, Output: logOutput{maybe: true}, Return: math.MaxInt64})
					}
				} else {
					msgs, err := readAll(n)
					ret := time.Since(start).Nanoseconds()
					if err == nil {
						vals := make([]string, 0, len(msgs))
						for _, m := range msgs {
							vals = append(vals, string(m.Body))
						}
						record(porcupine.Operation{ClientId: client, Input: logInput{}, Call: call, Output: logOutput{values: vals}, Return: ret})
					}
				}
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		}()
	}
	// The faults: one at a time, always leaving a majority to make progress
	// once it heals.
	rng := rand.New(rand.NewPCG(42, 42))
	for time.Since(start) < dur {
		time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
		var l *Node
		for _, n := range c.live() {
			if n.IsLeader() {
				l = n
			}
		}
		if l == nil {
			continue
		}
		if rng.IntN(2) == 0 {
			c.kill(l.ID())
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			c.restart(l.ID())
		} else {
			c.isolate(l.ID())
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			c.heal(l.ID())
		}
	}
	close(stop)
	wg.Wait()
	c.leader()
	// A final read, after every client stopped.
	final, err := readAll(c.leader())
	require.NoError(t, err)
	vals := []string{}
	for _, m := range final {
		vals = append(vals, string(m.Body))
	}
	history = append(history, porcupine.Operation{ClientId: 3, Input: logInput{}, Call: time.Since(start).Nanoseconds(), Output: logOutput{values: vals}, Return: time.Since(start).Nanoseconds() + 1})

	// A produce of unknown outcome either never took effect (its value is
	// not in the final read: drop it) or took effect at the offset the
	// final read shows. Both are facts of the history, and fixing them
	// keeps the checker's search small.
	at := map[string]int64{}
	for i, v := range vals {
		at[v] = int64(i)
	}
	kept := history[:0]
	for _, op := range history {
		if in := op.Input.(logInput); in.produce && op.Output.(logOutput).maybe {
			off, ok := at[in.value]
			if !ok {
				continue
			}
			op.Output = logOutput{offset: off}
		}
		kept = append(kept, op)
	}
	history = kept

	acked, maybe, reads := 0, 0, 0
	for _, op := range history {
		switch {
		case !op.Input.(logInput).produce:
			reads++
		case op.Return == math.MaxInt64:
			maybe++
		default:
			acked++
		}
	}
	t.Logf("history: %d acknowledged produces, %d of unknown outcome that took effect, %d reads, %d values in the end", acked, maybe, reads, len(vals))
	require.Positive(t, acked)
	require.Positive(t, reads)
	res := porcupine.CheckOperationsTimeout(logModel, history, 60*time.Second)
	require.Equal(t, porcupine.Ok, res, "history not linearizable (or the check timed out)")
	c.requireIdentical()
}

// readAll reads the whole queue page by page; the pages together are the
// log as of the last page's barrier, a prefix-closed state within the call.
func readAll(n *Node) ([]*store.Message, error) {
	var out []*store.Message
	for {
		msgs, err := n.ReadLinearizable("p", 0, int64(len(out)), 1024)
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			return out, nil
		}
		out = append(out, msgs...)
	}
}

// The model itself rejects what it must: a lost acknowledged produce and
// a reordering.
func TestLogModelRejectsLossAndReordering(t *testing.T) {
	p := func(v string, off int64, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: logInput{true, v}, Output: logOutput{offset: off}, Call: call, Return: ret}
	}
	r := func(vals []string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: logInput{}, Output: logOutput{values: vals}, Call: call, Return: ret}
	}
	require.True(t, porcupine.CheckOperations(logModel, []porcupine.Operation{p("a", 0, 0, 1), p("b", 1, 2, 3), r([]string{"a", "b"}, 4, 5)}))
	require.False(t, porcupine.CheckOperations(logModel, []porcupine.Operation{p("a", 0, 0, 1), p("b", 1, 2, 3), r([]string{"a"}, 4, 5)}), "lost")
	require.False(t, porcupine.CheckOperations(logModel, []porcupine.Operation{p("a", 0, 0, 1), p("b", 1, 2, 3), r([]string{"b", "a"}, 4, 5)}), "reordered")
	require.True(t, porcupine.CheckOperations(logModel, []porcupine.Operation{p("a", 0, 0, 1),
		{Input: logInput{true, "x"}, Output: logOutput{maybe: true}, Call: 1, Return: math.MaxInt64}, r([]string{"a"}, 4, 5)}), "an unknown produce may never take effect")
}
