package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func postRaw(t *testing.T, c *apiClient, path string, body []byte) (int, apiError) {
	t.Helper()
	resp, err := c.hc.Post(c.base+path, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var ae apiError
	if resp.StatusCode != http.StatusOK {
		require.NoError(t, json.Unmarshal(raw, &ae), "error answers are JSON: %s", raw)
	}
	return resp.StatusCode, ae
}

// TestBadInputIsRejectedWithTheFieldNamedAndNothingStored sends requests a
// careless or hostile client could send. Each must be a 400 naming the
// field, and none may store anything or crash the server.
func TestBadInputIsRejectedWithTheFieldNamedAndNothingStored(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	cases := []struct {
		name, path, body, field string
	}{
		{"empty body", "/v1/messages", ``, "body"},
		{"not json", "/v1/messages", `hello`, "body"},
		{"truncated json", "/v1/messages", `{"topic":"t"`, "body"},
		{"two objects", "/v1/messages", `{"topic":"t","body":"x"}{}`, "body"},
		{"unknown field", "/v1/messages", `{"topic":"t","body":"x","colour":"red"}`, "colour"},
		{"wrong type", "/v1/messages", `{"topic":"t","body":"x","queueId":"zero"}`, "queueId"},
		{"no topic", "/v1/messages", `{"body":"x"}`, "topic"},
		{"bad topic chars", "/v1/messages", `{"topic":"a b","body":"x"}`, "topic"},
		{"reserved topic", "/v1/messages", `{"topic":"SCHEDULE_TOPIC_XXXX","body":"x"}`, "topic"},
		{"dead-letter topic", "/v1/messages", `{"topic":"%DLQ%g","body":"x"}`, "topic"},
		{"retry topic", "/v1/messages", `{"topic":"%RETRY%g","body":"x"}`, "topic"},
		{"half topic", "/v1/messages", `{"topic":"RMQ_SYS_TRANS_HALF_TOPIC","body":"x"}`, "topic"},
		{"template topic", "/v1/messages", `{"topic":"TBW102","body":"x"}`, "topic"},
		{"topic over 127", "/v1/messages", `{"topic":"` + strings.Repeat("t", 128) + `","body":"x","delayLevel":1}`, "topic"},
		{"reserved topic in batch", "/v1/messages/batch", `{"messages":[{"topic":"t","body":"x"},{"topic":"%DLQ%g","body":"x"}]}`, "messages[1].topic"},
		{"pop bad group", "/v1/pop", `{"group":"g.h","topic":"t","clientId":"c"}`, "group"},
		{"negative queue", "/v1/messages", `{"topic":"t","queueId":-1,"body":"x"}`, "queueId"},
		{"huge queue", "/v1/messages", `{"topic":"t","queueId":99999999,"body":"x"}`, "queueId"},
		{"empty body field", "/v1/messages", `{"topic":"t"}`, "body"},
		{"body and base64", "/v1/messages", `{"topic":"t","body":"x","bodyBase64":"eA=="}`, "bodyBase64"},
		{"bad base64", "/v1/messages", `{"topic":"t","bodyBase64":"!!"}`, "bodyBase64"},
		{"empty key", "/v1/messages", `{"topic":"t","body":"x","keys":[""]}`, "keys[0]"},
		{"delay level too high", "/v1/messages", `{"topic":"t","body":"x","delayLevel":99}`, "delayLevel"},
		{"negative delay level", "/v1/messages", `{"topic":"t","body":"x","delayLevel":-1}`, "delayLevel"},
		{"empty batch", "/v1/messages/batch", `{"messages":[]}`, "messages"},
		{"bad message in batch", "/v1/messages/batch", `{"messages":[{"topic":"t","body":"x"},{"topic":"t"}]}`, "messages[1].body"},
		{"pop without group", "/v1/pop", `{"topic":"t","clientId":"c"}`, "group"},
		{"pop without client", "/v1/pop", `{"group":"g","topic":"t"}`, "clientId"},
		{"pop max too big", "/v1/pop", `{"group":"g","topic":"t","clientId":"c","max":33}`, "max"},
		{"pop bad invisible", "/v1/pop", `{"group":"g","topic":"t","clientId":"c","invisible":"soon"}`, "invisible"},
		{"pop zero invisible", "/v1/pop", `{"group":"g","topic":"t","clientId":"c","invisible":"0s"}`, "invisible"},
		{"pop poll too long", "/v1/pop", `{"group":"g","topic":"t","clientId":"c","poll":"1h"}`, "poll"},
		{"pop negative queue", "/v1/pop", `{"group":"g","topic":"t","clientId":"c","queueId":-5}`, "queueId"},
		{"pop bad filter", "/v1/pop", `{"group":"g","topic":"t","clientId":"c","filter":"a || || b"}`, "filter"},
		{"attemptId without fifo", "/v1/pop", `{"group":"g","topic":"t","clientId":"c","attemptId":"a"}`, "attemptId"},
		{"ack without handle", "/v1/ack", `{}`, "handle"},
		{"ack both", "/v1/ack", `{"handle":"h","handles":["h"]}`, "handles"},
		{"ack empty list", "/v1/ack", `{"handles":[]}`, "handles"},
		{"ack empty handle in list", "/v1/ack", `{"handles":["h",""]}`, "handles[1]"},
		{"change without invisible", "/v1/change-invisible", `{"handle":"h"}`, "invisible"},
		{"change negative", "/v1/change-invisible", `{"handle":"h","invisible":"-1s"}`, "invisible"},
		{"lock without queue", "/v1/lock", `{"group":"g","clientId":"c"}`, "queue"},
		{"lock bad queue topic", "/v1/lock", `{"group":"g","clientId":"c","queue":{"topic":""}}`, "queue.topic"},
		{"lock-batch empty", "/v1/lock-batch", `{"group":"g","clientId":"c","queues":[]}`, "queues"},
		{"unlock without client", "/v1/unlock", `{"group":"g","queue":{"topic":"t"}}`, "clientId"},
		{"heartbeat without group", "/v1/heartbeat", `{"clientId":"c"}`, "group"},
		{"heartbeat bad subscription", "/v1/heartbeat", `{"group":"g","clientId":"c","subscriptions":[{"topic":""}]}`, "subscriptions[0].topic"},
		{"unregister without client", "/v1/unregister", `{"group":"g"}`, "clientId"},
		{"commit negative offset", "/v1/offsets/commit", `{"group":"g","topic":"t","offset":-1}`, "offset"},
		{"reset neither", "/v1/offsets/reset", `{"group":"g","topic":"t"}`, "offset"},
		{"reset both", "/v1/offsets/reset", `{"group":"g","topic":"t","offset":0,"time":"2026-01-01T00:00:00Z"}`, "time"},
		{"reset bad time", "/v1/offsets/reset", `{"group":"g","topic":"t","time":"yesterday"}`, "time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, ae := postRaw(t, c, tc.path, []byte(tc.body))
			assert.Equal(t, http.StatusBadRequest, status, "%+v", ae)
			assert.Equal(t, tc.field, ae.Field, "%+v", ae)
			assert.Equal(t, "bad_request", ae.Code)
			assert.True(t, strings.HasPrefix(ae.Message, tc.field+":"), "message names the field: %q", ae.Message)
		})
	}
	// Query-string endpoints name their parameter too.
	var off offsetOut
	err := c.call(t.Context(), "GET", "/v1/offsets?group=g&topic=t&queueId=x", nil, &off)
	var ae *apiError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "queueId", ae.Field)

	// Nothing of all that reached the log.
	assert.Empty(t, tb.b.store.Topics())
}

