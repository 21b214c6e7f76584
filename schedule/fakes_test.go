package schedule

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/fsx"
	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// fakeClock is the test clock injected as Options.Now.
type fakeClock = testkit.Clock

func newClock() *fakeClock { return testkit.NewClock(time.Date(2026, 5, 21, 14, 50, 0, 0, time.UTC)) }

type qkey struct {
	topic string
	queue int
}

// fakeLog is an in-memory Log. Appends to any topic but Topic (deliveries)
// pass through hook first, outside the lock, so a test can block, slow down
// or fail them; a batch is all-or-nothing like the store's.
type fakeLog struct {
	clock func() time.Time

	mu      sync.Mutex
	queues  map[qkey][]*store.Message
	base    map[qkey]int64 // offset of queues[k][0]; moved by trim
	logOff  int64
	appends int // successful delivery appends
	hook    func(msgs []*store.Message) error
	onStore func(msgs []*store.Message) // called under mu after a delivery batch is stored
}

var errInjected = errors.New("injected append failure")

func newFakeLog(clock func() time.Time) *fakeLog {
	return &fakeLog{clock: clock, queues: map[qkey][]*store.Message{}, base: map[qkey]int64{}}
}

func (l *fakeLog) setHook(h func(msgs []*store.Message) error) {
	l.mu.Lock()
	l.hook = h
	l.mu.Unlock()
}

func (l *fakeLog) Append(msgs ...*store.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	delivery := !isSystemTopic(msgs[0].Topic)
	if delivery {
		l.mu.Lock()
		h := l.hook
		l.mu.Unlock()
		if h != nil {
			if err := h(msgs); err != nil {
				return err
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	for _, m := range msgs {
		k := qkey{m.Topic, m.QueueID}
		c := copyMsg(m)
		c.QueueOffset = l.base[k] + int64(len(l.queues[k]))
		c.LogOffset = l.logOff
		c.StoredAt = now
		l.logOff++
		l.queues[k] = append(l.queues[k], c)
		m.QueueOffset, m.LogOffset, m.StoredAt = c.QueueOffset, c.LogOffset, c.StoredAt
	}
	if delivery {
		l.appends++
		if l.onStore != nil {
			l.onStore(msgs)
		}
	}
	return nil
}

func (l *fakeLog) Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error) {
	if topic == "" || queueID < 0 || max < 1 {
		return nil, errors.New("fake: bad read")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := qkey{topic, queueID}
	if offset < l.base[k] {
		return nil, fmt.Errorf("fake: offset %d below %d: %w", offset, l.base[k], store.ErrOffsetTooSmall)
	}
	q := l.queues[k]
	i := offset - l.base[k]
	var out []*store.Message
	for ; i < int64(len(q)) && len(out) < max; i++ {
		out = append(out, copyMsg(q[i]))
	}
	return out, nil
}

func (l *fakeLog) MinOffset(topic string, queueID int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.base[qkey{topic, queueID}]
}

func (l *fakeLog) MaxOffset(topic string, queueID int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := qkey{topic, queueID}
	return l.base[k] + int64(len(l.queues[k]))
}

// trim drops everything below offset, like retention.
func (l *fakeLog) trim(topic string, queueID int, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := qkey{topic, queueID}
	n := offset - l.base[k]
	if n <= 0 {
		return
	}
	n = min(n, int64(len(l.queues[k])))
	l.queues[k] = l.queues[k][n:]
	l.base[k] += n
}

// delivered returns every message appended to topic, queue by queue.
func (l *fakeLog) delivered(topic string) []*store.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*store.Message
	for k, q := range l.queues {
		if k.topic == topic {
			for _, m := range q {
				out = append(out, copyMsg(m))
			}
		}
	}
	return out
}

func copyMsg(m *store.Message) *store.Message {
	c := *m
	c.Keys = cloneStrings(m.Keys)
	c.Body = cloneBytes(m.Body)
	if m.Properties != nil {
		c.Properties = make(map[string]string, len(m.Properties))
		for k, v := range m.Properties {
			c.Properties[k] = v
		}
	}
	return &c
}

// produce delays n messages for topic at level and appends them; it returns
// their UNIQ_KEYs.
func produce(t testing.TB, s *Scheduler, l *fakeLog, topic string, level, n int) []string {
	t.Helper()
	var keys []string
	for i := 0; i < n; i++ {
		d, err := s.Delay(&store.Message{Topic: topic, Body: []byte("x")}, level)
		require.NoError(t, err)
		require.NoError(t, l.Append(d))
		keys = append(keys, d.Properties[PropUniqKey])
	}
	return keys
}

// countByKey counts deliveries to topic per UNIQ_KEY.
func countByKey(l *fakeLog, topic string) map[string]int {
	c := map[string]int{}
	for _, m := range l.delivered(topic) {
		c[m.Properties[PropUniqKey]]++
	}
	return c
}

// waitUntil polls cond on the real clock; it is for goroutine hand-offs, never
// for an expiry (expiries move the fake clock).
func waitUntil(t interface {
	Helper()
	Fatalf(string, ...any)
}, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// yieldN gives other goroutines n chances to run: a slow step without
// sleeping on the real clock.
func yieldN(n int) {
	for i := 0; i < n; i++ {
		runtime.Gosched()
	}
}

// loadProgress reads the levels of the progress file at path (nil if none).
func loadProgress(path string) (map[int]int64, error) {
	j := progressJournal{fs: fsx.OS, path: path}
	b, _, err := j.load()
	if err != nil || b == nil {
		return nil, err
	}
	p, err := decodeProgress(b)
	return p.levels, err
}

// saveProgress writes a progress file holding only levels.
func saveProgress(path string, levels map[int]int64) error {
	return fsx.WriteFile(nil, path, encodeLevels(levels), 0o644)
}

func encodeLevels(levels map[int]int64) []byte {
	return encodeProgress(progress{levels: levels, timer: timerState{done: noneDone}})
}
