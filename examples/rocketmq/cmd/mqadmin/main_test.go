package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeApache answers as Apache RocketMQ's name server and broker do, in
// fastjson's spelling (bare numeric keys, message queues as object keys),
// and records what it was asked.
type fakeApache struct {
	mu    sync.Mutex
	reqs  []*wire.Command
	addr  string
	srv   *transport.Server
	topic map[string]int // topic → queues
}

func startFake(t *testing.T) *fakeApache {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeApache{addr: ln.Addr().String(), topic: map[string]int{"orders": 2}}
	f.srv = transport.NewServer(f, transport.ServerOptions{})
	done := make(chan struct{})
	go func() { defer close(done); _ = f.srv.Serve(ln) }()
	t.Cleanup(func() { _ = f.srv.Close(); <-done })
	return f
}

func (f *fakeApache) asked(code int16) []*wire.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*wire.Command
	for _, r := range f.reqs {
		if r.Code == code {
			out = append(out, r)
		}
	}
	return out
}

const mqKey = `{"brokerName":"broker-a","queueId":%d,"topic":"%s"}`

func (f *fakeApache) Serve(_ context.Context, _ *transport.Conn, req *wire.Command) *wire.Command {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	ok := func(body string) *wire.Command {
		r := wire.NewResponse(req, wire.Success, "")
		r.Body = []byte(body)
		return r
	}
	switch req.Code {
	case codeGetRouteInfoByTopic:
		n, found := f.topic[req.ExtFields["topic"]]
		if !found && !strings.HasPrefix(req.ExtFields["topic"], retryPrefix) {
			return wire.NewResponse(req, wire.TopicNotExist, "No topic route info in name server for the topic: "+req.ExtFields["topic"])
		}
		if n == 0 {
			n = 1
		}
		return ok(`{"brokerDatas":[{"brokerAddrs":{0:"` + f.addr + `"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":` + itoa(n) + `,"topicSysFlag":0,"writeQueueNums":` + itoa(n) + `}]}`)
	case codeGetBrokerClusterInfo:
		return ok(`{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"` + f.addr + `"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}`)
	case codeGetAllTopicListFromNS:
		return ok(`{"topicList":["orders","%RETRY%billing","TBW102"]}`)
	case codeUpdateAndCreateTopic:
		if req.ExtFields["readQueueNums"] == "0" {
			return wire.NewResponse(req, wire.SystemError, "readQueueNums must be > 0")
		}
		return ok("")
	case codeDeleteTopicInBroker, codeDeleteTopicInNamesrv, codeUpdateAndCreateSubGroup:
		return ok("")
	case codeDeleteSubGroup:
		return ok("")
	case codeGetTopicStatsInfo:
		return ok(`{"offsetTable":{` + sprintf(mqKey, 1, "orders") + `:{"lastUpdateTimestamp":1764547200000,"maxOffset":7,"minOffset":2},` + sprintf(mqKey, 0, "orders") + `:{"lastUpdateTimestamp":0,"maxOffset":5,"minOffset":0}},"topicPutTps":0.0}`)
	case codeGetConsumeStats:
		return ok(`{"consumeTps":1.5,"offsetTable":{` + sprintf(mqKey, 0, "orders") + `:{"brokerOffset":5,"consumerOffset":3,"lastTimestamp":0,"pullOffset":4}}}`)
	case codeGetConsumerConnList:
		return ok(`{"connectionSet":[{"clientAddr":"127.0.0.1:50000","clientId":"10.0.0.1@1234","language":"JAVA","version":503}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":{"orders":{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"orders"}}}`)
	case codeInvokeBrokerResetOffset:
		return ok(`{"offsetTable":{` + sprintf(mqKey, 0, "orders") + `:3,` + sprintf(mqKey, 1, "orders") + `:4}}`)
	case codeGetBrokerRuntimeInfo:
		return ok(`{"table":{"brokerVersionDesc":"V5_3_1","putTps":"12.5 10.0 9.0","getTransferredTps":"3.0 2.0 1.0","brokerActive":"true","commitLogDiskRatio":"0.25","pageCacheLockTimeMills":"0","sendThreadPoolQueueSize":"0","sendThreadPoolQueueHeadWaitTimeMills":"0","pullThreadPoolQueueSize":"0","pullThreadPoolQueueHeadWaitTimeMills":"0"}}`)
	case codeQueryMessage:
		if k := req.ExtFields["key"]; k != "k1" && k != "7F00000100002A9F0000000000000001" {
			return wire.NewResponse(req, codeQueryNotFound, "can not find message, maybe time range not correct")
		}
		m := &store.Message{Topic: "orders", QueueID: 1, QueueOffset: 9, LogOffset: 42, Keys: []string{"k1"}, Body: []byte("hello"),
			Properties: map[string]string{"UNIQ_KEY": "7F00000100002A9F0000000000000001", "KEYS": "k1"}, BornAt: time.UnixMilli(1764547200000), StoredAt: time.UnixMilli(1764547200001)}
		return ok(string(wire.EncodeMessage(nil, m, wire.HostBytes(f.addr))))
	}
	return wire.NewResponse(req, wire.RequestCodeNotSupported, "request type "+itoa(int(req.Code))+" not supported")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func sprintf(format string, a ...any) string { return strings.TrimSpace(fmtSprintf(format, a...)) }

// mqadmin runs the program and returns its exit code and output.
func mqadmin(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUpdateTopicSendsApachesHeaderToEveryMasterOfTheCluster(t *testing.T) {
	f := startFake(t)
	code, out, errOut := mqadmin("updateTopic", "-n", f.addr, "-c", "DefaultCluster", "-t", "fifo-orders", "-r", "2", "-w", "2", "-a", "+message.type=FIFO")
	require.Equal(t, exitOK, code, errOut)
	reqs := f.asked(codeUpdateAndCreateTopic)
	require.Len(t, reqs, 1)
	ext := reqs[0].ExtFields
	assert.Equal(t, "fifo-orders", ext["topic"])
	assert.Equal(t, "2", ext["readQueueNums"])
	assert.Equal(t, "2", ext["writeQueueNums"])
	assert.Equal(t, "6", ext["perm"])
	assert.Equal(t, "+message.type=FIFO", ext["attributes"])
	assert.Equal(t, "TBW102", ext["defaultTopic"])
	assert.Equal(t, "create topic to "+f.addr+" success.\nTopicConfig [topicName=fifo-orders, readQueueNums=2, writeQueueNums=2, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={+message.type=FIFO}]\n", out)

	code, _, errOut = mqadmin("updateTopic", "-n", f.addr, "-b", f.addr, "-t", "bad", "-r", "0")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errOut, "readQueueNums must be > 0", "the broker's remark is shown")
	code, _, _ = mqadmin("updateTopic", "-n", f.addr, "-t", "x")
	assert.Equal(t, exitUsage, code, "neither -b nor -c")
	code, _, _ = mqadmin("updateTopic", "-n", f.addr, "-c", "DefaultCluster", "-t", "x", "-a", "message.type=FIFO")
	assert.Equal(t, exitUsage, code, "an attribute without + or -")
	assert.Len(t, f.asked(codeUpdateAndCreateTopic), 2, "bad usage sends nothing")
}

func TestDeleteTopicDeletesFromBrokersThenNameServer(t *testing.T) {
	f := startFake(t)
	code, out, errOut := mqadmin("deleteTopic", "-n", f.addr, "-c", "DefaultCluster", "-t", "orders")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "delete topic [orders] from cluster [DefaultCluster] success.\ndelete topic [orders] from NameServer success.\n", out)
	require.Len(t, f.asked(codeDeleteTopicInBroker), 1)
	require.Len(t, f.asked(codeDeleteTopicInNamesrv), 1)
	assert.Equal(t, "orders", f.asked(codeDeleteTopicInNamesrv)[0].ExtFields["topic"])
}

