package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/pop"
)

// rawCall sends body (nil: none) with method to path and returns the status,
// the headers and the decoded JSON answer.
func rawCall(t *testing.T, c *apiClient, method, path, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, c.base+path, rd)
	require.NoError(t, err)
	resp, err := c.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if method != http.MethodHead {
		require.NoError(t, json.Unmarshal(raw, &out), "every answer is JSON: %s", raw)
	}
	return resp.StatusCode, resp.Header, out
}

// TestWrongMethodIs405WithAllowAndUnknownPathIs404: the catch-all used to
// answer a GET of a POST endpoint with 404, as if the endpoint did not
// exist.
func TestWrongMethodIs405WithAllowAndUnknownPathIs404(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/v1/messages", "POST"},
		{"PUT", "/v1/pop", "POST"},
		{"DELETE", "/v1/lock", "GET, HEAD, POST"},
		{"POST", "/v1/stats", "GET, HEAD"},
		{"POST", "/v1/groups/billing/clients", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
	} {
		status, h, out := rawCall(t, c, tc.method, tc.path, "")
		assert.Equal(t, http.StatusMethodNotAllowed, status, "%s %s", tc.method, tc.path)
		assert.Equal(t, tc.allow, h.Get("Allow"), "%s %s", tc.method, tc.path)
		assert.Equal(t, "method_not_allowed", out["code"], "%s %s", tc.method, tc.path)
	}
	status, _, out := rawCall(t, c, "GET", "/v1/nothing-here", "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "not_found", out["code"])
}

// TestUnlockAnswersAreBooleans: unlock of one queue answered true/false,
// of several or all the number 1 in the same field.
func TestUnlockAnswersAreBooleans(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	lock := func(q int) {
		status, _, _ := rawCall(t, c, "POST", "/v1/lock", `{"group":"g","clientId":"c1","queue":{"topic":"t","queueId":`+string(rune('0'+q))+`}}`)
		require.Equal(t, http.StatusOK, status)
	}
	lock(0)
	lock(1)
	lock(2)
	for _, tc := range []struct {
		body     string
		unlocked bool
		released float64
	}{
		{`{"group":"g","clientId":"c1","queue":{"topic":"t","queueId":0}}`, true, 1},
		{`{"group":"g","clientId":"c1","queue":{"topic":"t","queueId":0}}`, false, 0},
		{`{"group":"g","clientId":"c1","queues":[{"topic":"t","queueId":0},{"topic":"t","queueId":1}]}`, true, 1},
		{`{"clientId":"c1","all":true}`, true, 1},
		{`{"clientId":"c1","all":true}`, false, 0},
	} {
		status, _, out := rawCall(t, c, "POST", "/v1/unlock", tc.body)
		require.Equal(t, http.StatusOK, status, "%v", out)
		assert.Equal(t, tc.unlocked, out["unlocked"], tc.body)
		assert.Equal(t, tc.released, out["released"], tc.body)
	}
}

// TestUnknownClientTopicAndGroupAre404: they used to answer 200 with
// zeros or an empty list, indistinguishable from a real empty answer.
func TestUnknownClientTopicAndGroupAre404(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	status, _, _ := rawCall(t, c, "POST", "/v1/messages", `{"topic":"orders","body":"x"}`)
	require.Equal(t, http.StatusOK, status)
	for _, tc := range []struct{ method, path, body, code string }{
		{"POST", "/v1/unregister", `{"group":"billing","clientId":"nobody"}`, "unknown_client"},
		{"GET", "/v1/groups/nobody/clients", "", "unknown_group"},
		{"GET", "/v1/offsets?group=billing&topic=nothing&queueId=0", "", "unknown_topic"},
		{"GET", "/v1/offsets?group=billing&topic=orders&queueId=7", "", "unknown_queue"},
		{"GET", "/v1/offsets?group=billing&topic=nothing", "", "unknown_topic"},
		{"GET", "/v1/offsets?group=nobody", "", "unknown_group"},
		{"POST", "/v1/offsets/commit", `{"group":"pull","topic":"nothing","queueId":0,"offset":0}`, "unknown_topic"},
		{"POST", "/v1/offsets/reset", `{"group":"pull","topic":"nothing","offset":0}`, "unknown_topic"},
		{"POST", "/v1/offsets/reset", `{"group":"pull","topic":"orders","queueId":3,"offset":0}`, "unknown_queue"},
	} {
		status, _, out := rawCall(t, c, tc.method, tc.path, tc.body)
		assert.Equal(t, http.StatusNotFound, status, "%s %s %s: %v", tc.method, tc.path, tc.body, out)
		assert.Equal(t, tc.code, out["code"], "%s %s %s", tc.method, tc.path, tc.body)
	}
	// A commit past the queue's end is refused like a reset past it.
	for _, path := range []string{"/v1/offsets/commit", "/v1/offsets/reset"} {
		status, _, out := rawCall(t, c, "POST", path, `{"group":"pull","topic":"orders","queueId":0,"offset":99}`)
		assert.Equal(t, http.StatusBadRequest, status, path)
		assert.Equal(t, "offset", out["field"], path)
		assert.Equal(t, "offset: queue 0 ends at 1", out["error"], path)
	}
	// Nothing of that was committed.
	status, _, _ = rawCall(t, c, "GET", "/v1/offsets?group=pull", "")
	assert.Equal(t, http.StatusNotFound, status)
}

// TestGroupOffsetsAreListed: GET /v1/offsets with only a group lists every
// queue the group committed; with a topic, every queue of the topic.
func TestGroupOffsetsAreListed(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	ctx := t.Context()
	require.NoError(t, c.call(ctx, "POST", "/v1/messages/batch", batchIn{Messages: []messageIn{
		{Topic: "a", Body: ptr("1")}, {Topic: "a", QueueID: 1, Body: ptr("2")}, {Topic: "a", QueueID: 1, Body: ptr("3")}, {Topic: "b", Body: ptr("4")},
	}}, nil))
	require.NoError(t, c.call(ctx, "POST", "/v1/offsets/commit", commitIn{Group: "pull", Topic: "a", QueueID: 1, Offset: 2}, nil))
	require.NoError(t, c.call(ctx, "POST", "/v1/offsets/commit", commitIn{Group: "pull", Topic: "b", QueueID: 0, Offset: 1}, nil))

	var all offsetsOut
	require.NoError(t, c.call(ctx, "GET", "/v1/offsets?group=pull", nil, &all))
	assert.Equal(t, "pull", all.Group)
	require.Len(t, all.Offsets, 2)
	assert.Equal(t, "a", all.Offsets[0].Topic)
	assert.Equal(t, 1, all.Offsets[0].QueueID)
	assert.Equal(t, int64(2), *all.Offsets[0].Committed)
	assert.Equal(t, int64(0), all.Offsets[0].Lag)
	assert.Equal(t, "b", all.Offsets[1].Topic)

	var topic offsetsOut
	require.NoError(t, c.call(ctx, "GET", "/v1/offsets?group=pull&topic=a", nil, &topic))
	require.Len(t, topic.Offsets, 2, "every queue of the topic")
	assert.Nil(t, topic.Offsets[0].Committed, "queue 0: never committed")
	assert.Equal(t, int64(1), topic.Offsets[0].Lag)
	assert.Equal(t, int64(2), *topic.Offsets[1].Committed)
}

var snakeKey = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// TestStatsAreSnakeCaseWithDurationsAsStrings: /v1/stats mixed PascalCase
// (the packages' Stats), camelCase (the HTTP counters) and durations as
// nanosecond numbers; the rest of the API writes durations as "30s".
func TestStatsAreSnakeCaseWithDurationsAsStrings(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	status, _, out := rawCall(t, c, "GET", "/v1/stats", "")
	require.Equal(t, http.StatusOK, status)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				assert.Regexp(t, snakeKey, k, "key at %s", path)
				walk(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[]", x)
			}
		}
	}
	walk("", out)
	sched := out["schedule"].(map[string]any)
	levels := sched["levels"].([]any)
	require.NotEmpty(t, levels)
	assert.Equal(t, "1s", levels[0].(map[string]any)["delay"])
	assert.Contains(t, out, "schedule_progress")
	assert.Equal(t, "0s", out["offset"].(map[string]any)["last_flush_duration"])
	assert.Contains(t, out["http"], "long_polls")
}

