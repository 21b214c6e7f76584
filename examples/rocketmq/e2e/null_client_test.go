//go:build !race

package e2e

import (
	"bytes"
	"testing"
)

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

// TestNullBrokerWithLogWritesEverySend: the ",wal" floor rows measure a
// wal write per send, not a fake one. Every send's body is in the log, in
// order, with the store-sized record, before its answer.
func TestNullBrokerWithLogWritesEverySend(t *testing.T) {
	s := startNullLogT(t, t.TempDir())
	p := newProducer(t, s.NameSrv)
	for i := 0; i < 20; i++ {
		m := newBenchMessage()
		sendSync(t, p, m)
		last, err := s.h.log.wl.LastIndex()
		if err != nil || last != uint64(i+1) {
			t.Fatalf("after send %d: log last index %d (%v), want %d", i, last, err, i+1)
		}
		rec, err := s.h.log.wl.Read(last)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec) != len(m.Body)+nullRecordMeta || !bytes.Equal(rec[:len(m.Body)], m.Body) {
			t.Fatalf("send %d: logged %d bytes, want the %d-byte body and %d more", i, len(rec), len(m.Body), nullRecordMeta)
		}
	}
}
