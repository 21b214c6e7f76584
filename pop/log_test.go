package pop

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
)

// syncBuffer is a slog sink safe for concurrent use.
type syncBuffer = testkit.LogBuffer

// TestRejectedRequestsAndResetsAreLoggedWithTheirKeys: the field reports
// were solved from such lines, so they must carry group, topic and queue.
func TestRejectedRequestsAndResetsAreLoggedWithTheirKeys(t *testing.T) {
	var buf syncBuffer
	src, clock := newMemSource(), newFakeClock()
	src.append("orders", 3, 2)
	offs := NewMemoryOffsets()
	s := New(src, Options{Now: clock.Now, Offsets: offs, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer s.Close()

	_, err := s.Pop(bg, Request{Group: "billing", Topic: "orders", ClientID: "c", QueueID: 3, Max: 99})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, buf.String(), "pop: rejected request")
	require.Contains(t, buf.String(), "group=billing topic=orders client=c queue=3")

	r, err := s.Pop(bg, Request{Group: "billing", Topic: "orders", ClientID: "c", QueueID: 3, Max: 1, Invisible: time.Second})
	require.NoError(t, err)
	require.ErrorIs(t, s.Ack("garbage"), ErrBadHandle)
	require.Contains(t, buf.String(), "pop: rejected bad handle")

	offs.Reset("billing", "orders", 3, 0)
	require.ErrorIs(t, s.Ack(r.Messages[0].Handle), ErrStaleHandle)
	require.Contains(t, buf.String(), "pop: rejected stale handle")
	_, err = s.Pop(bg, Request{Group: "billing", Topic: "orders", ClientID: "c", QueueID: 3, Max: 1, Invisible: time.Second})
	require.NoError(t, err)
	require.Contains(t, buf.String(), `offset epoch changed, dropping in-memory queue state" group=billing topic=orders queue=3`)

	clock.Advance(time.Second)
	_, err = s.Pop(bg, Request{Group: "billing", Topic: "orders", ClientID: "c", QueueID: 3, Max: 1, Invisible: time.Second})
	require.NoError(t, err)
	require.Contains(t, buf.String(), `redelivered after its invisible time ended" group=billing topic=orders queue=3 offset=0 attempts=2`)
}
