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
	unsure  *opKind // an append of this op failed uncertainly; nil: none
	landed  bool    // and it did land
}

// TestCoreMatchesModel drives the deterministic core with random prepares,
// clock moves, check rounds (whose appends succeed, fail, or fail
// uncertainly, landed or not) and resolutions, and settlings of the
// uncertain ones as the log read after a probe decides them, against a
// plain model: checks are due exactly when the model says, in due order,
// at most CheckMax per transaction, then a discard, never for an uncertain
// one; resolutions answer as the model says (ErrUncertain while unsure).
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
					if m.open && m.unsure == nil && !m.due.After(now) {
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
					k := opCheck
					if d.discard {
						k = opDiscard
					}
					switch rapid.IntRange(0, 3).Draw(t, "check append") {
					case 1:
						c.abort(d.id, false)
						continue
					case 2:
						c.abort(d.id, true)
						m.unsure, m.landed = &k, rapid.Bool().Draw(t, "landed")
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
				case m.open && m.unsure != nil:
					if !errors.Is(err, ErrUncertain) {
						t.Fatalf("uncertain %d: %v %v", id, act, err)
					}
				case m.open:
					if err != nil || act != actAppend {
						t.Fatalf("open %d: %v %v", id, act, err)
					}
					k := opCommit
					if r == Rollback {
						k = opRollback
					}
					switch rapid.IntRange(0, 3).Draw(t, "end append") {
					case 1:
						c.abort(id, false)
						return
					case 2:
						c.abort(id, true)
						m.unsure, m.landed = &k, rapid.Bool().Draw(t, "landed")
						return
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
			"settle": func(t *rapid.T) {
				// A probe succeeded and the log was read: records that
				// landed are ingested, then the rest is settled.
				refs := c.unsureRefs()
				if len(refs) != countUnsure(model) {
					t.Fatalf("%d uncertain, model %d", len(refs), countUnsure(model))
				}
				for _, r := range refs {
					m := model[r.id]
					if m.landed {
						c.applyOp(r.id, *m.unsure, now)
					}
				}
				for _, r := range refs {
					m := model[r.id]
					settled := c.settle(r)
					if settled == m.landed {
						t.Fatalf("settle %d: %v, landed %v", r.id, settled, m.landed)
					}
					switch {
					case !m.landed:
					case *m.unsure == opCheck:
						m.checks++
						m.due = now.Add(o.CheckInterval)
					case *m.unsure == opDiscard:
						m.open, m.outcome = false, Rollback
					default:
						m.open, m.outcome = false, (*m.unsure).outcome()
					}
					m.unsure = nil
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
				unsure := countUnsure(model)
				if len(c.pending) != open || c.due.Len() != open-unsure || c.uncertain != unsure {
					t.Fatalf("pending %d heap %d uncertain %d, model %d open %d uncertain", len(c.pending), c.due.Len(), c.uncertain, open, unsure)
				}
			},
		})
	})
}

func countUnsure(model map[int64]*modelTxn) int {
	n := 0
	for _, m := range model {
		if m.open && m.unsure != nil {
			n++
		}
	}
	return n
}
