package grpcapi

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
)

// Property names kept with a stored message. They are RocketMQ's, so a
// message sent over gRPC reads the same over the remoting protocol.
const (
	PropUniqKey        = "UNIQ_KEY"           // the client's message id
	PropMessageGroup   = "__SHARDINGKEY"      // a FIFO message's group
	PropBornHost       = "BORN_HOST"          // the producer's host
	PropStartDeliver   = "__STARTDELIVERTIME" // the scheduler's timer properties,
	PropTimerDeliverMS = "TIMER_DELIVER_MS"   // removed when a timer delivers
	// PropDeliveryTime is a DELAY message's delivery time (Unix ms) as the
	// producer set it; it stays with the message so that receivers see it.
	PropDeliveryTime = "DELIVERY_TIME_MS"
)

// systemProps are never user properties: a send may not set them and a
// receive does not show them as such.
var systemProps = map[string]bool{
	PropUniqKey: true, PropMessageGroup: true, PropBornHost: true, PropStartDeliver: true,
	PropTimerDeliverMS: true, PropDeliveryTime: true, brokercore.PropDLQOriginTopic: true, brokercore.PropDLQOriginQueue: true,
	brokercore.PropDLQOriginOffset: true, brokercore.PropDLQOriginMessageID: true,
	"TAGS": true, "KEYS": true, "REAL_TOPIC": true, "REAL_QID": true, "DELAY": true,
	"WAIT": true, "TRAN_MSG": true, "MIN_OFFSET": true, "MAX_OFFSET": true,
}

// messageID is the id a client sees: the producer's UNIQ_KEY, or one made
// from the log offset for a message stored without one.
func messageID(m *store.Message) string {
	if id := m.Properties[PropUniqKey]; id != "" {
		return id
	}
	return fmt.Sprintf("FF%032X", m.LogOffset)
}

// digest is the CRC32 the client checks, in its exact spelling: upper-case
// hex without padding.
func digest(body []byte) *v2.Digest {
	var buf [8]byte
	b := strconv.AppendUint(buf[:0], uint64(crc32.ChecksumIEEE(body)), 16)
	for i, c := range b {
		if 'a' <= c && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
	return &v2.Digest{Type: v2.DigestType_CRC32, Checksum: string(b)}
}

// toProto renders a popped message for a ReceiveMessage answer. invisible
// is shared by the messages of one answer (each is marshalled in turn and
// none is changed after).
func toProto(m *store.Message, handle string, attempts int, invisible *durationpb.Duration) *v2.Message {
	sp := &v2.SystemProperties{
		Keys:              m.Keys,
		MessageId:         messageID(m),
		BodyDigest:        digest(m.Body),
		BodyEncoding:      v2.Encoding_IDENTITY,
		MessageType:       v2.MessageType_NORMAL,
		BornTimestamp:     timestamppb.New(m.BornAt),
		BornHost:          m.Properties[PropBornHost],
		StoreTimestamp:    timestamppb.New(m.StoredAt),
		StoreHost:         "",
		ReceiptHandle:     &handle,
		QueueId:           int32(m.QueueID),
		QueueOffset:       ptr(m.QueueOffset),
		InvisibleDuration: invisible,
		DeliveryAttempt:   ptr(int32(attempts)),
	}
	if m.Tags != "" {
		sp.Tag = ptr(m.Tags)
	}
	if g := m.Properties[PropMessageGroup]; g != "" {
		sp.MessageGroup = ptr(g)
		sp.MessageType = v2.MessageType_FIFO
	}
	if ms := deliverMS(m); ms > 0 {
		sp.DeliveryTimestamp = timestamppb.New(time.UnixMilli(ms))
		if sp.MessageType == v2.MessageType_NORMAL {
			sp.MessageType = v2.MessageType_DELAY
		}
	}
	var user map[string]string
	for k, v := range m.Properties {
		if !systemProps[k] {
			if user == nil {
				user = make(map[string]string, len(m.Properties))
			}
			user[k] = v
		}
	}
	return &v2.Message{
		Topic:            &v2.Resource{Name: m.Topic},
		UserProperties:   user,
		SystemProperties: sp,
		Body:             m.Body,
	}
}

func deliverMS(m *store.Message) int64 {
	for _, k := range []string{PropDeliveryTime, PropTimerDeliverMS, PropStartDeliver} {
		if v := m.Properties[k]; v != "" {
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
				return ms
			}
		}
	}
	return 0
}

func ptr[T any](v T) *T { return &v }