func TestTopicListAndRouteAndStatusInApachesLayout(t *testing.T) {
	f := startFake(t)
	code, out, _ := mqadmin("topicList", "-n", f.addr)
	require.Equal(t, exitOK, code)
	assert.Equal(t, "orders\n%RETRY%billing\nTBW102\n", out)

	code, out, _ = mqadmin("topicList", "-n", f.addr, "-c")
	require.Equal(t, exitOK, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Equal(t, sprintf("%-20s  %-48s  %-48s", "#Cluster Name", "#Topic", "#Consumer Group"), strings.TrimSpace(lines[0]))
	assert.True(t, strings.HasPrefix(lines[1], "DefaultCluster        orders"), lines[1])

	code, out, _ = mqadmin("topicRoute", "-n", f.addr, "-t", "orders")
	require.Equal(t, exitOK, code)
	var rd routeData
	require.NoError(t, json.Unmarshal([]byte(out), &rd), out)
	assert.Equal(t, f.addr, rd.BrokerDatas[0].BrokerAddrs["0"])

	code, out, _ = mqadmin("topicRoute", "-n", f.addr, "-t", "orders", "-l")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, sprintf(routeFormat, "DefaultCluster", "broker-a", "{0="+f.addr+"}", "2", "2", "6"))
	assert.Contains(t, out, sprintf(routeFormat, "Total:", "1", "", "2", "2", ""))

	code, _, errOut := mqadmin("topicRoute", "-n", f.addr, "-t", "nope")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errOut, "code 17")

	code, out, _ = mqadmin("topicStatus", "-n", f.addr, "-t", "orders")
	require.Equal(t, exitOK, code)
	want := sprintf("%-32s  %-4s  %-20s  %-20s    %s", "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated") + "\n" +
		sprintf("%-32s  %-4d  %-20d  %-20d    %s", "broker-a", 0, 0, 5, "") + "\n" +
		sprintf("%-32s  %-4d  %-20d  %-20d    %s", "broker-a", 1, 2, 7, humanTime(1764547200000)) + "\n"
	assert.Equal(t, want, trimLines(out[:strings.Index(out, "\n\n")+1]))
	assert.Contains(t, out, "\nTopic Put TPS: 0.0\n")
}

