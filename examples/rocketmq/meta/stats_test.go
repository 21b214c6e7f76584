package meta

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

type fakeStore map[string][2]int64 // "topic/q" → min, max

func (f fakeStore) MinOffset(t string, q int) int64 { return f[t+"/"+itoa(q)][0] }
func (f fakeStore) MaxOffset(t string, q int) int64 { return f[t+"/"+itoa(q)][1] }
func (f fakeStore) Queues(string) []int             { return []int{0, 1} }

type fakeOffsets map[string]int64 // "group/topic/q" → committed

func (f fakeOffsets) Committed(g, t string, q int) (int64, bool) {
	v, ok := f[g+"/"+t+"/"+itoa(q)]
	return v, ok
}
func (f fakeOffsets) Topics(string) []string { return []string{"orders"} }

// readTable reads a fastjson queue table back: each key is a queue
// object, each value an object without nesting or a number.
func readTable(t *testing.T, body []byte, field string) map[Queue]json.RawMessage {
	t.Helper()
	s := string(body)
	require.Contains(t, s, `"`+field+`":{`)
	out := map[Queue]json.RawMessage{}
	for _, m := range tableEntry.FindAllStringSubmatch(s, -1) {
		var q Queue
		require.NoError(t, json.Unmarshal([]byte(m[1]), &q))
		out[q] = json.RawMessage(m[2])
	}
	return out
}

var tableEntry = regexp.MustCompile(`(\{"topic":"[^"]*","brokerName":"[^"]*","queueId":\d+\}):(\{[^{}]*\}|-?\d+)`)

func TestStatsBodiesAreApachesTablesKeyedByQueue(t *testing.T) {
	st := fakeStore{"orders/0": {0, 5}, "orders/1": {2, 7}}
	last := func(string, int, int64) int64 { return 1764547200000 }
	body := TopicStatsBody(st, last, "broker-a", "orders", 2)
	tab := readTable(t, body, "offsetTable")
	require.Len(t, tab, 2)
	var o TopicOffset
	require.NoError(t, json.Unmarshal(tab[Queue{"orders", "broker-a", 1}], &o))
	require.Equal(t, TopicOffset{MinOffset: 2, MaxOffset: 7, LastUpdateTimestamp: 1764547200000}, o)

	cs, ok := ConsumeStatsBody(st, fakeOffsets{"g/orders/0": 3}, last, "broker-a", "g", "", func(string) int { return 2 })
	require.True(t, ok)
	tab = readTable(t, cs, "offsetTable")
	require.Len(t, tab, 1, "only queues with a committed offset")
	var w OffsetWrapper
	require.NoError(t, json.Unmarshal(tab[Queue{"orders", "broker-a", 0}], &w))
	require.Equal(t, OffsetWrapper{BrokerOffset: 5, ConsumerOffset: 3, PullOffset: 3, LastTimestamp: 1764547200000}, w)
	_, ok = ConsumeStatsBody(st, fakeOffsets{}, last, "broker-a", "nobody", "", func(string) int { return 2 })
	require.False(t, ok)

	reset := readTable(t, ResetOffsetBody("broker-a", "orders", map[int]int64{0: 3, 1: 4}), "offsetTable")
	require.Equal(t, json.RawMessage("4"), reset[Queue{"orders", "broker-a", 1}])
	require.JSONEq(t, `{"topicList":["a","b"]}`, string(TopicListBody([]string{"b", "a"})))
	require.JSONEq(t, `{"brokerAddrTable":{"broker-a":{"cluster":"C","brokerName":"broker-a","brokerAddrs":{"0":"h:1"},"enableActingMaster":false}},"clusterAddrTable":{"C":["broker-a"]}}`,
		string(ClusterInfoBody("C", "broker-a", "h:1")))
}
