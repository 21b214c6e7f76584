package broker_test

import (
	"bufio"
	"encoding/binary"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/stretchr/testify/require"
)

// rawConn speaks the remoting protocol by hand, for bad-input tests.
type rawConn struct {
	t      *testing.T
	c      net.Conn
	r      *bufio.Reader
	opaque int32
	// notices are the requests the broker sent (NOTIFY_CONSUMER_IDS_CHANGED).
	notices []*wire.Command
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (rc *rawConn) writeRaw(b []byte) {
	rc.t.Helper()
	_, err := rc.c.Write(b)
	require.NoError(rc.t, err)
}

func (rc *rawConn) send(cmd *wire.Command) int32 {
	rc.t.Helper()
	rc.opaque++
	cmd.Opaque = rc.opaque
	b, err := wire.Encode(cmd)
	require.NoError(rc.t, err)
	rc.writeRaw(b)
	return cmd.Opaque
}

func (rc *rawConn) read(timeout time.Duration) (*wire.Command, error) {
	rc.c.SetReadDeadline(time.Now().Add(timeout))
	f, err := wire.ReadFrame(rc.r, wire.DefaultMaxFrame)
	if err != nil {
		return nil, err
	}
	return wire.Decode(f)
}

func (rc *rawConn) call(cmd *wire.Command) *wire.Command {
	rc.t.Helper()
	op := rc.send(cmd)
	resp, err := rc.read(5 * time.Second)
	for err == nil && !resp.IsResponse() { // a notification from the broker
		rc.notices = append(rc.notices, resp)
		resp, err = rc.read(5 * time.Second)
	}
	require.NoError(rc.t, err)
	require.Equal(rc.t, op, resp.Opaque)
	return resp
}

func req(code int16, ext map[string]string, body []byte) *wire.Command {
	return &wire.Command{Code: code, Language: "GO", Version: 317, ExtFields: ext, Body: body}
}

func jsonFrame(header string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(header)))
	return append(b, header...)
}

func sendReq(topic string, queue int, body string) *wire.Command {
	return sendReqBody(topic, queue, []byte(body))
}

func sendReqBody(topic string, queue int, body []byte) *wire.Command {
	return req(wire.CodeSendMessage, map[string]string{"producerGroup": "pg", "topic": topic,
		"queueId": strconv.Itoa(queue), "sysFlag": "0", "bornTimestamp": "1", "flag": "0",
		"properties": "UNIQ_KEY\x01abc\x02TAGS\x01t1\x02", "reconsumeTimes": "0", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4"}, body)
}
