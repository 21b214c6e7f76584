package schedule

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/store"
)

// eventually polls cond until it holds, failing after a minute (a bound a
// loaded machine does not reach; the scheduler ticks every millisecond).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, time.Minute, time.Millisecond, what)
}

func readTopic(t *testing.T, l *store.Store, topic string) []*store.Message {
	t.Helper()
	ms, err := l.Read(topic, 0, 0, 100)
	require.NoError(t, err)
	return ms
}

// poisonRecord is what a remoting client stored with a SEND_MESSAGE straight
// to queue 0 of the schedule topic: a real topic of 300 bytes, which the
// store refuses for good when the scheduler restores it.
func poisonRecord(topic string, queue int, extra map[string]string) *store.Message {
	props := map[string]string{PropRealTopic: strings.Repeat("A", 300), PropRealQueue: "0", PropUniqKey: "poison"}
	for k, v := range extra {
		props[k] = v
	}
	return &store.Message{Topic: topic, QueueID: queue, Body: []byte("poison"), Properties: props}
}

// Issue 25, finding 1: one record the store refuses for good wedged its
// delay level forever ("append failed, will retry the same offset"), even
// across a restart. Now it goes to DeadLetterTopic with the reason, the
// messages around it (in the same batch) are delivered once, and a restart
// neither retries it nor delivers anything twice. Both progress modes.
func TestPoisonDelayedMessageIsDeadLetteredAndTheLevelMovesOn(t *testing.T) {
	for _, mode := range []string{"file", "log"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			clk := newAtomicClock()
			opts := Options{Levels: "1s", Now: clk.Now, Tick: time.Millisecond}
			if mode == "file" {
				opts.ProgressPath = filepath.Join(dir, "progress")
			}
			open := func() (*store.Store, *Scheduler) {
				l, err := store.Open(filepath.Join(dir, "log"), store.Options{Now: clk.Now, Sync: store.SyncNone})
				require.NoError(t, err)
				s, err := New(l, opts)
				require.NoError(t, err)
				return l, s
			}
			l, s := open()
			delay := func(body string) {
				d, err := s.Delay(&store.Message{Topic: "orders", Body: []byte(body)}, 1)
				require.NoError(t, err)
				require.NoError(t, l.Append(d))
			}
			delay("good1")
			require.NoError(t, l.Append(poisonRecord(Topic, 0, map[string]string{PropDelayLevel: "1"})))
			delay("good2")
			require.NoError(t, s.Start())
			clk.Advance(2 * time.Second)
			eventually(t, "good2 delivered past the poison", func() bool { return l.MaxOffset("orders", 0) == 2 })
			eventually(t, "the poison dead-lettered", func() bool { return l.MaxOffset(DeadLetterTopic, 0) == 1 })
			require.NoError(t, s.Stop())
			assert.Equal(t, int64(3), s.Progress()[1])
			st := s.Stats()
			assert.Equal(t, uint64(1), st.DeadLettered)
			assert.Equal(t, uint64(1), st.Levels[0].DeadLettered)
			assert.Equal(t, uint64(2), st.Delivered)

			dl := readTopic(t, l, DeadLetterTopic)[0]
			assert.Equal(t, "poison", string(dl.Body))
			assert.Contains(t, dl.Properties[PropDLQReason], "300 bytes")
			assert.Equal(t, Topic, dl.Properties[PropDLQOriginTopic])
			assert.Equal(t, "0", dl.Properties[PropDLQOriginQueue])
			assert.Equal(t, "1", dl.Properties[PropDLQOriginOffset])
			assert.Equal(t, strings.Repeat("A", 300), dl.Properties[PropRealTopic], "kept, so it can be fixed and sent again")
			assert.Equal(t, "poison", dl.Properties[PropUniqKey])

			require.NoError(t, s.Close())
			require.NoError(t, l.Close())
			l, s = open()
			defer l.Close()
			defer s.Close()
			delay("good3")
			require.NoError(t, s.Start())
			clk.Advance(2 * time.Second)
			eventually(t, "good3 delivered after the restart", func() bool { return l.MaxOffset("orders", 0) == 3 })
			require.NoError(t, s.Stop())
			var got []string
			for _, m := range readTopic(t, l, "orders") {
				got = append(got, string(m.Body))
			}
			assert.Equal(t, []string{"good1", "good2", "good3"}, got, "each once, in order")
			assert.Equal(t, int64(1), l.MaxOffset(DeadLetterTopic, 0), "not dead-lettered again")
		})
	}
}

