package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLongPollOutlivesTheServerWriteTimeout rules out a long poll cut off by
// the server's WriteTimeout: the pop handler moves its own write deadline
// past its Poll. (Checked by removing the SetWriteDeadline call in
// handlePop: the client then gets EOF instead of the message.)
func TestLongPollOutlivesTheServerWriteTimeout(t *testing.T) {
	const wt = 300 * time.Millisecond
	tb := startBroker(t, t.TempDir(), newFakeClock(), func(c *Config) { c.WriteTimeout = wt })
	c, _ := tb.client(t)
	got := make(chan error, 1)
	var res popOut
	go func() {
		got <- c.call(t.Context(), "POST", "/v1/pop", popIn{Group: "g", Topic: "slow", ClientID: "c", Poll: "5s"}, &res)
	}()
	// A real wait, longer than the write timeout: that timeout is the
	// server's wall-clock deadline, which no injected clock moves.
	time.Sleep(2 * wt)
	producer, _ := tb.client(t)
	require.NoError(t, producer.call(t.Context(), "POST", "/v1/messages", messageIn{Topic: "slow", Body: ptr("finally")}, nil))
	select {
	case err := <-got:
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		assert.Equal(t, "finally", *res.Messages[0].Body)
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not answer")
	}
	// An ordinary request still answers within the write timeout.
	var st statsOut
	require.NoError(t, c.call(t.Context(), "GET", "/v1/stats", nil, &st))
	assert.Equal(t, int64(0), st.HTTP.Failed)
}
