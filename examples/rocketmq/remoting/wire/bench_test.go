package wire_test

import (
	"encoding/binary"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// clientSendHeader is the JSON header of one official-client send, as
// rocketmq-client-go v2 writes it.
const clientSendHeader = `{"code":10,"language":"GO","version":317,"opaque":12345,"flag":0,"remark":"","extFields":` +
	`{"batch":"false","bname":"broker-a","bornTimestamp":"1764590000123","defaultTopic":"TBW102",` +
	`"defaultTopicQueueNums":"4","flag":"0","maxReconsumeTimes":"0","producerGroup":"pg-1",` +
	`"properties":"UNIQ_KEY\u0001AC11000100002A9F00000000000004D2\u0002WAIT\u0001true\u0002",` +
	`"queueId":"2","reconsumeTimes":"0","sysFlag":"0","topic":"bench-send","unitMode":"false"}}`

// BenchmarkDecodeClientSend decodes the official client's send frame
// (header and a 1 KiB body).
func BenchmarkDecodeClientSend(b *testing.B) {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(clientSendHeader)))
	frame = append(frame, clientSendHeader...)
	frame = append(frame, make([]byte, 1024)...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
}
