package lock

import (
	"testing"
	"time"
)

// FuzzTableNeverPanicsAndRefusesBadInput feeds arbitrary keys and clients:
// nothing panics, invalid input is never granted, and a grant is visible
// through Holder with the same token. Lock has no decoder; this guards the
// "bad input changes nothing, never a panic" rule.
func FuzzTableNeverPanicsAndRefusesBadInput(f *testing.F) {
	f.Add("cg", "orders", "broker-2", 5, "10.238.18.6@29", uint8(0))
	f.Add("", "t", "b", -1, "", uint8(3))
	f.Add("g", "", "", 0, "c", uint8(7))
	f.Fuzz(func(t *testing.T, group, topic, broker string, id int, client string, op uint8) {
		c := newFakeClock()
		tb := New(Options{Now: c.Now})
		qq := Queue{Topic: topic, Broker: broker, QueueID: id}
		valid := group != "" && client != "" && id >= 0
		c.Advance(time.Duration(op) * time.Second)
		l, ok := tb.TryLock(group, qq, client)
		if ok != valid {
			t.Fatalf("TryLock(%q, %v, %q) = %v, valid %v", group, qq, client, ok, valid)
		}
		if got := tb.TryLockBatch(group, []Queue{qq, qq}, client); len(got) != map[bool]int{true: 1}[valid] {
			t.Fatalf("TryLockBatch returned %v", got)
		}
		if h, hok := tb.Holder(group, qq); hok != valid || (valid && h.Token != l.Token) {
			t.Fatalf("Holder = %+v %v after lock %+v %v", h, hok, l, ok)
		}
		if op%2 == 0 {
			if tb.Unlock(group, qq, client) != valid {
				t.Fatalf("Unlock disagrees with validity %v", valid)
			}
		} else if n := tb.UnlockAll(client); n != map[bool]int{true: 1}[valid] && client != "" {
			t.Fatalf("UnlockAll = %d", n)
		}
		if tb.Stats().Entries != 0 && valid {
			t.Fatalf("entries left after unlock")
		}
	})
}
