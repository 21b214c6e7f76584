package lock

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// modelLease and lockModel are the specification: a plain map with expiry
// times and a counter for tokens. The Table must match it step by step.
type modelLease struct {
	client  string
	token   uint64
	expires time.Time
}

type lockModel struct {
	leases    map[key]modelLease
	seq       uint64
	lastToken map[key]uint64 // survives deletion: tokens never go back
	maxLive   time.Duration
}

func (m *lockModel) live(k key, now time.Time) (modelLease, bool) {
	l, ok := m.leases[k]
	return l, ok && now.Before(l.expires)
}

func (m *lockModel) tryLock(k key, client string, now time.Time) (modelLease, bool) {
	if l, ok := m.live(k, now); ok {
		if l.client != client {
			return modelLease{}, false
		}
		if e := now.Add(m.maxLive); e.After(l.expires) {
			l.expires = e
		}
		m.leases[k] = l
		return l, true
	}
	m.seq++
	l := modelLease{client: client, token: m.seq, expires: now.Add(m.maxLive)}
	m.leases[k] = l
	return l, true
}

func (m *lockModel) unlock(k key, client string, now time.Time) bool {
	if l, ok := m.live(k, now); ok && l.client == client {
		delete(m.leases, k)
		return true
	}
	return false
}

var (
	modelGroups  = []string{"g1", "g2", ""}
	modelClients = []string{"a", "b", "c", ""}
)

func drawQueue(t *rapid.T, label string) Queue {
	return Queue{Topic: "t", Broker: "b", QueueID: rapid.IntRange(-1, 2).Draw(t, label)}
}

func validInput(group string, qq Queue, client string) bool {
	return group != "" && client != "" && qq.QueueID >= 0
}

func TestTableMatchesModelUnderAnyOperationSequence(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const maxLive = 10 * time.Second
		c := newFakeClock()
		tb := New(Options{Now: c.Now, MaxLiveTime: maxLive})
		m := &lockModel{leases: map[key]modelLease{}, lastToken: map[key]uint64{}, maxLive: maxLive}

		// handover checks that a grant matches the model and, if it
		// changed hands, that its token beats every earlier one for k.
		check := func(k key, got Lease, ok bool, want modelLease, wantOK bool, before modelLease, wasLive bool) {
			if ok != wantOK {
				rt.Fatalf("lock %v: got ok=%v, model says %v", k, ok, wantOK)
			}
			if !ok {
				return
			}
			if got.ClientID != want.client || got.Token != want.token || !got.Expires.Equal(want.expires) {
				rt.Fatalf("lock %v: got %+v, model %+v", k, got, want)
			}
			if wasLive && before.client == got.ClientID {
				if got.Token != before.token {
					rt.Fatalf("renewal of %v changed token %d -> %d", k, before.token, got.Token)
				}
				return
			}
			if got.Token <= m.lastToken[k] {
				rt.Fatalf("handover of %v: token %d not above %d", k, got.Token, m.lastToken[k])
			}
			m.lastToken[k] = got.Token
		}

		rt.Repeat(map[string]func(*rapid.T){
			"TryLock": func(rt *rapid.T) {
				g := rapid.SampledFrom(modelGroups).Draw(rt, "group")
				qq := drawQueue(rt, "queue")
				cl := rapid.SampledFrom(modelClients).Draw(rt, "client")
				now := c.Now()
				k := key{g, qq}
				before, wasLive := m.live(k, now)
				got, ok := tb.TryLock(g, qq, cl)
				if !validInput(g, qq, cl) {
					if ok {
						rt.Fatalf("invalid input %q %v %q was granted", g, qq, cl)
					}
					return
				}
				want, wantOK := m.tryLock(k, cl, now)
				check(k, got, ok, want, wantOK, before, wasLive)
			},
			"TryLockBatch": func(rt *rapid.T) {
				g := rapid.SampledFrom(modelGroups).Draw(rt, "group")
				cl := rapid.SampledFrom(modelClients).Draw(rt, "client")
				qs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Queue { return drawQueue(t, "q") }), 0, 5).Draw(rt, "queues")
				now := c.Now()
				got := tb.TryLockBatch(g, qs, cl)
				var want []Queue
				if g != "" && cl != "" {
					for _, qq := range qs {
						if qq.QueueID < 0 || contains(want, nil, qq) {
							continue
						}
						if _, ok := m.tryLock(key{g, qq}, cl, now); ok {
							want = append(want, qq)
						}
					}
				}
				if len(got) != len(want) {
					rt.Fatalf("batch %v: got %v, model %v", qs, got, want)
				}
				for i := range got {
					if got[i] != want[i] {
						rt.Fatalf("batch %v: got %v, model %v", qs, got, want)
					}
					k := key{g, got[i]}
					if m.leases[k].token < m.lastToken[k] {
						rt.Fatalf("batch token went back on %v", k)
					}
					m.lastToken[k] = m.leases[k].token
				}
			},
			"Unlock": func(rt *rapid.T) {
				g := rapid.SampledFrom(modelGroups).Draw(rt, "group")
				qq := drawQueue(rt, "queue")
				cl := rapid.SampledFrom(modelClients).Draw(rt, "client")
				got := tb.Unlock(g, qq, cl)
				want := validInput(g, qq, cl) && m.unlock(key{g, qq}, cl, c.Now())
				if got != want {
					rt.Fatalf("Unlock(%q, %v, %q) = %v, model %v", g, qq, cl, got, want)
				}
			},
			"UnlockAll": func(rt *rapid.T) {
				cl := rapid.SampledFrom(modelClients).Draw(rt, "client")
				now := c.Now()
				want := 0
				for k, l := range m.leases {
					if cl != "" && l.client == cl && now.Before(l.expires) {
						delete(m.leases, k)
						want++
					}
				}
				if got := tb.UnlockAll(cl); got != want {
					rt.Fatalf("UnlockAll(%q) = %d, model %d", cl, got, want)
				}
			},
			"Sweep": func(rt *rapid.T) {
				now := c.Now()
				want := 0
				for k, l := range m.leases {
					if !now.Before(l.expires) {
						delete(m.leases, k)
						want++
					}
				}
				if got := tb.Sweep(); got != want {
					rt.Fatalf("Sweep() = %d, model %d", got, want)
				}
			},
			"Advance": func(rt *rapid.T) {
				d := rapid.SampledFrom([]time.Duration{
					time.Nanosecond, maxLive / 3, maxLive - time.Nanosecond, maxLive, 2 * maxLive,
				}).Draw(rt, "step")
				c.Advance(d)
			},
			"": func(rt *rapid.T) {
				now := c.Now()
				for _, g := range modelGroups[:2] {
					for id := 0; id <= 2; id++ {
						k := key{g, Queue{Topic: "t", Broker: "b", QueueID: id}}
						got, ok := tb.Holder(g, k.q)
						want, wantOK := m.live(k, now)
						if ok != wantOK || (ok && (got.ClientID != want.client || got.Token != want.token)) {
							rt.Fatalf("Holder %v = %+v %v, model %+v %v", k, got, ok, want, wantOK)
						}
					}
				}
				if e := tb.Stats().Entries; e != uint64(len(m.leases)) {
					rt.Fatalf("table has %d entries, model %d", e, len(m.leases))
				}
			},
		})
	})
}
