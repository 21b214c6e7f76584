package txn

import (
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// modelTxn is the model's view of one transaction.
type modelTxn struct {
	open    bool
	outcome Resolution
	checks  int
	due     time.Time
}

// TestCoreMatchesModel drives the deterministic core with random prepares,
// clock moves, check rounds (whose appends succeed or fail) and
// resolutions, against a plain model: checks are due exactly when the
// model says, in due order, at most CheckMax per transaction, then a
// discard; resolutions answer as the model says.
func TestCoreMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o, _ := Options{TransactionTimeout: 6 * time.Second, CheckInterval: time.Minute, CheckMax: 3, Remember: 1 << 20}.withDefaults()
		c := newCore(o, 0, 0)
		now := epoch
		model := map[int64]*modelTxn{}
		var next int64
		t.Repeat(map[string]func(*rapid.T){
			"prepare": func(t *rapid.T) {
				imm := time.Duration(rapid.IntRange(0, 20).Draw(t, "immunity")) * time.Second
				c.half.mark(next, false)
				c.addHalf(halfInfo{id: next, group: "g", storedAt: now, immunity: imm, opFloor: c.op.next})
				wait := o.TransactionTimeout
				if imm > 0 {
					wait = imm
				}
				model[next] = &modelTxn{open: true, due: now.Add(wait)}
				next++
			},
			"advance": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(t, "secs")) * time.Second)
			},
			"round": func(t *rapid.T) {
				max := rapid.IntRange(1, 4).Draw(t, "max")
				var want []int64
				for id, m := range model {
					if m.open && !m.due.After(now) {
						want = append(want, id)
					}
				}
				slices.SortFunc(want, func(a, b int64) int {
					if c := model[a].due.Compare(model[b].due); c != 0 {
						return c
					}
					return int(a - b)
				})
				want = want[:min(max, len(want))]
				got := c.dueChecks(now, max)
				if len(got) != len(want) {
					t.Fatalf("due %v, model %v", got, want)
				}
				for i, d := range got {
					m := model[d.id]
					if d.id != want[i] || d.checks != m.checks || d.discard != (m.checks >= o.CheckMax) {
						t.Fatalf("check %d: %+v, model %v %+v", i, d, want[i], *m)
					}
					if rapid.Bool().Draw(t, "append fails") {
						c.abort(d.id, false)
						continue
					}
					if d.discard {
						c.applyOp(d.id, opDiscard, now)
						m.open, m.outcome = false, Rollback
					} else {
						c.applyOp(d.id, opCheck, now)
						m.checks++
						m.due = now.Add(o.CheckInterval)
					}
				}
			},
			"end": func(t *rapid.T) {
				if next == 0 {
					t.Skip()
				}
				id := rapid.Int64Range(0, next).Draw(t, "id") // next: an unknown id
				r := rapid.SampledFrom([]Resolution{Commit, Rollback}).Draw(t, "r")
				act, err := c.begin(id, r)
				m, known := model[id]
				switch {
				case !known:
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("unknown %d: %v", id, err)
					}
				case m.open:
					if err != nil || act != actAppend {
						t.Fatalf("open %d: %v %v", id, act, err)
					}
					if rapid.Bool().Draw(t, "append fails") {
						c.abort(id, false)
						return
					}
					k := opCommit
					if r == Rollback {
						k = opRollback
					}
					c.applyOp(id, k, now)
					m.open, m.outcome = false, r
				case m.outcome == r:
					if err != nil || act != actDone {
						t.Fatalf("repeat %d: %v %v", id, act, err)
					}
				default:
					if !errors.Is(err, ErrAlreadyResolved) {
						t.Fatalf("opposite %d: %v", id, err)
					}
				}
			},
			"": func(t *rapid.T) {
				open := 0
				for _, m := range model {
					if m.open {
						open++
						if m.checks > o.CheckMax {
							t.Fatalf("%d checks", m.checks)
						}
					}
				}
				if len(c.pending) != open || c.due.Len() != open {
					t.Fatalf("pending %d heap %d model %d", len(c.pending), c.due.Len(), open)
				}
			},
		})
	})
}