// The same for timers: a TimerTopic record whose real topic the store
// refuses is dead-lettered, and the timers after it are delivered.
func TestPoisonTimerIsDeadLetteredAndLaterTimersAreDelivered(t *testing.T) {
	dir := t.TempDir()
	clk := newAtomicClock()
	l, err := store.Open(filepath.Join(dir, "log"), store.Options{Now: clk.Now, Sync: store.SyncNone})
	require.NoError(t, err)
	defer l.Close()
	s, err := New(l, Options{Now: clk.Now, Tick: time.Millisecond, ProgressPath: filepath.Join(dir, "progress")})
	require.NoError(t, err)
	defer s.Close()
	due := clk.Now().Add(time.Second)
	at := func(body string) {
		m, err := s.At(&store.Message{Topic: "orders", Body: []byte(body)}, due)
		require.NoError(t, err)
		require.NoError(t, l.Append(m))
	}
	at("good1")
	ms := strconvMs(due)
	require.NoError(t, l.Append(poisonRecord(TimerTopic, 0, map[string]string{PropTimerDeliverMS: ms})))
	at("good2")
	require.NoError(t, s.Start())
	clk.Advance(2 * time.Second)
	eventually(t, "both good timers", func() bool { return l.MaxOffset("orders", 0) == 2 })
	eventually(t, "the poison timer dead-lettered", func() bool { return l.MaxOffset(DeadLetterTopic, 0) == 1 })
	require.NoError(t, s.Stop())
	dl := readTopic(t, l, DeadLetterTopic)[0]
	assert.Equal(t, TimerTopic, dl.Properties[PropDLQOriginTopic])
	assert.Contains(t, dl.Properties[PropDLQReason], "300 bytes")
	assert.Equal(t, uint64(1), s.Stats().Timers.DeadLettered)
	assert.Equal(t, uint64(1), s.Stats().DeadLettered)
}

func strconvMs(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// dlqRefusingLog refuses every append to DeadLetterTopic, for good or (with
// transient) for a while.
type dlqRefusingLog struct {
	*store.Store
	transient atomic.Int64 // refuse this many dead letters with a transient error first
	forGood   bool
}

func (l *dlqRefusingLog) Append(msgs ...*store.Message) error {
	for _, m := range msgs {
		if m.Topic != DeadLetterTopic {
			continue
		}
		if l.transient.Add(-1) >= 0 {
			return errors.New("injected transient failure")
		}
		if l.forGood {
			return fmt.Errorf("%w: injected: dead letters refused", store.ErrInvalid)
		}
	}
	return l.Store.Append(msgs...)
}

// A poison message whose dead letter is refused for good too is dropped —
// the level still moves on — and said at ERROR and counted; a transient
// failure of the dead letter is retried, not taken as a reason to drop.
func TestPoisonWhoseDeadLetterIsRefusedIsDroppedLoudlyAndATransientOneRetried(t *testing.T) {
	for _, forGood := range []bool{true, false} {
		t.Run(fmt.Sprint("forGood=", forGood), func(t *testing.T) {
			dir := t.TempDir()
			clk := newAtomicClock()
			st, err := store.Open(filepath.Join(dir, "log"), store.Options{Now: clk.Now, Sync: store.SyncNone})
			require.NoError(t, err)
			defer st.Close()
			l := &dlqRefusingLog{Store: st, forGood: forGood}
			l.transient.Store(3)
			var lb testkit.LogBuffer
			s, err := New(l, Options{Levels: "1s", Now: clk.Now, Tick: time.Millisecond,
				ProgressPath: filepath.Join(dir, "progress"), Logger: slog.New(slog.NewTextHandler(&lb, nil))})
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, st.Append(poisonRecord(Topic, 0, nil)))
			d, err := s.Delay(&store.Message{Topic: "orders", Body: []byte("good")}, 1)
			require.NoError(t, err)
			require.NoError(t, st.Append(d))
			require.NoError(t, s.Start())
			clk.Advance(2 * time.Second)
			eventually(t, "the good message", func() bool { return st.MaxOffset("orders", 0) == 1 })
			require.NoError(t, s.Stop())
			stats := s.Stats()
			assert.GreaterOrEqual(t, stats.Retried, uint64(3), "the transient failures were retried")
			if forGood {
				assert.Equal(t, uint64(1), stats.Dropped)
				assert.Zero(t, st.MaxOffset(DeadLetterTopic, 0))
				assert.Contains(t, lb.String(), "level=ERROR")
				assert.Contains(t, lb.String(), "uniq_key=poison")
			} else {
				assert.Equal(t, uint64(1), stats.DeadLettered)
				assert.Zero(t, stats.Dropped)
				assert.Equal(t, int64(1), st.MaxOffset(DeadLetterTopic, 0))
			}
		})
	}
}
