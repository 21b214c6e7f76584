package broker_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

func TestUnknownCodeIsNotSupportedAndConnectionStays(t *testing.T) {
	b := rmqtest.Start(t)
	for _, addr := range []string{b.Broker, b.NameSrv} {
		rc := dial(t, addr)
		resp := rc.call(req(999, nil, nil))
		require.Equal(t, wire.RequestCodeNotSupported, resp.Code)
		require.Contains(t, resp.Remark, "999")
		resp = rc.call(req(wire.CodeGetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil))
		if addr == b.NameSrv {
			require.Equal(t, wire.Success, resp.Code)
		}
	}
}

func TestRouteIsCompactWithTBW102AndBrokerIDZero(t *testing.T) {
	b := rmqtest.StartConfig(t, server.Config{NoAutoCreate: true})
	rc := dial(t, b.NameSrv)
	resp := rc.call(req(wire.CodeGetRouteInfoByTopic, map[string]string{"topic": "nope"}, nil))
	require.Equal(t, wire.TopicNotExist, resp.Code)
	resp = rc.call(req(wire.CodeGetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil))
	require.Equal(t, wire.Success, resp.Code)
	require.NotContains(t, string(resp.Body), " ")
	require.Contains(t, string(resp.Body), `"brokerAddrs":{"0":"`+b.Broker+`"}`)
	require.Contains(t, string(resp.Body), `"perm":6`)
	// The first send through TBW102 creates the topic; its route is there at once.
	br := dial(t, b.Broker)
	require.Equal(t, wire.Success, br.call(sendReq("created", 1, "x")).Code)
	resp = rc.call(req(wire.CodeGetRouteInfoByTopic, map[string]string{"topic": "created"}, nil))
	require.Equal(t, wire.Success, resp.Code)
	require.Contains(t, string(resp.Body), `"writeQueueNums":4`)
}

// forEachFlush runs f against a broker under flush=sync (sends served on
// their own goroutines) and flush=async (sends served inline on the read
// loop).
func forEachFlush(t *testing.T, f func(t *testing.T, b *rmqtest.Broker)) {
	for _, flush := range []string{"sync", "async"} {
		t.Run("flush="+flush, func(t *testing.T) { f(t, rmqtest.StartConfig(t, server.Config{Flush: flush})) })
	}
}

func TestBadInputGetsAnErrorAndStoresNothing(t *testing.T) {
	forEachFlush(t, testBadInput)
}

func testBadInput(t *testing.T, b *rmqtest.Broker) {
	rc := dial(t, b.Broker)
	cases := []struct {
		name   string
		cmd    *wire.Command
		code   int16
		remark string
	}{
		{"missing extFields", req(wire.CodeSendMessage, nil, []byte("x")), wire.SystemError, "missing extFields"},
		{"bad topic", sendReq("a b", 0, "x"), wire.SystemError, "topic name"},
		{"long topic", sendReq(strings.Repeat("t", 128), 0, "x"), wire.SystemError, "at most 127"},
		{"negative queue", sendReq("t", -1, "x"), wire.SystemError, "queueId=-1"},
		{"queue out of range", sendReq("t", 4, "x"), wire.SystemError, "illegal"},
		{"huge queue", req(wire.CodeSendMessage, map[string]string{"topic": "t", "queueId": "99999999999999999999"}, nil), wire.SystemError, "not an integer"},
		{"bad delay", func() *wire.Command {
			c := sendReq("t", 0, "x")
			c.ExtFields["properties"] = "DELAY\x01soon\x02"
			return c
		}(), wire.MessageIllegal, "DELAY"},
		{"props too long", func() *wire.Command {
			c := sendReq("t", 0, "x")
			c.ExtFields["properties"] = "K\x01" + strings.Repeat("v", 40000) + "\x02"
			return c
		}(), wire.MessageIllegal, "properties"},
		{"oversize body", sendReq("t", 0, strings.Repeat("b", 4<<20+1)), wire.MessageIllegal, "append"},
		{"bad batch", req(wire.CodeSendBatchMessage, map[string]string{"b": "t", "e": "0"}, []byte{0, 0, 0, 9}), wire.MessageIllegal, "batch"},
		{"pull negative offset", req(wire.CodePullMessage, map[string]string{"consumerGroup": "g", "topic": "t",
			"queueId": "0", "queueOffset": "-5", "maxMsgNums": "32"}, nil), wire.SystemError, "queueOffset=-5"},
		{"pull bad group", req(wire.CodePullMessage, map[string]string{"consumerGroup": "g/../x", "topic": "t",
			"queueId": "0", "queueOffset": "0", "maxMsgNums": "32"}, nil), wire.SystemError, "group name"},
		{"heartbeat not json", req(wire.CodeHeartbeat, nil, []byte("{")), wire.SystemError, "heartbeat"},
		{"lock not json", req(wire.CodeLockBatchMQ, nil, []byte("[")), wire.SystemError, "lock body"},
		{"update offset huge", req(wire.CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "t",
			"queueId": "0", "commitOffset": "12345"}, nil), wire.SystemError, "beyond"},
		{"send back unknown offset", req(wire.CodeConsumerSendMsgBack, map[string]string{"group": "g", "offset": "77"}, nil), wire.SystemError, "log offset 77"},
	}
	for _, c := range cases {
		resp := rc.call(c.cmd)
		require.Equal(t, c.code, resp.Code, c.name)
		require.Contains(t, resp.Remark, c.remark, c.name)
	}
	require.Zero(t, b.Server.Core().Store().Stats().Messages, "nothing stored")
	// A header that is not JSON: answered with the salvaged opaque, the
	// connection is kept.
	rc.writeRaw(jsonFrame(`{"code":10,"opaque":77,`))
	resp, err := rc.read(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, wire.SystemError, resp.Code)
	require.Equal(t, int32(77), resp.Opaque)
	require.Contains(t, resp.Remark, "JSON")
	require.Equal(t, wire.Success, rc.call(sendReq("t", 0, "ok")).Code)
	require.Equal(t, uint64(1), b.Server.Core().Store().Stats().Messages)
}

