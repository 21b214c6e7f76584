package meta

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCreateTopicHeaderWithApachesChecksAndCodes(t *testing.T) {
	c, err := ParseCreateTopic(map[string]string{"topic": "orders", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "attributes": "+message.type=FIFO"}, nil)
	require.NoError(t, err)
	require.Equal(t, Topic{TopicName: "orders", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6, TopicFilterType: "SINGLE_TAG",
		Attributes: map[string]string{"message.type": "FIFO"}}, c)
	require.Equal(t, "FIFO", c.MessageType())
	changed, err := ParseCreateTopic(map[string]string{"topic": "orders", "attributes": "-message.type"}, &c)
	require.NoError(t, err)
	require.Empty(t, changed.MessageType(), "an update may remove the attribute")
	for _, tc := range []struct {
		ext  map[string]string
		code int16
	}{
		{map[string]string{"topic": ""}, CodeInvalidParameter},
		{map[string]string{"topic": "a b"}, CodeInvalidParameter},
		{map[string]string{"topic": "TBW102"}, CodeInvalidParameter},
		{map[string]string{"topic": "SCHEDULE_TOPIC_XXXX"}, CodeInvalidParameter},
		{map[string]string{"topic": "t", "readQueueNums": "0"}, CodeInvalidParameter},
		{map[string]string{"topic": "t", "writeQueueNums": "x"}, CodeInvalidParameter},
		{map[string]string{"topic": "t", "perm": "9"}, CodeInvalidParameter},
		{map[string]string{"topic": "t", "attributes": "+message.type=MIXED"}, CodeInvalidParameter},
		{map[string]string{"topic": "t", "attributes": "+message.type=WEIRD"}, CodeSystemError},
		{map[string]string{"topic": "t", "attributes": "+color=red"}, CodeSystemError},
		{map[string]string{"topic": "t", "attributes": "-message.type"}, CodeSystemError},
		{map[string]string{"topic": "t", "attributes": "message.type=FIFO"}, CodeSystemError},
	} {
		_, err := ParseCreateTopic(tc.ext, nil)
		var r *Refusal
		require.True(t, errors.As(err, &r), "%v: %v", tc.ext, err)
		require.Equal(t, tc.code, r.Code, "%v: %s", tc.ext, r.Remark)
		require.NotEmpty(t, r.Remark)
		require.ErrorIs(t, err, ErrInvalid)
	}
}

func TestTopicsPersistAndAnswerTheConfigTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics-config.json")
	tt, err := OpenTopics(path)
	require.NoError(t, err)
	c, err := ParseCreateTopic(map[string]string{"topic": "orders", "readQueueNums": "2", "writeQueueNums": "2", "attributes": "+message.type=DELAY"}, nil)
	require.NoError(t, err)
	require.NoError(t, tt.Put(c))
	t2, err := OpenTopics(path)
	require.NoError(t, err)
	require.Equal(t, "DELAY", t2.MessageType("orders"))
	var w struct {
		TopicConfigTable map[string]Topic
	}
	require.NoError(t, json.Unmarshal(t2.WrapperJSON([]string{"orders", "plain"}, func(string) int { return 4 }), &w))
	require.Equal(t, 2, w.TopicConfigTable["orders"].ReadQueueNums)
	require.Equal(t, 4, w.TopicConfigTable["plain"].WriteQueueNums)
	require.NoError(t, t2.Delete("orders"))
	t3, err := OpenTopics(path)
	require.NoError(t, err)
	_, ok := t3.Get("orders")
	require.False(t, ok)
}

// FuzzParseCreateTopic: any header is a valid topic or a Refusal.
func FuzzParseCreateTopic(f *testing.F) {
	f.Add("orders", "2", "2", "6", "+message.type=FIFO")
	f.Add("", "", "", "", "")
	f.Add("t", "-1", "99999", "x", "+,-,=")
	f.Fuzz(func(t *testing.T, topic, r, w, perm, attrs string) {
		c, err := ParseCreateTopic(map[string]string{"topic": topic, "readQueueNums": r, "writeQueueNums": w, "perm": perm, "attributes": attrs}, nil)
		if err != nil {
			var ref *Refusal
			require.True(t, errors.As(err, &ref))
			return
		}
		require.Equal(t, topic, c.TopicName)
		require.True(t, c.ReadQueueNums >= 1 && c.WriteQueueNums >= 1)
		if mt := c.MessageType(); mt != "" {
			require.True(t, messageTypes[mt])
		}
	})
}