func TestUpdateSubGroupOrderlySendsTheGroupConfig(t *testing.T) {
	f := startFake(t)
	code, out, errOut := mqadmin("updateSubGroup", "-n", f.addr, "-c", "DefaultCluster", "-g", "billing", "-o", "true", "-r", "3")
	require.Equal(t, exitOK, code, errOut)
	reqs := f.asked(codeUpdateAndCreateSubGroup)
	require.Len(t, reqs, 1)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(reqs[0].Body, &cfg))
	assert.Equal(t, "billing", cfg["groupName"])
	assert.Equal(t, true, cfg["consumeMessageOrderly"])
	assert.EqualValues(t, 3, cfg["retryMaxTimes"])
	assert.True(t, strings.HasPrefix(out, "create subscription group to "+f.addr+" success.\nSubscriptionGroupConfig [groupName=billing, consumeEnable=true"), out)

	code, out, _ = mqadmin("deleteSubGroup", "-n", f.addr, "-b", f.addr, "-g", "billing")
	require.Equal(t, exitOK, code)
	assert.Equal(t, "delete subscription group [billing] from broker ["+f.addr+"] success.\n", out)
	assert.Equal(t, "billing", f.asked(codeDeleteSubGroup)[0].ExtFields["groupName"])
}

func TestConsumerProgressConnectionAndReset(t *testing.T) {
	f := startFake(t)
	code, out, errOut := mqadmin("consumerProgress", "-n", f.addr, "-g", "billing")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, sprintf("%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s", "orders", "broker-a", 0, 5, 3, 2, 1, "N/A"))
	assert.Contains(t, out, "\nConsume TPS: 1.50\nConsume Diff Total: 2\nConsume Inflight Total: 1\n")
	assert.Equal(t, "%RETRY%billing", f.asked(codeGetRouteInfoByTopic)[0].ExtFields["topic"], "a group's brokers are its retry topic's")

	code, out, _ = mqadmin("consumerConnection", "-n", f.addr, "-g", "billing")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, sprintf("%-36s %-22s %-10s %s", "10.0.0.1@1234", "127.0.0.1:50000", "JAVA", "V503"))
	assert.Contains(t, out, sprintf("%-20s %s", "orders", "*"))
	assert.Contains(t, out, "MessageModel: CLUSTERING")

	code, out, errOut = mqadmin("resetOffsetByTime", "-n", f.addr, "-g", "billing", "-t", "orders", "-s", "1764547200000")
	require.Equal(t, exitOK, code, errOut)
	ext := f.asked(codeInvokeBrokerResetOffset)[0].ExtFields
	assert.Equal(t, map[string]string{"topic": "orders", "group": "billing", "timestamp": "1764547200000", "isForce": "true", "queueId": "-1"}, ext)
	assert.Contains(t, out, sprintf("%-40s  %-40d  %-40d", "broker-a", 1, 4))
	code, _, _ = mqadmin("resetOffsetByTime", "-n", f.addr, "-g", "billing", "-t", "orders", "-s", "yesterday")
	assert.Equal(t, exitUsage, code)
	code, _, _ = mqadmin("resetOffsetByTime", "-n", f.addr, "-g", "billing", "-t", "orders", "-s", "2026-12-01#10:00:00:000")
	assert.Equal(t, exitOK, code)
}

