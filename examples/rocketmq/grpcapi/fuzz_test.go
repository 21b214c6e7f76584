package grpcapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseReceipt: any string either parses into a receipt that prints
// back to the same string, or is refused; it never panics.
func FuzzParseReceipt(f *testing.F) {
	for _, s := range []string{"", "0.0.x", "3.17.AbC-_", "-1.0.x", "1..x", "1.2.", "99999999999999999999.1.x", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseReceipt(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, r.queue, 0)
		require.GreaterOrEqual(t, r.offset, int64(0))
		require.NotEmpty(t, r.pop)
		r2, err := parseReceipt(r.String())
		require.NoError(t, err)
		require.Equal(t, r, r2)
	})
}

// TestBackoffIsTheClientsExponential: backoff(attempt) is what the client
// computes from the settings, and the default push invisible time covers
// the whole FIFO retry budget.
func TestBackoffIsTheClientsExponential(t *testing.T) {
	o := Options{}.withDefaults()
	var got []float64
	for a := 1; a <= 6; a++ {
		got = append(got, o.backoff(a).Seconds())
	}
	require.Equal(t, []float64{1, 2, 4, 8, 10, 10}, got)
	require.Equal(t, 125.0, o.retryBudget().Seconds()) // 1+2+4+8+10×11
	require.Greater(t, o.PushInvisible, o.retryBudget())
}

// FuzzParseRecallHandle: any string either decodes into a handle, or is
// refused; it never panics, and every handle the server makes decodes back
// to what was put in.
func FuzzParseRecallHandle(f *testing.F) {
	f.Add("", "t", "b", int64(0), "id")
	f.Add("djEgdCBiIDEgaWQ=", "topic", "broker-a", int64(1764547200000), "0A0B0C")
	f.Add("djEgdCBiIDEgaWQ", "a", "b", int64(-5), "x y")
	f.Add("v1 t b 1 id", "", "", int64(1), "")
	f.Fuzz(func(t *testing.T, s, topic, broker string, due int64, id string) {
		_, _ = parseRecallHandle(s)
		if topic == "" || broker == "" || id == "" || due < 0 || due == 1<<63-1 ||
			strings.Contains(topic+broker+id, " ") {
			return
		}
		h, err := parseRecallHandle(recallHandle(topic, broker, due, id))
		require.NoError(t, err)
		require.Equal(t, parsedRecall{topic: topic, broker: broker, id: id, dueMS: due}, h)
	})
}
