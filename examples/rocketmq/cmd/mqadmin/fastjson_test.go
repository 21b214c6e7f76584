package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

func TestNormalizeJSONReadsFastjsonKeys(t *testing.T) {
	var v struct {
		Addrs map[string]string         `json:"addrs"`
		Table map[string]map[string]int `json:"table"`
	}
	require.NoError(t, decodeJSON([]byte(`{"addrs":{0:"a:1", 1 : "b:2"},"table":{{"topic":"t","queueId":3}:{"x":1},{"topic":"t","queueId":4}:{"x":2}}}`), &v))
	require.Equal(t, map[string]string{"0": "a:1", "1": "b:2"}, v.Addrs)
	keys, table, err := mqTable(v.Table)
	require.NoError(t, err)
	require.Equal(t, []messageQueue{{Topic: "t", QueueID: 3}, {Topic: "t", QueueID: 4}}, keys)
	require.Equal(t, 2, table[keys[1]]["x"])
	for _, bad := range []string{`{`, `{"a":}`, `{0:}`, `[1,2`, `"x`, `{{"a":1}`} {
		require.Error(t, decodeJSON([]byte(bad), &v), bad)
	}
}

// FuzzNormalizeJSON: any input is refused or becomes valid JSON; standard
// JSON comes out meaning the same.
func FuzzNormalizeJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{0:"a"}`, `{{"t":1}:2}`, `{"a":[1,{"b":null}],"c":"\"}"}`, `[{0:{1:2}}]`, `{"k":{{"x":[1]}:{"y":{2:3}}}}`, `1`, `"s"`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := normalizeJSON(in)
		if err != nil {
			return
		}
		require.True(t, json.Valid(out), "%q -> %q", in, out)
		if json.Valid(in) {
			var a, b any
			require.NoError(t, json.Unmarshal(in, &a))
			require.NoError(t, json.Unmarshal(out, &b))
			require.Equal(t, a, b)
		}
	})
}

// TestTopicRouteAgainstTheRunningBroker: the program's name server answers
// mqadmin's route lookup (the example broker started in-process).
func TestTopicRouteAgainstTheRunningBroker(t *testing.T) {
	b := rmqtest.Start(t)
	code, out, errOut := mqadmin("topicRoute", "-n", b.NameSrv, "-t", "cli-topic")
	require.Equal(t, exitOK, code, errOut)
	var rd routeData
	require.NoError(t, json.Unmarshal([]byte(out), &rd), out)
	require.Len(t, rd.BrokerDatas, 1)
	require.Equal(t, b.Broker, rd.BrokerDatas[0].BrokerAddrs[masterID])
	code, out, _ = mqadmin("topicRoute", "-n", b.NameSrv, "-t", "cli-topic", "-l")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "{0="+b.Broker+"}")
}
