package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var fuzzPaths = []string{
	"/v1/messages", "/v1/messages/batch", "/v1/pop", "/v1/ack", "/v1/change-invisible",
	"/v1/lock", "/v1/lock-batch", "/v1/unlock", "/v1/heartbeat", "/v1/unregister",
	"/v1/offsets/commit", "/v1/offsets/reset",
}

// FuzzRequestBodies sends arbitrary bodies to every POST endpoint: the
// answer is always JSON and never a 5xx, and the broker never panics.
func FuzzRequestBodies(f *testing.F) {
	seeds := []string{
		`{"topic":"t","body":"x"}`,
		`{"topic":"t","body":"x","delayLevel":1}`,
		`{"messages":[{"topic":"t","body":"x"},{"topic":"t","queueId":3,"bodyBase64":"AA=="}]}`,
		`{"group":"g","topic":"t","clientId":"c","max":32,"invisible":"1s","poll":"10ms"}`,
		`{"group":"g","topic":"t","clientId":"c","queueId":0,"fifo":true,"attemptId":"a"}`,
		`{"handle":"x"}`, `{"handle":"x","invisible":"1s"}`,
		`{"group":"g","clientId":"c","queue":{"topic":"t"}}`,
		`{"group":"g","clientId":"c","queues":[{"topic":"t","queueId":1}]}`,
		`{"clientId":"c","all":true}`,
		`{"group":"g","clientId":"c","subscriptions":[{"topic":"t"}]}`,
		`{"group":"g","topic":"t","queueId":0,"offset":0}`,
		`{"group":"g","topic":"t","time":"2026-01-01T00:00:00Z"}`,
		`{"topic":"\u0000","body":"\xff"}`, `[]`, `null`, `{"queueId":1e400}`, `{"max":-1}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	b, err := newBroker(Config{DataDir: f.TempDir(), Sync: "none", MaxPoll: 20 * time.Millisecond, MaxBody: 1 << 16})
	require.NoError(f, err)
	f.Cleanup(func() { require.NoError(f, b.Close()) })
	h := b.Handler()
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := fuzzPaths[int(which)%len(fuzzPaths)]
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if rec.Code >= 500 {
			t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q: answer is not JSON: %q", path, body, rec.Body)
		}
	})
}