// TestInvisibleIsClampedAtBothEnds: the README said pop clamps invisible
// into 1 s–12 h, but the broker rejected "13h" with a 400 while pop clamped
// "100ms". Both clamp now, and both answers say what was applied.
func TestInvisibleIsClampedAtBothEnds(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	ctx := t.Context()
	require.NoError(t, c.call(ctx, "POST", "/v1/messages/batch", batchIn{Messages: []messageIn{
		{Topic: "t", Body: ptr("1")}, {Topic: "t", Body: ptr("2")},
	}}, nil))
	for _, tc := range []struct{ asked, applied string }{{"13h", "12h0m0s"}, {"100ms", "1s"}} {
		var res popOut
		require.NoError(t, c.call(ctx, "POST", "/v1/pop", popIn{Group: "g", Topic: "t", ClientID: "c", Invisible: tc.asked}, &res))
		require.Len(t, res.Messages, 1)
		assert.Equal(t, tc.applied, res.Invisible, tc.asked)
		assert.True(t, res.Clamped, tc.asked)

		var ch changeOut
		require.NoError(t, c.call(ctx, "POST", "/v1/change-invisible", changeIn{Handle: res.Messages[0].Handle, Invisible: tc.asked}, &ch))
		assert.Equal(t, tc.applied, ch.Invisible, tc.asked)
		assert.True(t, ch.Clamped, tc.asked)
	}
	var ch changeOut
	var res popOut
	require.NoError(t, c.call(ctx, "POST", "/v1/pop", popIn{Group: "g2", Topic: "t", ClientID: "c"}, &res))
	require.NoError(t, c.call(ctx, "POST", "/v1/change-invisible", changeIn{Handle: res.Messages[0].Handle, Invisible: "2m"}, &ch))
	assert.Equal(t, "2m0s", ch.Invisible)
	assert.False(t, ch.Clamped)
}

