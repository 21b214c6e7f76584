//go:build !race

package e2e

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/store"
)

// e2eACL: "app" publishes and consumes orders* in group workers, except
// orders-audit (Deny over Allow); "reader" consumes orders in group
// readers only.
const e2eACL = `{
  "users": [
    {"accessKey": "app", "secretKey": "s3cret"},
    {"accessKey": "reader", "secretKey": "r3ad"},
    {"accessKey": "admin", "secretKey": "adm1n", "superUser": true}
  ],
  "rules": [
    {"user": "app", "resources": ["Topic:orders*", "Group:workers"], "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"user": "app", "resources": ["Topic:orders-audit"], "actions": ["All"], "decision": "Deny"},
    {"user": "reader", "resources": ["Topic:orders", "Group:readers"], "actions": ["Sub"], "decision": "Allow"}
  ]
}`

// aclBroker starts a broker with the ACL file at path (written from doc).
func aclBroker(t *testing.T, doc string, opts acl.Options) (*rmqtest.Broker, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	az, err := acl.Open(path, opts)
	require.NoError(t, err)
	return rmqtest.StartConfig(t, server.Config{ACL: az}), path
}

func creds(ak, sk string) primitive.Credentials {
	return primitive.Credentials{AccessKey: ak, SecretKey: sk}
}

func trySend(p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("x")))
	return err
}