// TestOversizedBodyIs413AndTheBrokerStaysUp rules out a client pushing an
// unbounded body into memory.
func TestOversizedBodyIs413AndTheBrokerStaysUp(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	big := `{"topic":"t","body":"` + strings.Repeat("x", DefaultMaxBody) + `"}`
	status, ae := postRaw(t, c, "/v1/messages", []byte(big))
	assert.Equal(t, http.StatusRequestEntityTooLarge, status)
	assert.Equal(t, "body", ae.Field)
	assert.Equal(t, "body_too_large", ae.Code)

	var p produced
	require.NoError(t, c.call(t.Context(), "POST", "/v1/messages", messageIn{Topic: "t", Body: ptr("small")}, &p))
	assert.Equal(t, int64(0), *p.QueueOffset)
}

// TestUnknownAndForgedHandlesAre404AndStaleOnes409 checks the handle error
// mapping the API promises.
func TestUnknownAndForgedHandlesAre404AndStaleOnes409(t *testing.T) {
	tb := startBroker(t, t.TempDir(), newFakeClock())
	c, _ := tb.client(t)
	ctx := t.Context()
	var ae *apiError

	err := c.call(ctx, "POST", "/v1/ack", ackIn{Handle: "not-a-handle"}, nil)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusNotFound, ae.Status)
	assert.Equal(t, "bad_handle", ae.Code)

	require.NoError(t, c.call(ctx, "POST", "/v1/messages", messageIn{Topic: "t", Body: ptr("x")}, nil))
	var res popOut
	require.NoError(t, c.call(ctx, "POST", "/v1/pop", popIn{Group: "g", Topic: "t", ClientID: "c", Poll: "5s"}, &res))
	require.Len(t, res.Messages, 1)
	h := res.Messages[0].Handle

	// A forged handle: the real one with a character changed.
	forged := []byte(h)
	forged[len(forged)/2] ^= 1
	err = c.call(ctx, "POST", "/v1/ack", ackIn{Handle: string(forged)}, nil)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusNotFound, ae.Status, "forged handle: %+v", ae)

	require.NoError(t, c.call(ctx, "POST", "/v1/ack", ackIn{Handle: h}, nil))
	err = c.call(ctx, "POST", "/v1/ack", ackIn{Handle: h}, nil)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusConflict, ae.Status)
	assert.Equal(t, "stale_handle", ae.Code)

	err = c.call(ctx, "POST", "/v1/change-invisible", changeIn{Handle: h, Invisible: "10s"}, nil)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusConflict, ae.Status)

	err = c.call(ctx, "GET", "/v1/nothing-here", nil, nil)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusNotFound, ae.Status)
	assert.Equal(t, "not_found", ae.Code)
}
