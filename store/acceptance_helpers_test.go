package store_test

// Black-box acceptance tests of the store contract in shared/ARCHITECTURE.md
// ("Conventions every package follows" and "store"), written from the
// contract and the godoc only, as an outside user would. One test per
// contract sentence or bullet; each test names the failure it rules out.
// The tests are split into acceptance_*_test.go files by idea; this file
// holds the shared helpers.

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

// fakeClock is an injectable Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// logBuffer is a concurrency-safe slog sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func openT(t *testing.T, dir string, opts store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func msg(topic string, q int, body string) *store.Message {
	return &store.Message{Topic: topic, QueueID: q, Body: []byte(body)}
}

func readAll(t *testing.T, s *store.Store, topic string, q int) []*store.Message {
	t.Helper()
	var out []*store.Message
	off := s.MinOffset(topic, q)
	for {
		got, err := s.Read(topic, q, off, 1000)
		require.NoError(t, err)
		if len(got) == 0 {
			return out
		}
		out = append(out, got...)
		off = got[len(got)-1].QueueOffset + 1
	}
}
