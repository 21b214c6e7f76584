package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Request codes (Apache RocketMQ's RequestCode) mqadmin sends.
const (
	codeQueryMessage            int16 = 12
	codeUpdateAndCreateTopic    int16 = 17
	codeGetAllTopicConfig       int16 = 21
	codeGetBrokerRuntimeInfo    int16 = 28
	codeViewMessageByID         int16 = 33
	codeGetRouteInfoByTopic     int16 = 105
	codeGetBrokerClusterInfo    int16 = 106
	codeUpdateAndCreateSubGroup int16 = 200
	codeGetAllSubGroupConfig    int16 = 201
	codeGetTopicStatsInfo       int16 = 202
	codeGetConsumerConnList     int16 = 203
	codeGetAllTopicListFromNS   int16 = 206
	codeDeleteSubGroup          int16 = 207
	codeGetConsumeStats         int16 = 208
	codeDeleteTopicInBroker     int16 = 215
	codeDeleteTopicInNamesrv    int16 = 216
	codeInvokeBrokerResetOffset int16 = 222
)

// masterID is the broker id of a master in brokerAddrs.
const masterID = "0"

// Apache's retry topic prefix: a group's route is its retry topic's.
const retryPrefix = "%RETRY%"

type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSysFlag   int    `json:"topicSysFlag"`
}

type brokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}

type routeData struct {
	OrderTopicConf string       `json:"orderTopicConf,omitempty"`
	QueueDatas     []queueData  `json:"queueDatas"`
	BrokerDatas    []brokerData `json:"brokerDatas"`
}

type clusterInfo struct {
	BrokerAddrTable  map[string]brokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
}

// messageQueue is a table key of Apache's stats bodies.
type messageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

// mqTable decodes a fastjson table keyed by message queue into sorted
// entries (topic, broker, queue).
func mqTable[V any](raw map[string]V) ([]messageQueue, map[messageQueue]V, error) {
	keys := make([]messageQueue, 0, len(raw))
	out := make(map[messageQueue]V, len(raw))
	for k, v := range raw {
		var mq messageQueue
		if err := json.Unmarshal([]byte(k), &mq); err != nil {
			return nil, nil, fmt.Errorf("%w: table key %q: %v", errJSON, k, err)
		}
		keys = append(keys, mq)
		out[mq] = v
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
	return keys, out, nil
}

// route is a topic's route from the name server.
func (e *env) route(topic string) (*routeData, error) {
	ns, err := e.needNS()
	if err != nil {
		return nil, err
	}
	resp, err := e.cli.invoke(ns, codeGetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	if err != nil {
		return nil, err
	}
	var rd routeData
	if err := decodeJSON(resp.Body, &rd); err != nil {
		return nil, fmt.Errorf("route of %s: %w", topic, err)
	}
	return &rd, nil
}

// clusterInfo is the name server's cluster table.
func (e *env) clusterInfo() (*clusterInfo, error) {
	ns, err := e.needNS()
	if err != nil {
		return nil, err
	}
	resp, err := e.cli.invoke(ns, codeGetBrokerClusterInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	var ci clusterInfo
	if err := decodeJSON(resp.Body, &ci); err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	return &ci, nil
}

// masters are the master addresses of a cluster's brokers, sorted.
func (e *env) masters(cluster string) ([]string, error) {
	ci, err := e.clusterInfo()
	if err != nil {
		return nil, err
	}
	names, ok := ci.ClusterAddrTable[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster [%s] not exist", cluster)
	}
	var out []string
	for _, n := range names {
		if a := ci.BrokerAddrTable[n].BrokerAddrs[masterID]; a != "" {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out, nil
}

// targets are the broker addresses a command goes to: -b, or the masters
// of -c.
func (e *env) targets(broker, cluster string) ([]string, error) {
	switch {
	case broker != "":
		return []string{broker}, nil
	case cluster != "":
		return e.masters(cluster)
	}
	return nil, usage("give -b brokerAddr or -c clusterName")
}

// routeMasters are the master addresses (with their broker names) a
// topic's route names.
func routeMasters(rd *routeData) (addrs, names []string) {
	bds := append([]brokerData(nil), rd.BrokerDatas...)
	sort.Slice(bds, func(i, j int) bool { return bds[i].BrokerName < bds[j].BrokerName })
	for _, bd := range bds {
		if a := bd.BrokerAddrs[masterID]; a != "" {
			addrs, names = append(addrs, a), append(names, bd.BrokerName)
		}
	}
	return addrs, names
}

// javaMap prints a map as Java's toString does: {k1=v1, k2=v2}.
func javaMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, errA := strconv.Atoi(keys[i])
		b, errB := strconv.Atoi(keys[j])
		if errA == nil && errB == nil {
			return a < b
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// frontStringAtLeast is Apache's UtilAll.frontStringAtLeast: s cut to n.
func frontStringAtLeast(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
