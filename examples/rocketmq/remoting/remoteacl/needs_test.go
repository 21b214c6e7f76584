package remoteacl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

func cmd(code int16, ext map[string]string, body string) *wire.Command {
	return &wire.Command{Code: code, ExtFields: ext, Body: []byte(body)}
}

func TestNeedsMapsEveryRequestToItsResources(t *testing.T) {
	topicAt := func(off int64) (string, error) {
		if off == 7 {
			return "payroll", nil
		}
		return "", errors.New("no such message")
	}
	T, G := acl.Topic, acl.Group
	cases := []struct {
		name string
		req  *wire.Command
		want []Need
	}{
		{"route", cmd(wire.CodeGetRouteInfoByTopic, map[string]string{"topic": "t"}, ""),
			[]Need{{T("t"), acl.Pub | acl.Sub | acl.Get}}},
		{"route of a retry topic is the group", cmd(wire.CodeGetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, ""),
			[]Need{{G("g"), acl.Pub | acl.Sub | acl.Get}}},
		{"send", cmd(wire.CodeSendMessage, map[string]string{"topic": "t", "producerGroup": "pg"}, ""),
			[]Need{{T("t"), acl.Pub}}},
		{"send V2 names", cmd(wire.CodeSendMessageV2, map[string]string{"b": "t", "a": "pg"}, ""),
			[]Need{{T("t"), acl.Pub}}},
		{"send naming two topics checks both", cmd(wire.CodeSendBatchMessage, map[string]string{"topic": "t", "b": "u"}, ""),
			[]Need{{T("t"), acl.Pub}, {T("u"), acl.Pub}}},
		{"send of a reply (request/reply) is a send to the reply topic", cmd(324, map[string]string{"topic": "DefaultCluster_REPLY_TOPIC", "producerGroup": "pg"}, ""),
			[]Need{{T("DefaultCluster_REPLY_TOPIC"), acl.Pub}}},
		{"send to the group's retry topic", cmd(wire.CodeSendMessage, map[string]string{"topic": "%RETRY%g", "producerGroup": "CLIENT_INNER_PRODUCER"}, ""),
			[]Need{{G("g"), acl.Sub}}},
		{"pull", cmd(wire.CodePullMessage, map[string]string{"consumerGroup": "g", "topic": "t"}, ""),
			[]Need{{G("g"), acl.Sub}, {T("t"), acl.Sub}}},
		{"pull of another group's retries", cmd(wire.CodePullMessage, map[string]string{"consumerGroup": "g", "topic": "%RETRY%h"}, ""),
			[]Need{{G("g"), acl.Sub}, {G("h"), acl.Sub}}},
		{"query offset", cmd(wire.CodeQueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "t"}, ""),
			[]Need{{G("g"), acl.Sub | acl.Get}, {T("t"), acl.Sub | acl.Get}}},
		{"update offset", cmd(wire.CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "t"}, ""),
			[]Need{{G("g"), acl.Sub | acl.Update}, {T("t"), acl.Sub | acl.Update}}},
		{"max offset", cmd(wire.CodeGetMaxOffset, map[string]string{"topic": "t"}, ""), []Need{{T("t"), acl.Sub | acl.Get}}},
		{"consumer list", cmd(wire.CodeGetConsumerListByGroup, map[string]string{"consumerGroup": "g"}, ""),
			[]Need{{G("g"), acl.Sub | acl.Get}}},
		{"unregister a producer", cmd(wire.CodeUnregisterClient, map[string]string{"clientID": "c", "producerGroup": "pg"}, ""), nil},
		{"heartbeat", cmd(wire.CodeHeartbeat, map[string]string{},
			`{"clientID":"c","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t"},{"topic":"%RETRY%g"}]}]}`),
			[]Need{{G("g"), acl.Sub}, {T("t"), acl.Sub}, {G("g"), acl.Sub}}},
		{"producer heartbeat", cmd(wire.CodeHeartbeat, map[string]string{}, `{"clientID":"c","producerDataSet":[{"groupName":"pg"}]}`), nil},
		{"lock", cmd(wire.CodeLockBatchMQ, map[string]string{}, `{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"t","brokerName":"b","queueId":1}]}`),
			[]Need{{G("g"), acl.Sub}, {T("t"), acl.Sub}}},
		{"send back", cmd(wire.CodeConsumerSendMsgBack, map[string]string{"group": "g", "offset": "7"}, ""),
			[]Need{{G("g"), acl.Sub}, {T("payroll"), acl.Sub}}},
		{"an admin offset reset is Update on the group and the topic (Apache's ResetOffsetRequestHeader)",
			cmd(222, map[string]string{"group": "g", "topic": "t", "timestamp": "0"}, ""),
			[]Need{{G("g"), acl.Update}, {T("t"), acl.Update}}},
		{"end transaction without a topic", cmd(codeEndTransaction, map[string]string{"producerGroup": "pg"}, ""), nil},
		{"an auth admin change needs Update on everything", cmd(3001, map[string]string{"username": "u"}, "{}"),
			[]Need{{acl.Resource{Kind: acl.AnyKind, Name: "request code 3001"}, acl.Update}}},
		{"an auth admin read needs Get on everything", cmd(3010, map[string]string{}, ""),
			[]Need{{acl.Resource{Kind: acl.AnyKind, Name: "request code 3010"}, acl.Get}}},
		{"unknown code needs a super user", cmd(999, map[string]string{}, ""),
			[]Need{{acl.Resource{Kind: acl.AnyKind, Name: "request code 999"}, acl.Update}}},
	}
	for _, c := range cases {
		got, err := Needs(c.req, topicAt)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}