func TestOversizeFrameClosesOnlyThatConnection(t *testing.T) {
	b := rmqtest.Start(t)
	bad, good := dial(t, b.Broker), dial(t, b.Broker)
	bad.writeRaw([]byte{0x7f, 0xff, 0xff, 0xff})
	_, err := bad.read(5 * time.Second)
	require.Error(t, err, "connection closed")
	require.Equal(t, wire.Success, good.call(sendReq("t", 0, "ok")).Code)
}

func TestOnewayGetsNoAnswer(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	ow := req(999, nil, nil)
	ow.Flag = wire.FlagOneway
	rc.send(ow)
	resp := rc.call(req(wire.CodeGetMaxOffset, map[string]string{"topic": "t", "queueId": "0"}, nil))
	require.Equal(t, "0", resp.ExtFields["offset"])
}

func pullReq(topic, offset, suspendMs string) *wire.Command {
	return req(wire.CodePullMessage, map[string]string{"consumerGroup": "g", "topic": topic, "queueId": "0",
		"queueOffset": offset, "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
		"suspendTimeoutMillis": suspendMs, "subscription": "*"}, nil)
}

func TestLongPollDoesNotHoldUpOtherRequestsAndWakesOnArrival(t *testing.T) {
	forEachFlush(t, testLongPoll)
}

func testLongPoll(t *testing.T, b *rmqtest.Broker) {
	rc := dial(t, b.Broker)
	require.Equal(t, wire.Success, rc.call(sendReq("t", 0, "first")).Code)
	pullOp := rc.send(pullReq("t", "1", "20000"))
	// Other requests on the same connection are answered meanwhile.
	start := time.Now()
	sendOp := rc.send(sendReq("t", 0, "second"))
	var gotPull, gotSend bool
	for !gotPull || !gotSend {
		resp, err := rc.read(5 * time.Second)
		require.NoError(t, err)
		switch resp.Opaque {
		case sendOp:
			gotSend = true
			require.Equal(t, wire.Success, resp.Code)
		case pullOp:
			gotPull = true
			require.Equal(t, wire.Success, resp.Code, resp.Remark)
			require.Equal(t, "2", resp.ExtFields["nextBeginOffset"])
			require.Contains(t, string(resp.Body), "second")
		}
	}
	require.Less(t, time.Since(start), 5*time.Second, "woken by the arrival, not the timeout")
}

func TestPullAtEndAnswersNotFoundAfterSuspend(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	require.Equal(t, wire.Success, rc.call(sendReq("t", 0, "x")).Code)
	resp := rc.call(pullReq("t", "1", "50"))
	require.Equal(t, wire.PullNotFound, resp.Code)
	require.Equal(t, "1", resp.ExtFields["nextBeginOffset"])
	resp = rc.call(pullReq("t", "9", "50"))
	require.Equal(t, wire.PullOffsetMoved, resp.Code)
	require.Equal(t, "1", resp.ExtFields["nextBeginOffset"])
}

