package consumer

import (
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/internal/testkit"
)

// fakeClock is the test clock injected as Options.Now.
type fakeClock = testkit.Clock

func newFakeClock() *fakeClock { return testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) On(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) Take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// kinds lists the event kinds of evs for group g ("" = all groups).
func kinds(evs []Event, g string) []EventKind {
	var out []EventKind
	for _, e := range evs {
		if g == "" || e.Group == g {
			out = append(out, e.Kind)
		}
	}
	return out
}

// tableViolations checks the registry's internal tables against each other
// by brute force: the channel attribute and the topic table must equal what a
// full scan of the group table gives, and the heartbeat index must hold
// exactly the group table's entries. It returns human-readable violations.
func tableViolations(r *Registry) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var bad []string
	wantCh := map[string]map[string]bool{}
	wantTopic := map[string]map[string]bool{}
	n := 0
	for name, g := range r.t.groups {
		if len(g.clients) == 0 {
			bad = append(bad, "empty group "+name+" left in group table")
		}
		for ch, e := range g.clients {
			n++
			if e.client.ChannelID != ch {
				bad = append(bad, "entry keyed by wrong channel "+ch)
			}
			if e.lastSeen.Load() == deadMark {
				bad = append(bad, "dead entry in group table "+name+"/"+ch)
			}
			if wantCh[ch] == nil {
				wantCh[ch] = map[string]bool{}
			}
			wantCh[ch][name] = true
			if got, ok := r.t.index.Load(hbKey{name, ch}); !ok || got != e {
				bad = append(bad, "heartbeat index misses "+name+"/"+ch)
			}
		}
		for topic := range g.subs {
			if wantTopic[topic] == nil {
				wantTopic[topic] = map[string]bool{}
			}
			wantTopic[topic][name] = true
		}
	}
	if n != r.t.nClients {
		bad = append(bad, "client count out of step")
	}
	if r.t.index.Size() != n {
		bad = append(bad, "heartbeat index has extra entries")
	}
	bad = append(bad, compareSets("channel attribute", r.t.channels, wantCh)...)
	bad = append(bad, compareSets("topic table", r.t.topics, wantTopic)...)
	sort.Strings(bad)
	return bad
}

func compareSets(what string, got map[string]map[string]struct{}, want map[string]map[string]bool) []string {
	var bad []string
	for k, set := range got {
		if len(set) == 0 {
			bad = append(bad, what+": empty set left for "+k)
		}
		for g := range set {
			if !want[k][g] {
				bad = append(bad, what+": stale "+k+" -> "+g)
			}
		}
	}
	for k, set := range want {
		for g := range set {
			if _, ok := got[k][g]; !ok {
				bad = append(bad, what+": missing "+k+" -> "+g)
			}
		}
	}
	return bad
}