func TestNeedsRefusesWhatItCannotRead(t *testing.T) {
	topicAt := func(int64) (string, error) { return "", errors.New("gone") }
	for name, req := range map[string]*wire.Command{
		"send without topic":       cmd(wire.CodeSendMessage, map[string]string{"queueId": "0"}, ""),
		"pull without group":       cmd(wire.CodePullMessage, map[string]string{"topic": "t"}, ""),
		"heartbeat not JSON":       cmd(wire.CodeHeartbeat, nil, "{"),
		"lock not JSON":            cmd(wire.CodeLockBatchMQ, nil, "nope"),
		"send back of nothing":     cmd(wire.CodeConsumerSendMsgBack, map[string]string{"group": "g", "offset": "1"}, ""),
		"send back without offset": cmd(wire.CodeConsumerSendMsgBack, map[string]string{"group": "g"}, ""),
		"route without topic":      cmd(wire.CodeGetRouteInfoByTopic, nil, ""),
		"reset without group":      cmd(222, map[string]string{"topic": "t"}, ""),
		"reset without topic":      cmd(222, map[string]string{"group": "g"}, ""),
	} {
		_, err := Needs(req, topicAt)
		assert.ErrorIs(t, err, ErrUnreadable, name)
	}
}

// FuzzNeeds: any request (code, fields, body) maps to needs or to
// ErrUnreadable, never a panic.
func FuzzNeeds(f *testing.F) {
	f.Add(int16(wire.CodeHeartbeat), "topic", "t", `{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t"}]}]}`)
	f.Add(int16(wire.CodeLockBatchMQ), "consumerGroup", "g", `{"consumerGroup":"g","mqSet":[{"topic":"t"}]}`)
	f.Add(int16(wire.CodeConsumerSendMsgBack), "offset", "12", "")
	f.Add(int16(wire.CodeSendMessageV2), "b", "%RETRY%g", "")
	f.Fuzz(func(t *testing.T, code int16, k, v, body string) {
		req := cmd(code, map[string]string{k: v, "group": v, "consumerGroup": v}, body)
		_, err := Needs(req, func(int64) (string, error) { return v, nil })
		if err != nil && !errors.Is(err, ErrUnreadable) {
			t.Fatalf("error without ErrUnreadable: %v", err)
		}
	})
}