func TestQueryOffsetNotFoundThenCommitted(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	q := req(wire.CodeQueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "t", "queueId": "0"}, nil)
	require.Equal(t, wire.QueryNotFound, rc.call(q).Code)
	require.Equal(t, wire.Success, rc.call(sendReq("t", 0, "x")).Code)
	require.Equal(t, wire.Success, rc.call(req(wire.CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "g",
		"topic": "t", "queueId": "0", "commitOffset": "1"}, nil)).Code)
	resp := rc.call(q)
	require.Equal(t, wire.Success, resp.Code)
	require.Equal(t, "1", resp.ExtFields["offset"])
}

func TestHeartbeatRegistersAndCreatesRetryTopic(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	hb := `{"clientID":"10.0.0.1@x","producerDataSet":[],"consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY",` +
		`"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"topic":"t","subString":"a || b","expressionType":"TAG","subVersion":1}],"unitMode":false}]}`
	require.Equal(t, wire.Success, rc.call(req(wire.CodeHeartbeat, nil, []byte(hb))).Code)
	n, ok := b.Server.Topics().Queues("%RETRY%g")
	require.True(t, ok)
	require.Equal(t, 1, n)
	resp := rc.call(req(wire.CodeGetConsumerListByGroup, map[string]string{"consumerGroup": "g"}, nil))
	var list struct {
		IDs []string `json:"consumerIdList"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &list))
	require.Equal(t, []string{"10.0.0.1@x"}, list.IDs)
	require.NotEmpty(t, rc.notices, "the member set changed: NOTIFY_CONSUMER_IDS_CHANGED")
	require.Equal(t, wire.CodeNotifyConsumerIdsChanged, rc.notices[0].Code)
	require.True(t, rc.notices[0].IsOneway())
	require.Equal(t, "g", rc.notices[0].ExtFields["consumerGroup"])
	// Tag filter from the heartbeat's subscription.
	for _, tag := range []string{"a", "c", "b"} {
		s := sendReq("t", 0, "tag-"+tag)
		s.ExtFields["properties"] = "TAGS\x01" + tag + "\x02"
		require.Equal(t, wire.Success, rc.call(s).Code)
	}
	p := pullReq("t", "0", "0")
	p.ExtFields["sysFlag"] = "0"
	resp = rc.call(p)
	require.Equal(t, wire.Success, resp.Code)
	require.Contains(t, string(resp.Body), "tag-a")
	require.Contains(t, string(resp.Body), "tag-b")
	require.NotContains(t, string(resp.Body), "tag-c")
	require.Equal(t, "3", resp.ExtFields["nextBeginOffset"])
	// Connection close removes the member at once.
	rc.c.Close()
	require.Eventually(t, func() bool { return len(b.Server.Core().Consumers().Clients("g")) == 0 }, 5*time.Second, 10*time.Millisecond)
}

func TestTimerPropertyGoesThroughSchedulerTimers(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	s := sendReq("timed", 0, "soon")
	s.ExtFields["properties"] = "UNIQ_KEY\x01u1\x02TIMER_DELAY_MS\x01300\x02"
	start := time.Now()
	require.Equal(t, wire.Success, rc.call(s).Code)
	// Not delivered at once: before 300 ms have passed (on a slow machine
	// they may have, and then nothing can be said here).
	if off := b.Server.Core().Store().MaxOffset("timed", 0); time.Since(start) < 300*time.Millisecond {
		require.Zero(t, off, "not delivered at once")
	}
	require.Eventually(t, func() bool { return b.Server.Core().Store().MaxOffset("timed", 0) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	bad := sendReq("timed", 0, "x")
	bad.ExtFields["properties"] = "TIMER_DELIVER_MS\x01later\x02"
	resp := rc.call(bad)
	require.Equal(t, wire.MessageIllegal, resp.Code)
	require.Contains(t, resp.Remark, "TIMER_DELIVER_MS")
}

func TestSendBackToRetryThenDeadLetterPastMaxReconsumeTimes(t *testing.T) {
	b := rmqtest.StartConfig(t, server.Config{DelayLevels: strings.TrimSpace(strings.Repeat("1s ", 18))})
	rc := dial(t, b.Broker)
	st := b.Server.Core().Store()
	require.NoError(t, st.Append(&store.Message{Topic: "t", Body: []byte("fresh"), Properties: map[string]string{"UNIQ_KEY": "u1"}}))
	require.NoError(t, st.Append(&store.Message{Topic: "t", Body: []byte("tired"), ReconsumeTimes: 3, Properties: map[string]string{"UNIQ_KEY": "u2"}}))
	back := func(logOff, max string) *wire.Command {
		return rc.call(req(wire.CodeConsumerSendMsgBack, map[string]string{"group": "g", "offset": logOff, "delayLevel": "0",
			"originMsgId": "u", "originTopic": "t", "maxReconsumeTimes": max}, nil))
	}
	require.Equal(t, wire.Success, back("0", "16").Code)
	require.Equal(t, wire.Success, back("1", "3").Code, "reconsume times 3 of at most 3: dead letter")
	dlq, err := st.Read("%DLQ%g", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, dlq, 1)
	require.Equal(t, "tired", string(dlq[0].Body))
	require.Equal(t, "t", dlq[0].Properties["RETRY_TOPIC"])
	// The retry copy waits in the scheduler (level 3), then lands in %RETRY%g.
	require.Zero(t, st.MaxOffset("%RETRY%g", 0))
	require.Eventually(t, func() bool { return st.MaxOffset("%RETRY%g", 0) == 1 }, 10*time.Second, 10*time.Millisecond)
	retry, err := st.Read("%RETRY%g", 0, 0, 10)
	require.NoError(t, err)
	require.Equal(t, "fresh", string(retry[0].Body))
	require.Equal(t, 1, retry[0].ReconsumeTimes)
	require.Equal(t, "t", retry[0].Properties["RETRY_TOPIC"])
	require.Equal(t, "u", retry[0].Properties["ORIGIN_MESSAGE_ID"])
	require.Equal(t, "u1", retry[0].Properties["UNIQ_KEY"])
	_, ok := b.Server.Topics().Queues("%DLQ%g")
	require.True(t, ok, "the dead-letter topic routes")
}

func TestLockBatchHoldsRenewsAndRefusesOthers(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	body := func(client string) []byte {
		return []byte(`{"consumerGroup":"g","clientId":"` + client + `","mqSet":[{"topic":"t","brokerName":"broker-a","queueId":0},{"topic":"t","brokerName":"broker-a","queueId":1}]}`)
	}
	var out struct {
		MQs []struct {
			QueueID int `json:"queueId"`
		} `json:"lockOKMQSet"`
	}
	resp := rc.call(req(wire.CodeLockBatchMQ, nil, body("A")))
	require.NoError(t, json.Unmarshal(resp.Body, &out))
	require.Len(t, out.MQs, 2)
	resp = rc.call(req(wire.CodeLockBatchMQ, nil, body("B")))
	out.MQs = nil
	require.NoError(t, json.Unmarshal(resp.Body, &out))
	require.Empty(t, out.MQs, "held by A")
	require.Equal(t, wire.Success, rc.call(req(wire.CodeUnlockBatchMQ, nil, body("A"))).Code)
	resp = rc.call(req(wire.CodeLockBatchMQ, nil, body("B")))
	require.NoError(t, json.Unmarshal(resp.Body, &out))
	require.Len(t, out.MQs, 2, "free after A's unlock")
}

func TestLogLinesForConnectionsAndRejectedRequests(t *testing.T) {
	var buf logBuffer
	b := rmqtest.StartConfig(t, server.Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	rc := dial(t, b.Broker)
	rc.call(sendReq("bad topic", 0, "x"))
	rc.c.Close()
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), "connection closed") }, 5*time.Second, 10*time.Millisecond)
	out := buf.String()
	require.Contains(t, out, `msg="connection opened" server=broker client=127.0.0.1:`)
	require.Contains(t, out, `msg="rejected request" server=broker code=10 response=1 client=127.0.0.1:`)
	require.Contains(t, out, `topic="bad topic"`)
	require.Contains(t, out, `msg="connection closed" server=broker client=127.0.0.1:`)
}

// An admin reset wakes a parked long poll with PULL_OFFSET_MOVED to the
// reset offset; the connection's commits are refused until it reads the
// offset again, so its old position cannot overwrite the reset — across
// repeated resets too.
func TestResetFencesConnectionUntilItQueriesAgain(t *testing.T) {
	b := rmqtest.Start(t)
	rc := dial(t, b.Broker)
	for i := 0; i < 10; i++ {
		require.Equal(t, wire.Success, rc.call(sendReq("t", 0, "m")).Code)
	}
	query := req(wire.CodeQueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "t", "queueId": "0"}, nil)
	commit := func(off string) *wire.Command {
		return rc.call(req(wire.CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "t",
			"queueId": "0", "commitOffset": off}, nil))
	}
	rc.call(query)
	require.Equal(t, wire.Success, commit("10").Code)
	offs := b.Server.Core().Offsets()
	for round, to := range []int64{3, 5} {
		op := rc.send(pullReq("t", "10", "20000")) // parked at the end
		time.Sleep(50 * time.Millisecond)
		code, body := postReset(t, b.Metrics, to)
		require.Equal(t, 200, code, body)
		resp, err := rc.read(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, op, resp.Opaque)
		require.Equal(t, wire.PullOffsetMoved, resp.Code, "round %d", round)
		require.Equal(t, i64s(to), resp.ExtFields["nextBeginOffset"])
		// The stale position is refused, in an update and riding in a pull.
		require.Equal(t, wire.SystemError, commit("10").Code)
		p := pullReq("t", "10", "0")
		p.ExtFields["sysFlag"] = "1"
		p.ExtFields["commitOffset"] = "10"
		require.Equal(t, wire.PullOffsetMoved, rc.call(p).Code)
		got, _ := offs.Committed("g", "t", 0)
		require.Equal(t, to, got, "the reset stands")
		// Reading the offset again brings the connection up to date.
		resp = rc.call(query)
		require.Equal(t, i64s(to), resp.ExtFields["offset"])
		require.Equal(t, wire.Success, commit(i64s(to+1)).Code)
		got, _ = offs.Committed("g", "t", 0)
		require.Equal(t, to+1, got)
		require.Equal(t, wire.Success, commit("10").Code)
	}
	require.Equal(t, uint64(4), b.Server.Broker().Stats().StaleCommits)
}

func i64s(n int64) string { return strconv.FormatInt(n, 10) }

func postReset(t *testing.T, metrics string, to int64) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+metrics+"/admin/reset?group=g&topic=t&queue=0&offset="+i64s(to), "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A client that unlocks (Shutdown) and then disconnects releases every lease
// it still has in the group — also the queues it gave up at a rebalance
// without unlocking; one that just disconnects releases nothing.
func TestUnlockThenCloseReleasesAllLeasesButADropReleasesNone(t *testing.T) {
	b := rmqtest.Start(t)
	_, err := b.Server.Topics().Ensure("t", 4)
	require.NoError(t, err)
	hb := func(client string) []byte {
		return []byte(`{"clientID":"` + client + `","consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY",` +
			`"messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"t","subString":"*","subVersion":1}]}]}`)
	}
	mq := func(client string, qs ...int) []byte {
		s := `{"consumerGroup":"g","clientId":"` + client + `","mqSet":[`
		for i, q := range qs {
			if i > 0 {
				s += ","
			}
			s += `{"topic":"t","brokerName":"broker-a","queueId":` + strconv.Itoa(q) + `}`
		}
		return []byte(s + "]}")
	}
	held := func(client string) int {
		n := 0
		for q := 0; q < 4; q++ {
			if l, ok := b.Server.Core().Locks().Holder("g", lock.Queue{Topic: "t", Broker: "broker-a", QueueID: q}); ok && l.ClientID == client {
				n++
			}
		}
		return n
	}
	other := dial(t, b.Broker) // keeps the group alive
	other.call(req(wire.CodeHeartbeat, nil, hb("B")))

	graceful := dial(t, b.Broker)
	graceful.call(req(wire.CodeHeartbeat, nil, hb("A")))
	graceful.call(req(wire.CodeLockBatchMQ, nil, mq("A", 0, 1, 2, 3)))
	require.Equal(t, 4, held("A"))
	graceful.call(req(wire.CodeUnlockBatchMQ, nil, mq("A", 0))) // it holds only queue 0 by now
	require.Equal(t, 3, held("A"))
	graceful.c.Close()
	require.Eventually(t, func() bool { return held("A") == 0 }, 5*time.Second, 10*time.Millisecond)

	crashed := dial(t, b.Broker)
	crashed.call(req(wire.CodeHeartbeat, nil, hb("C")))
	crashed.call(req(wire.CodeLockBatchMQ, nil, mq("C", 0, 1)))
	crashed.c.Close()
	require.Eventually(t, func() bool { return len(b.Server.Core().Consumers().Clients("g")) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 2, held("C"), "expiry governs after a drop")
}

// logBuffer is an io.Writer for a slog handler that the test reads back
// while the broker still logs from other goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
