package pop

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/store"
)

// appendTags appends one message per tag to (topic, queue).
func (m *memSource) appendTags(topic string, queue int, tags ...string) {
	m.mu.Lock()
	if m.q[topic] == nil {
		m.q[topic] = make(map[int][]*store.Message)
	}
	for _, tag := range tags {
		off := int64(len(m.q[topic][queue]))
		m.q[topic][queue] = append(m.q[topic][queue], &store.Message{
			Topic: topic, QueueID: queue, QueueOffset: off, Tags: tag, Body: fmt.Appendf(nil, "%s/%d/%d", topic, queue, off),
		})
	}
	cb := m.onAppend
	m.mu.Unlock()
	if cb != nil {
		cb(topic, queue)
	}
}

func filterReq(filter string, max int) Request {
	return Request{Group: "g", Topic: "T", ClientID: "c", QueueID: 0, Max: max, Invisible: time.Minute, Filter: filter}
}

func TestPlainFilterRefusesSurprisingSpellings(t *testing.T) {
	for expr, want := range map[string]string{
		"": "*", "*": "*", "A": "A", "A||B": "A || B", "B || A": "A || B",
		" A  ||B|| C ": "A || B || C", "A || A": "A",
	} {
		f, err := PlainFilter(expr)
		require.NoError(t, err, expr)
		require.Equal(t, want, f.String(), expr)
	}
	for expr, why := range map[string]string{
		"A ||": "empty tag", "|| A": "empty tag", "A |||| B": "empty tag", "A | B": "contains",
		"A B": "contains", "A || *": "must stand alone", "  *  ": "must stand alone", "A*": "contains",
		"||": "names no tag", strings.Repeat("x", 5000): "exceeds",
	} {
		_, err := PlainFilter(expr)
		require.ErrorIs(t, err, ErrInvalid, expr)
		require.ErrorContains(t, err, why, expr)
	}
	f, _ := PlainFilter("A || B")
	require.True(t, f.Match("A"))
	require.True(t, f.Match("B"))
	require.False(t, f.Match(""))
	require.False(t, f.Match("AB"))
	many, _ := PlainFilter("t0||t1||t2||t3||t4||t5||t6||t7||t8||t9")
	require.True(t, many.Match("t7"))
	require.False(t, many.Match("t10"))
	require.True(t, Filter{}.Match(""), "the zero filter matches everything")
}

func TestBadFilterIsErrInvalidWithTheReasonAndChangesNothing(t *testing.T) {
	src := newMemSource()
	src.appendTags("T", 0, "A")
	s := New(src, Options{Now: newFakeClock().Now})
	defer s.Close()
	_, err := s.Pop(bg, filterReq("A || ", 1))
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "empty tag")
	require.Zero(t, s.Stats().Pops)
	r, err := s.Pop(bg, filterReq("A", 1))
	require.NoError(t, err)
	require.Equal(t, []int64{0}, offsetsOf(r))
}

func TestFilterSettlesNonMatchingMessagesWithoutDelivering(t *testing.T) {
	src, offs := newMemSource(), NewMemoryOffsets()
	src.appendTags("T", 0, "A", "B", "C", "A", "B")
	s := New(src, Options{Now: newFakeClock().Now, Offsets: offs})
	defer s.Close()
	for _, f := range []string{"A || C", "C||A", " A|| C"} { // the same subscription written three ways
		_, err := ParseFilter(f)
		require.NoError(t, err)
	}
	r, err := s.Pop(bg, filterReq("A || C", MaxBatch))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 2, 3}, offsetsOf(r))
	require.EqualValues(t, 2, s.Stats().Filtered)
	ackAll(t, s, r)
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, 5, c, "the committed offset moved past the trailing skipped message")
	r, err = s.Pop(bg, filterReq("C||A", MaxBatch))
	require.NoError(t, err)
	require.Empty(t, r.Messages)
	require.Zero(t, s.Stats().FilterChanges, "the same filter written differently is not a change")
}