// TestZeroMaxIsTheLibraryDefault: max left out or 0 pops one message.
func TestZeroMaxIsTheLibraryDefault(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	ctx := t.Context()
	require.NoError(t, c.call(ctx, "POST", "/v1/messages/batch", batchIn{Messages: []messageIn{
		{Topic: "t", Body: ptr("1")}, {Topic: "t", Body: ptr("2")}, {Topic: "t", Body: ptr("3")},
	}}, nil))
	for _, body := range []string{`{"group":"g","topic":"t","clientId":"c"}`, `{"group":"g","topic":"t","clientId":"c","max":0}`} {
		status, _, out := rawCall(t, c, "POST", "/v1/pop", body)
		require.Equal(t, http.StatusOK, status, "%v", out)
		assert.Len(t, out["messages"], 1, body)
		assert.Equal(t, "1m0s", out["invisible"], "the default invisible time")
	}
}

// TestWrongLengthHandleKeyIsRefusedNotRegenerated: a handle key file of
// the wrong length used to be replaced by a new key without a word, making
// every handle in flight a forgery (404) instead of stale (409). The key
// is brokercore.Open's now (written through fsx.WriteFile: temp file,
// fsync, rename, directory fsync).
func TestWrongLengthHandleKeyIsRefusedNotRegenerated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, brokercore.HandleKeyFile)
	require.NoError(t, os.WriteFile(path, []byte("short"), 0o600))
	_, err := newBroker(Config{DataDir: dir})
	require.ErrorIs(t, err, brokercore.ErrCorrupt)
	assert.ErrorContains(t, err, path)
	assert.ErrorContains(t, err, "5 bytes, want 32")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "short", string(raw), "the file is left as it was")
}

// TestHandleKeySurvivesARestart: a handle from before a restart is stale
// (409), not forged (404), because the key is kept.
func TestHandleKeySurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	tb := startBroker(t, dir, newFakeClock())
	c, _ := tb.client(t)
	require.NoError(t, c.call(t.Context(), "POST", "/v1/messages", messageIn{Topic: "t", Body: ptr("x")}, nil))
	var res popOut
	require.NoError(t, c.call(t.Context(), "POST", "/v1/pop", popIn{Group: "g", Topic: "t", ClientID: "c"}, &res))
	require.Len(t, res.Messages, 1)
	tb.stop(t)
	raw, err := os.ReadFile(filepath.Join(dir, brokercore.HandleKeyFile))
	require.NoError(t, err)
	assert.Len(t, raw, brokercore.HandleKeySize)

	tb = startBroker(t, dir, newFakeClock())
	c, _ = tb.client(t)
	assert.Equal(t, http.StatusConflict, statusOf(t, c.call(t.Context(), "POST", "/v1/ack", ackIn{Handle: res.Messages[0].Handle}, nil)))
}

// TestDeadLettersArePoppableOverHTTP: after pop.DefaultMaxAttempts
// deliveries without an ack a message goes to topic %DLQ%<group>
// (brokercore.Open's dead-letter wiring), which is popped like any topic.
func TestDeadLettersArePoppableOverHTTP(t *testing.T) {
	clock := newFakeClock()
	tb := startBroker(t, t.TempDir(), clock)
	c, _ := tb.client(t)
	ctx := t.Context()
	require.NoError(t, c.call(ctx, "POST", "/v1/messages", messageIn{Topic: "orders", Body: ptr("poison")}, nil))
	for attempt := 1; attempt <= pop.DefaultMaxAttempts; attempt++ {
		res := c.mustPop(t, popIn{Group: "billing", Topic: "orders", ClientID: "c", Invisible: "1s"})
		require.Len(t, res.Messages, 1, "attempt %d", attempt)
		assert.Equal(t, attempt, res.Messages[0].Attempts)
		clock.Advance(2 * time.Second)
	}
	assert.Empty(t, c.mustPop(t, popIn{Group: "billing", Topic: "orders", ClientID: "c"}).Messages, "dead-lettered, not delivered again")
	dlq := brokercore.DeadLetterTopic("billing")
	require.Equal(t, "%DLQ%billing", dlq)
	res := c.mustPop(t, popIn{Group: "ops", Topic: dlq, ClientID: "c", Poll: "5s"})
	require.Len(t, res.Messages, 1)
	assert.Equal(t, "poison", *res.Messages[0].Body)
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"LastFlushDuration": "last_flush_duration", "QueueID": "queue_id", "HTTP": "http",
		"TakenOver": "taken_over", "LogMin": "log_min", "Pops": "pops", "P99Latency": "p99_latency",
	} {
		assert.Equal(t, want, snakeCase(in), in)
	}
	// A json tag wins; durations become strings; nested values too.
	type inner struct{ Wait time.Duration }
	got := statsJSON(struct {
		Tagged int `json:"my_name"`
		Skip   int `json:"-"`
		Nested []inner
	}{Tagged: 1, Nested: []inner{{Wait: 1500 * time.Millisecond}}})
	assert.Equal(t, map[string]any{"my_name": 1, "nested": []any{map[string]any{"wait": "1.5s"}}}, got)
}