func TestACLV2ClientAllowedAndRefused(t *testing.T) {
	b, _ := aclBroker(t, e2eACL, acl.Options{})

	p := newProducer(t, b.NameSrv, producer.WithCredentials(creds("app", "s3cret")))
	for i := 0; i < 3; i++ {
		sendSync(t, p, primitive.NewMessage("orders", []byte("hello")))
	}

	got := newSeen()
	c := newPushConsumer(t, b.NameSrv, "workers", consumer.WithCredentials(creds("app", "s3cret")))
	require.NoError(t, c.Subscribe("orders", consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got.add(m.MsgId)
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
	got.waitUnique(t, 3, 30*time.Second)

	for name, opt := range map[string]producer.Option{
		"wrong secret":   producer.WithCredentials(creds("app", "guess")),
		"unknown key":    producer.WithCredentials(creds("ghost", "s3cret")),
		"no credentials": producer.WithCredentials(primitive.Credentials{}),
		"sub-only user":  producer.WithCredentials(creds("reader", "r3ad")),
	} {
		bad := newProducer(t, b.NameSrv, opt, producer.WithRetry(0))
		err := trySend(bad, "orders")
		assert.Error(t, err, name)
		t.Logf("%s: %v", name, err)
	}
	for _, topic := range []string{"payroll", "orders-audit"} {
		err := trySend(p, topic)
		t.Logf("%s: %v", topic, err)
		assert.Error(t, err, "app may not publish to %s", topic)
		assert.Zero(t, stored(b, topic), "nothing stored in %s", topic)
	}
	assert.EqualValues(t, 3, stored(b, "orders"), "only the allowed sends were stored")
}

// rawClient speaks remoting to the broker, signing like the v2 client.
type rawClient struct {
	t      *testing.T
	nc     net.Conn
	r      *bufio.Reader
	opaque atomic.Int32
}

func dialRaw(t *testing.T, addr string) *rawClient {
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	return &rawClient{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// call sends code with ext (signed with ak/sk unless ak is "") and returns
// the answer.
func (c *rawClient) call(code int16, ext map[string]string, body []byte, ak, sk string) *wire.Command {
	c.t.Helper()
	if ak != "" {
		ext[acl.FieldAccessKey] = ak
		ext[acl.FieldSignature] = acl.SignRemoting(sk, ext, body)
	}
	req := &wire.Command{Code: code, Language: "GO", Version: 317, Opaque: c.opaque.Add(1), ExtFields: ext, Body: body}
	frame, err := wire.Encode(req)
	require.NoError(c.t, err)
	require.NoError(c.t, c.nc.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = c.nc.Write(frame)
	require.NoError(c.t, err)
	for {
		f, err := wire.ReadFrame(c.r, wire.DefaultMaxFrame)
		require.NoError(c.t, err)
		resp, err := wire.Decode(f)
		require.NoError(c.t, err)
		if resp.IsResponse() && resp.Opaque == req.Opaque {
			return resp
		}
	}
}

func TestACLRemotingConsumerMayOnlyTouchItsOwnGroup(t *testing.T) {
	b, _ := aclBroker(t, e2eACL, acl.Options{})
	p := newProducer(t, b.NameSrv, producer.WithCredentials(creds("app", "s3cret")))
	sendSync(t, p, primitive.NewMessage("orders", []byte("hello")))
	rc := dialRaw(t, b.Broker)
	offs := b.Server.Core().Offsets()

	pull := func(group string) map[string]string {
		return map[string]string{"consumerGroup": group, "topic": "orders", "queueId": "0", "queueOffset": "0",
			"maxMsgNums": "32", "sysFlag": "1", "commitOffset": "1", "suspendTimeoutMillis": "0", "subscription": "*"}
	}
	for name, c := range map[string]struct {
		code   int16
		ext    map[string]string
		body   string
		ak, sk string
	}{
		"pull of another group":     {wire.CodePullMessage, pull("workers"), "", "reader", "r3ad"},
		"pull without signature":    {wire.CodePullMessage, pull("workers"), "", "", ""},
		"pull with a wrong secret":  {wire.CodePullMessage, pull("readers"), "", "reader", "guess"},
		"offset of another group":   {wire.CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "workers", "topic": "orders", "queueId": "0", "commitOffset": "1"}, "", "reader", "r3ad"},
		"query another group":       {wire.CodeQueryConsumerOffset, map[string]string{"consumerGroup": "workers", "topic": "orders", "queueId": "0"}, "", "reader", "r3ad"},
		"lock another group":        {wire.CodeLockBatchMQ, map[string]string{}, `{"consumerGroup":"workers","clientId":"x","mqSet":[{"topic":"orders","brokerName":"b","queueId":0}]}`, "reader", "r3ad"},
		"unlock another group":      {wire.CodeUnlockBatchMQ, map[string]string{}, `{"consumerGroup":"workers","clientId":"x","mqSet":[{"topic":"orders","brokerName":"b","queueId":0}]}`, "reader", "r3ad"},
		"lock a topic not allowed":  {wire.CodeLockBatchMQ, map[string]string{}, `{"consumerGroup":"readers","clientId":"x","mqSet":[{"topic":"payroll","brokerName":"b","queueId":0}]}`, "reader", "r3ad"},
		"send back for other group": {wire.CodeConsumerSendMsgBack, map[string]string{"group": "workers", "offset": "0", "delayLevel": "0", "maxReconsumeTimes": "16"}, "", "reader", "r3ad"},
		"pull another group's retries": {wire.CodePullMessage, map[string]string{"consumerGroup": "readers", "topic": "%RETRY%workers", "queueId": "0", "queueOffset": "0",
			"maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*"}, "", "reader", "r3ad"},
		"heartbeat into another group": {wire.CodeHeartbeat, map[string]string{}, `{"clientID":"x","producerDataSet":[],"consumerDataSet":[{"groupName":"workers","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"topic":"orders","subString":"*"}],"unitMode":false}]}`, "reader", "r3ad"},
		"members of another group":     {wire.CodeGetConsumerListByGroup, map[string]string{"consumerGroup": "workers"}, "", "reader", "r3ad"},
	} {
		resp := rc.call(c.code, c.ext, []byte(c.body), c.ak, c.sk)
		assert.Equal(t, wire.NoPermission, resp.Code, "%s: %s", name, resp.Remark)
		assert.NotEmpty(t, resp.Remark, name)
	}
	_, ok := offs.Committed("workers", "orders", 0)
	assert.False(t, ok, "no refused request committed an offset")
	assert.Zero(t, stored(b, "%RETRY%workers"), "no refused send-back stored a retry")
	assert.Empty(t, b.Server.Core().Consumers().Clients("workers"), "no refused heartbeat registered a member")

	// A send-back names its message by log offset only: app may send back
	// into its own group, but not a message of a topic it may not read.
	foreign := &store.Message{Topic: "payroll", Body: []byte("salaries")}
	require.NoError(t, b.Server.Core().Store().Append(foreign))
	resp := rc.call(wire.CodeConsumerSendMsgBack, map[string]string{"group": "workers", "offset": strconv.FormatInt(foreign.LogOffset, 10),
		"delayLevel": "0", "maxReconsumeTimes": "16", "originTopic": "orders"}, nil, "app", "s3cret")
	assert.Equal(t, wire.NoPermission, resp.Code, resp.Remark)
	assert.Zero(t, stored(b, "%RETRY%workers"))

	resp = rc.call(wire.CodePullMessage, pull("readers"), nil, "reader", "r3ad")
	assert.Contains(t, []int16{wire.Success, wire.PullNotFound}, resp.Code, "its own group: served (%d %s)", resp.Code, resp.Remark)
}

func TestACLReloadTakesEffectWithoutRestart(t *testing.T) {
	b, path := aclBroker(t, e2eACL, acl.Options{})
	p := newProducer(t, b.NameSrv, producer.WithCredentials(creds("app", "s3cret")), producer.WithRetry(0))
	sendSync(t, p, primitive.NewMessage("orders", []byte("1")))

	denied := strings.Replace(e2eACL, `"resources": ["Topic:orders-audit"]`, `"resources": ["Topic:orders-audit", "Topic:orders"]`, 1)
	require.NoError(t, os.WriteFile(path, []byte(denied), 0o600))
	require.NoError(t, b.Server.ACL().ReloadFile(path))
	assert.Error(t, trySend(p, "orders"), "the Deny rule of the reloaded file applies at once")
	assert.EqualValues(t, 1, stored(b, "orders"))

	require.NoError(t, os.WriteFile(path, []byte("{broken"), 0o600))
	assert.Error(t, b.Server.ACL().ReloadFile(path))
	assert.Error(t, trySend(p, "orders"), "a bad file keeps the rules in force")

	require.NoError(t, os.WriteFile(path, []byte(e2eACL), 0o600))
	require.NoError(t, b.Server.ACL().ReloadFile(path))
	require.NoError(t, trySend(p, "orders"))
}

func TestACLAdminEndpointRefusesWithoutItsCredential(t *testing.T) {
	b, _ := aclBroker(t, e2eACL, acl.Options{})
	p := newProducer(t, b.NameSrv, producer.WithCredentials(creds("app", "s3cret")))
	sendSync(t, p, primitive.NewMessage("orders", []byte("1")))
	u := "http://" + b.Metrics + "/admin/reset?group=workers&topic=orders&offset=1"
	resp, err := http.Post(u, "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	_, ok := b.Server.Core().Offsets().Committed("workers", "orders", 0)
	assert.False(t, ok)
	req, _ := http.NewRequest(http.MethodPost, u, nil)
	req.SetBasicAuth("admin", "adm1n")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestACLRemotingRefusesWithNoPermissionAndStoresNothing(t *testing.T) {
	b, _ := aclBroker(t, e2eACL, acl.Options{})
	ns, br := dialRaw(t, b.NameSrv), dialRaw(t, b.Broker)
	route := func(topic string) map[string]string { return map[string]string{"topic": topic} }
	send := func(topic string) map[string]string {
		return map[string]string{"producerGroup": "pg", "topic": topic, "queueId": "0", "sysFlag": "0",
			"bornTimestamp": "1700000000000", "flag": "0", "properties": "UNIQ_KEY\x01AC110001000000000000000000000001\x02",
			"reconsumeTimes": "0", "unitMode": "false", "batch": "false", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4"}
	}
	for name, c := range map[string]struct {
		conn   *rawClient
		code   int16
		ext    map[string]string
		ak, sk string
	}{
		"route without signature":      {ns, wire.CodeGetRouteInfoByTopic, route("orders"), "", ""},
		"route with a wrong secret":    {ns, wire.CodeGetRouteInfoByTopic, route("orders"), "app", "guess"},
		"route by an unknown key":      {ns, wire.CodeGetRouteInfoByTopic, route("orders"), "ghost", "s3cret"},
		"route of a topic not allowed": {ns, wire.CodeGetRouteInfoByTopic, route("payroll"), "app", "s3cret"},
		"send without signature":       {br, wire.CodeSendMessage, send("orders"), "", ""},
		"send with a wrong secret":     {br, wire.CodeSendMessage, send("orders"), "app", "guess"},
		"send by an unknown key":       {br, wire.CodeSendMessage, send("orders"), "ghost", "s3cret"},
		"send outside the rules":       {br, wire.CodeSendMessage, send("payroll"), "app", "s3cret"},
		"send denied over allowed":     {br, wire.CodeSendMessage, send("orders-audit"), "app", "s3cret"},
		"send by a sub-only user":      {br, wire.CodeSendMessage, send("orders"), "reader", "r3ad"},
	} {
		resp := c.conn.call(c.code, c.ext, []byte("body"), c.ak, c.sk)
		assert.Equal(t, wire.NoPermission, resp.Code, "%s: %s", name, resp.Remark)
		assert.NotEmpty(t, resp.Remark, name)
	}
	for _, topic := range []string{"orders", "payroll", "orders-audit"} {
		assert.Zero(t, stored(b, topic), topic)
		_, exists := b.Server.Topics().Queues(topic)
		assert.False(t, exists, "no refused request created %s", topic)
	}
	resp := br.call(wire.CodeSendMessage, send("orders"), []byte("body"), "app", "s3cret")
	assert.Equal(t, wire.Success, resp.Code, resp.Remark)
	assert.EqualValues(t, 1, stored(b, "orders"))
}

// burst writes every request in one write (so an async-flush broker serves
// them as one batch) and returns the answers by request.
func (c *rawClient) burst(reqs []*wire.Command) []*wire.Command {
	c.t.Helper()
	var buf []byte
	for _, r := range reqs {
		r.Opaque = c.opaque.Add(1)
		f, err := wire.Encode(r)
		require.NoError(c.t, err)
		buf = append(buf, f...)
	}
	require.NoError(c.t, c.nc.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := c.nc.Write(buf)
	require.NoError(c.t, err)
	byOpaque := map[int32]*wire.Command{}
	for len(byOpaque) < len(reqs) {
		f, err := wire.ReadFrame(c.r, wire.DefaultMaxFrame)
		require.NoError(c.t, err)
		resp, err := wire.Decode(f)
		require.NoError(c.t, err)
		if resp.IsResponse() {
			byOpaque[resp.Opaque] = resp
		}
	}
	out := make([]*wire.Command, len(reqs))
	for i, r := range reqs {
		out[i] = byOpaque[r.Opaque]
	}
	return out
}

func TestACLRefusesInsideABatchOfSends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(path, []byte(e2eACL), 0o600))
	az, err := acl.Open(path, acl.Options{})
	require.NoError(t, err)
	b := rmqtest.StartConfig(t, server.Config{ACL: az, Flush: "async"})
	rc := dialRaw(t, b.Broker)
	req := func(topic, ak, sk string) *wire.Command {
		ext := map[string]string{"producerGroup": "pg", "topic": topic, "queueId": "0", "sysFlag": "0",
			"bornTimestamp": "1700000000000", "flag": "0", "properties": "", "reconsumeTimes": "0",
			"defaultTopic": "TBW102", "defaultTopicQueueNums": "4", acl.FieldAccessKey: ak}
		body := []byte("body")
		ext[acl.FieldSignature] = acl.SignRemoting(sk, ext, body)
		return &wire.Command{Code: wire.CodeSendMessage, Language: "GO", Version: 317, ExtFields: ext, Body: body}
	}
	resps := rc.burst([]*wire.Command{
		req("orders", "app", "s3cret"), req("orders", "app", "guess"), req("orders-audit", "app", "s3cret"),
		req("orders", "app", "s3cret"),
	})
	codes := make([]int16, len(resps))
	for i, r := range resps {
		codes[i] = r.Code
	}
	assert.Equal(t, []int16{wire.Success, wire.NoPermission, wire.NoPermission, wire.Success}, codes)
	assert.EqualValues(t, 2, stored(b, "orders"))
	assert.Zero(t, stored(b, "orders-audit"))
}
