package store_test

// Black-box acceptance tests of the store contract in shared/ARCHITECTURE.md
// ("Conventions every package follows" and "store"), written from the
// contract and the godoc only, as an outside user would. One test per
// contract sentence or bullet; each test names the failure it rules out.
// The tests are split into acceptance_*_test.go files by idea; this file
// holds the shared helpers.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/store"
)

// logBuffer is a slog sink safe for concurrent use.
type logBuffer = testkit.LogBuffer

// fakeClock is the test clock injected as Options.Now.
type fakeClock = testkit.Clock

func newFakeClock() *fakeClock { return testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

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