func TestFilteredMessageIsCommittedOnlyOnceEverythingBeforeIsSettled(t *testing.T) {
	src, offs := newMemSource(), NewMemoryOffsets()
	src.appendTags("T", 0, "A", "B", "B", "A")
	s := New(src, Options{Now: newFakeClock().Now, Offsets: offs})
	defer s.Close()
	r, err := s.Pop(bg, filterReq("A", 2))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 3}, offsetsOf(r))
	committed := func() int64 { c, _ := offs.Committed("g", "T", 0); return c }
	require.EqualValues(t, 0, committed(), "offset 0 is unacked: nothing passes it")
	require.NoError(t, s.Ack(r.Messages[1].Handle))
	require.EqualValues(t, 0, committed())
	require.NoError(t, s.Ack(r.Messages[0].Handle))
	require.EqualValues(t, 4, committed())
}

func TestFilterWithSmallMaxReadsOnPastNonMatchingMessages(t *testing.T) {
	src := newMemSource()
	noise := make([]string, 100)
	for i := range noise {
		noise[i] = "noise"
	}
	src.appendTags("T", 0, noise...)
	src.appendTags("T", 0, "A", "A")
	s := New(src, Options{Now: newFakeClock().Now})
	defer s.Close()
	r, err := s.Pop(bg, filterReq("A", 1))
	require.NoError(t, err)
	require.Equal(t, []int64{100}, offsetsOf(r), "a Poll 0 pop reads on past a run of non-matching messages")
	r, err = s.Pop(bg, filterReq("A", 1))
	require.NoError(t, err)
	require.Equal(t, []int64{101}, offsetsOf(r), "the read-ahead did not skip a matching message")
}

func TestFIFOFilterNonMatchingMessageNeverBlocksTheQueue(t *testing.T) {
	src, offs := newMemSource(), NewMemoryOffsets()
	src.appendTags("T", 0, "B", "A", "B", "A", "B")
	s := New(src, Options{Now: newFakeClock().Now, Offsets: offs})
	defer s.Close()
	fifo := func(attempt string) Request {
		r := filterReq("A", MaxBatch)
		r.FIFO, r.AttemptID = true, attempt
		return r
	}
	r, err := s.Pop(bg, fifo("X"))
	require.NoError(t, err)
	require.Equal(t, []int64{1, 3}, offsetsOf(r))
	again, err := s.Pop(bg, fifo("X"))
	require.NoError(t, err)
	require.Equal(t, []int64{1, 3}, offsetsOf(again), "the same attempt re-pops the batch")
	y, err := s.Pop(bg, fifo("Y"))
	require.NoError(t, err)
	require.Empty(t, y.Messages, "the batch blocks another attempt")
	ackAll(t, s, again)
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, 5, c)
	src.appendTags("T", 0, "B", "B", "A")
	y, err = s.Pop(bg, fifo("Y"))
	require.NoError(t, err)
	require.Equal(t, []int64{7}, offsetsOf(y), "non-matching messages ahead of it did not block the queue")
	require.EqualValues(t, 5, s.Stats().Filtered)
}

func TestChangedFilterReplacesTheSubscriptionAndNeverRedeliversSkipped(t *testing.T) {
	var logs testkit.LogBuffer
	src := newMemSource()
	src.appendTags("T", 0, "A", "B", "A", "B")
	s := New(src, Options{Now: newFakeClock().Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer s.Close()
	r, err := s.Pop(bg, filterReq("A", MaxBatch))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 2}, offsetsOf(r))
	r, err = s.Pop(bg, filterReq("B", MaxBatch))
	require.NoError(t, err)
	require.Empty(t, r.Messages, "what filter A skipped is settled: B never gets it")
	require.EqualValues(t, 1, s.Stats().FilterChanges)
	require.Contains(t, logs.String(), "subscription filter replaced")
	require.Contains(t, logs.String(), "old_filter=A filter=B")
	src.appendTags("T", 0, "A", "B")
	r, err = s.Pop(bg, filterReq("B", MaxBatch))
	require.NoError(t, err)
	require.Equal(t, []int64{5}, offsetsOf(r))

	// Another group has its own subscription on the topic.
	other := filterReq("", MaxBatch)
	other.Group = "h"
	r, err = s.Pop(bg, other)
	require.NoError(t, err)
	require.Len(t, r.Messages, 6)
}

