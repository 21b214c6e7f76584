package meta

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// Store is what the stats bodies read of the log: *store.Store satisfies
// it (StoredAt comes from reading the queue's last message).
type Store interface {
	MinOffset(topic string, queueID int) int64
	MaxOffset(topic string, queueID int) int64
	Queues(topic string) []int
}

// LastStored reports when the message before offset in a queue was
// stored, in Unix ms (0 = unknown): the broker reads it from the log.
type LastStored func(topic string, queueID int, offset int64) int64

// Offsets is what the consume stats read of the committed offsets:
// *offset.Manager satisfies it.
type Offsets interface {
	Committed(group, topic string, queueID int) (int64, bool)
	Topics(group string) []string
}

// Queue is a message queue as Apache's tables key them.
type Queue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

// queueTable writes a table keyed by message queue as Apache's fastjson
// does — each key a JSON object — which every RocketMQ tool reads (it is
// not standard JSON: encoding/json cannot write it).
func queueTable[V any](keys []Queue, val func(Queue) V) []byte {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].QueueID < keys[j].QueueID
	})
	b := []byte{'{'}
	for i, q := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(q)
		v, _ := json.Marshal(val(q))
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}')
}

// TopicOffset is a queue's entry of a TopicStatsTable.
type TopicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// TopicStatsBody is the GET_TOPIC_STATS_INFO body of topic with queues
// 0..queues-1 on broker: Apache's TopicStatsTable.
func TopicStatsBody(st Store, last LastStored, broker, topic string, queues int) []byte {
	keys := make([]Queue, queues)
	for i := range keys {
		keys[i] = Queue{Topic: topic, BrokerName: broker, QueueID: i}
	}
	table := queueTable(keys, func(q Queue) TopicOffset {
		max := st.MaxOffset(topic, q.QueueID)
		o := TopicOffset{MinOffset: st.MinOffset(topic, q.QueueID), MaxOffset: max}
		if max > 0 && last != nil {
			o.LastUpdateTimestamp = last(topic, q.QueueID, max)
		}
		return o
	})
	return append(append([]byte(`{"offsetTable":`), table...), `,"topicPutTps":0.0}`...)
}

// OffsetWrapper is a queue's entry of a ConsumeStats.
type OffsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	PullOffset     int64 `json:"pullOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

// ConsumeStatsBody is the GET_CONSUME_STATS body of group (over topic, or
// every topic it committed on when topic is ""): Apache's ConsumeStats.
// queues gives a topic's queue count. ok is false when the group has no
// offset on any topic asked (Apache answers CONSUMER_NOT_ONLINE then).
func ConsumeStatsBody(st Store, offs Offsets, last LastStored, broker, group, topic string, queues func(string) int) (body []byte, ok bool) {
	topics := []string{topic}
	if topic == "" {
		topics = offs.Topics(group)
	}
	var keys []Queue
	vals := map[Queue]OffsetWrapper{}
	for _, t := range topics {
		n := queues(t)
		for q := range n {
			committed, had := offs.Committed(group, t, q)
			if !had {
				continue
			}
			key := Queue{Topic: t, BrokerName: broker, QueueID: q}
			w := OffsetWrapper{BrokerOffset: st.MaxOffset(t, q), ConsumerOffset: committed, PullOffset: committed}
			if committed > 0 && last != nil {
				w.LastTimestamp = last(t, q, committed)
			}
			keys = append(keys, key)
			vals[key] = w
		}
	}
	if len(keys) == 0 {
		return nil, false
	}
	table := queueTable(keys, func(q Queue) OffsetWrapper { return vals[q] })
	return append(append([]byte(`{"consumeTps":0.0,"offsetTable":`), table...), '}'), true
}

// ResetOffsetBody is the INVOKE_BROKER_TO_RESET_OFFSET answer: Apache's
// ResetOffsetBody, the offset each queue was reset to.
func ResetOffsetBody(broker, topic string, offsets map[int]int64) []byte {
	keys := make([]Queue, 0, len(offsets))
	for q := range offsets {
		keys = append(keys, Queue{Topic: topic, BrokerName: broker, QueueID: q})
	}
	table := queueTable(keys, func(q Queue) int64 { return offsets[q.QueueID] })
	return append(append([]byte(`{"offsetTable":`), table...), '}')
}

// TopicListBody is the GET_ALL_TOPIC_LIST_FROM_NAMESERVER body: Apache's
// TopicList.
func TopicListBody(topics []string) []byte {
	sorted := append([]string(nil), topics...)
	sort.Strings(sorted)
	b, _ := json.Marshal(struct {
		TopicList  []string `json:"topicList"`
		BrokerAddr string   `json:"brokerAddr,omitempty"`
	}{TopicList: sorted})
	return b
}

// ClusterInfoBody is the GET_BROKER_CLUSTER_INFO body of one cluster of
// one broker (master id 0): Apache's ClusterInfo.
func ClusterInfoBody(cluster, broker, addr string) []byte {
	b, _ := json.Marshal(map[string]any{
		"brokerAddrTable": map[string]any{broker: map[string]any{
			"cluster": cluster, "brokerName": broker, "brokerAddrs": map[string]string{"0": addr}, "enableActingMaster": false}},
		"clusterAddrTable": map[string][]string{cluster: {broker}},
	})
	return b
}

// KVTableBody is a GET_BROKER_RUNTIME_INFO body: Apache's KVTable.
func KVTableBody(kv map[string]string) []byte {
	b, _ := json.Marshal(map[string]map[string]string{"table": kv})
	return b
}

// itoa is strconv.Itoa (kept short for the handlers' remarks).
func itoa(n int) string { return strconv.Itoa(n) }

// JavaDouble formats f as Java's Double.toString does for the magnitudes
// of rates and counts (plain decimal, always a decimal point), as Apache's
// answers and tools print them.
func JavaDouble(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
