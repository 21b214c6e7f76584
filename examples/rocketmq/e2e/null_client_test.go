//go:build !race

package e2e

import "testing"

// TestNullBrokerAnswersSends: the floor's fake is a broker the official
// producer works against (so the floor benchmarks measure sends, not
// errors): every SendSync is SendOK on the queue it chose, with rising
// queue offsets.
func TestNullBrokerAnswersSends(t *testing.T) {
	s := startNullT(t)
	p := newProducer(t, s.NameSrv)
	last := int64(0)
	for i := 0; i < 20; i++ {
		r := sendSync(t, p, newBenchMessage())
		if r.QueueOffset <= last {
			t.Fatalf("send %d: queue offset %d after %d", i, r.QueueOffset, last)
		}
		last = r.QueueOffset
		if r.MessageQueue.QueueId < 0 || r.MessageQueue.QueueId >= 4 {
			t.Fatalf("send %d: queue %d of a 4-queue topic", i, r.MessageQueue.QueueId)
		}
	}
	if got := s.h.sent.Load(); got != 20 {
		t.Fatalf("null broker answered %d sends, want 20", got)
	}
}