func TestQueryMsgByKeyAndByID(t *testing.T) {
	f := startFake(t)
	code, out, errOut := mqadmin("queryMsgByKey", "-n", f.addr, "-t", "orders", "-k", "k1")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, sprintf("%-50s %4d %40d", "7F00000100002A9F0000000000000001", 1, 9))
	code, out, _ = mqadmin("queryMsgByKey", "-n", f.addr, "-t", "orders", "-k", "none")
	require.Equal(t, exitOK, code, "QUERY_NOT_FOUND is an empty answer")
	assert.Equal(t, sprintf("%-50s %4s %40s", "#Message ID", "#QID", "#Offset")+"\n", out)

	offsetID := wire.OffsetMsgID(wire.HostBytes(f.addr), 42)
	code, out, errOut = mqadmin("queryMsgById", "-n", f.addr, "-t", "orders", "-i", "7F00000100002A9F0000000000000001")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, sprintf("%-20s %s", "OffsetID:", offsetID))
	assert.Contains(t, out, sprintf("%-20s %s", "Keys:", "[k1]"))
	assert.Contains(t, out, sprintf("%-20s %s", "Message Body:", "hello"))
	assert.Equal(t, "true", f.asked(codeQueryMessage)[2].ExtFields["_UNIQUE_KEY_QUERY"])
	code, _, _ = mqadmin("queryMsgById", "-n", f.addr, "-i", "not-an-id")
	assert.Equal(t, exitUsage, code)
}

func TestClusterListAndBrokerStatus(t *testing.T) {
	f := startFake(t)
	code, out, errOut := mqadmin("clusterList", "-n", f.addr)
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 2)
	assert.True(t, strings.HasPrefix(lines[0], sprintf("%-22s  %-22s  %-4s  %-22s", "#Cluster Name", "#Broker Name", "#BID", "#Addr")), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], sprintf("%-22s  %-22s  %-4s  %-22s", "DefaultCluster", "broker-a", "0", f.addr)), lines[1])
	assert.Contains(t, lines[1], "V5_3_1")
	assert.Contains(t, lines[1], "    12.50(0,0ms)")
	assert.True(t, strings.HasSuffix(lines[1], "      true"), lines[1])

	code, out, _ = mqadmin("brokerStatus", "-n", f.addr, "-b", f.addr)
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, sprintf("%-32s: %s", "brokerVersionDesc", "V5_3_1"))
}

func TestExitCodesScriptsCanUse(t *testing.T) {
	code, _, errOut := mqadmin("noSuchCommand")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "The sub command noSuchCommand not exist.")
	code, _, _ = mqadmin("topicList", "-n", "")
	assert.Equal(t, exitUsage, code, "no name server")
	code, _, _ = mqadmin("topicList", "-n", "127.0.0.1:1")
	assert.Equal(t, exitFail, code, "name server unreachable")
	code, out, _ := mqadmin()
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "updateSubGroup")
	code, _, _ = mqadmin("topicRoute", "-bogus")
	assert.Equal(t, exitUsage, code)
}

// trimLines removes trailing spaces of every line (Apache pads the last
// column too).
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