func TestFilterOnRealStore(t *testing.T) {
	var hook atomic.Pointer[Service]
	st := realStore(t, t.TempDir(), &hook)
	defer st.Close()
	var msgs []*store.Message
	for i, tag := range []string{"TagA", "TagB", "TagC", "TagA", "", "TagB"} {
		msgs = append(msgs, &store.Message{Topic: "T", Tags: tag, Body: fmt.Appendf(nil, "m%d", i)})
	}
	require.NoError(t, st.Append(msgs...))
	offs := NewMemoryOffsets()
	s := New(st, Options{Now: newFakeClock().Now, Offsets: offs})
	defer s.Close()
	r, err := s.Pop(bg, filterReq("TagA || TagB", MaxBatch))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 3, 5}, offsetsOf(r))
	for _, d := range r.Messages {
		require.Contains(t, []string{"TagA", "TagB"}, d.Message.Tags)
	}
	require.EqualValues(t, 2, s.Stats().Filtered)
	ackAll(t, s, r)
	c, _ := offs.Committed("g", "T", 0)
	require.EqualValues(t, 6, c)

	// FIFO over the real store, too.
	require.NoError(t, st.Append(&store.Message{Topic: "T", Tags: "TagC"}, &store.Message{Topic: "T", Tags: "TagA"}))
	f := filterReq("TagA", MaxBatch)
	f.FIFO, f.AttemptID = true, "X"
	r, err = s.Pop(bg, f)
	require.NoError(t, err)
	require.Equal(t, []int64{7}, offsetsOf(r))
}

// TestFilteredLongPollIsNotEndedEarlyByAFloodOfNonMatchingMessages: every
// arrival wakes the poll, but what it reads is settled and it waits on; it
// answers empty once, when its Poll ends, and at once when a message it
// can deliver arrives.
func TestFilteredLongPollIsNotEndedEarlyByAFloodOfNonMatchingMessages(t *testing.T) {
	src := newMemSource()
	s := New(src, Options{Now: newFakeClock().Now})
	defer s.Close()
	src.onAppend = func(topic string, q int) { s.Arrived(topic, q) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the flood
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				src.appendTags("T", 0, "noise", "noise")
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	req := filterReq("wanted", 4)
	req.Poll = 300 * time.Millisecond
	start := time.Now()
	r, err := s.Pop(context.Background(), req)
	require.NoError(t, err)
	require.Empty(t, r.Messages)
	require.GreaterOrEqual(t, time.Since(start), req.Poll, "the flood ended the poll early")
	st := s.Stats()
	require.EqualValues(t, 1, st.Empty, "one empty answer per Poll")
	require.Positive(t, st.Filtered)

	req.Poll = time.Hour
	done := make(chan Result, 1)
	go func() {
		r, err := s.Pop(context.Background(), req)
		require.NoError(t, err)
		done <- r
	}()
	waitFor(t, "the poll waits", func() bool { return s.Stats().Waiters == 1 })
	src.appendTags("T", 0, "wanted")
	select {
	case r := <-done:
		require.Len(t, r.Messages, 1)
		require.Equal(t, "wanted", r.Messages[0].Message.Tags)
	case <-time.After(5 * time.Second):
		t.Fatal("a deliverable arrival did not wake the filtered long poll")
	}
	require.EqualValues(t, 1, s.Stats().Empty)
}
