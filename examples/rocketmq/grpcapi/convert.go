package grpcapi

import (
	"crypto/md5"
	"fmt"
	"strconv"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
)

// Property names kept with a stored message. They are RocketMQ's, so a
// message sent over gRPC reads the same over the remoting protocol.
const (
	PropUniqKey        = brokercore.PropUniqKey // the client's message id
	PropMessageGroup   = "__SHARDINGKEY"        // a FIFO message's group
	PropBornHost       = "BORN_HOST"            // the producer's host
	PropStartDeliver   = "__STARTDELIVERTIME"   // the scheduler's timer properties,
	PropTimerDeliverMS = "TIMER_DELIVER_MS"     // removed when a timer delivers
	// PropTags and PropKeys are a message's tag and its keys (separated by
	// spaces), RocketMQ's TAGS and KEYS properties.
	PropTags = "TAGS"
	PropKeys = "KEYS"
	// PropCluster is the broker's cluster (Apache's CLUSTER), stamped on
	// every stored message.
	PropCluster = "CLUSTER"
	// PropDeliveryTime is a DELAY message's delivery time (Unix ms) as the
	// producer set it; it stays with the message so that receivers see it.
	PropDeliveryTime = "DELIVERY_TIME_MS"
)

// systemProps are never user properties: a send may not set them and a
// receive does not show them as such.
var systemProps = map[string]bool{
	PropUniqKey: true, PropMessageGroup: true, PropBornHost: true, PropStartDeliver: true,
	PropTimerDeliverMS: true, PropDeliveryTime: true, PropCluster: true, brokercore.PropDLQOriginTopic: true, brokercore.PropDLQOriginQueue: true,
	brokercore.PropDLQOriginOffset: true, brokercore.PropDLQOriginMessageID: true,
	"TAGS": true, "KEYS": true, "REAL_TOPIC": true, "REAL_QID": true, "DELAY": true,
	"WAIT": true, "TRAN_MSG": true, "MIN_OFFSET": true, "MAX_OFFSET": true,
	"PGROUP": true, "TRAN_PREPARED_QUEUE_OFFSET": true, "CHECK_IMMUNITY_TIME_IN_SECONDS": true,
	"TRANSACTION_CHECK_TIMES": true, "__transactionId__": true,
}

// messageID is the id a client sees: the producer's UNIQ_KEY, or one made
// from the log offset for a message stored without one.
func messageID(m *store.Message) string {
	if id := m.Properties[PropUniqKey]; id != "" {
		return id
	}
	return fmt.Sprintf("FF%032X", m.LogOffset)
}

// appendDigest appends the body digest Apache's proxy sends, in its exact
// spelling: MD5 as 32 upper-case hex digits (BinaryUtil.generateMd5). The
// clients of every language check it; some check only MD5 and flag any
// other digest as a corrupted message.
func appendDigest(dst, body []byte) []byte {
	const digits = "0123456789ABCDEF"
	sum := md5.Sum(body)
	for _, c := range sum {
		dst = append(dst, digits[c>>4], digits[c&0x0f])
	}
	return dst
}

// frame is everything one message frame of a ReceiveMessage answer points
// to, so that a batch's frames are one allocation (newFrames) rather than a
// dozen small ones per message. A frame is filled once, marshalled by Send
// and dropped with the batch; it is never copied.
type frame struct {
	resp                   v2.ReceiveMessageResponse
	content                v2.ReceiveMessageResponse_Message
	msg                    v2.Message
	topic                  v2.Resource
	sp                     v2.SystemProperties
	digest                 v2.Digest
	born, stored, delivery timestamppb.Timestamp
	queueOffset            int64
	attempt                int32
	tag, group, handle     string
}

func newFrames(n int) []frame { return make([]frame, n) }

// fill renders a popped message with its receipt handle into f and
// returns the answer to send. invisible is shared by the frames of one
// answer (each is marshalled in turn and none is changed after). scratch
// is reused between calls: the handle and the digest are built in it and
// become one string.
func (f *frame) fill(m *store.Message, r receipt, attempts int, invisible *durationpb.Duration, scratch []byte) (*v2.ReceiveMessageResponse, []byte) {
	b := r.appendTo(scratch[:0])
	n := len(b)
	b = appendDigest(b, m.Body)
	hd := string(b)
	f.handle = hd[:n]
	f.digest = v2.Digest{Type: v2.DigestType_MD5, Checksum: hd[n:]}
	f.born = timestamppb.Timestamp{Seconds: m.BornAt.Unix(), Nanos: int32(m.BornAt.Nanosecond())}
	f.stored = timestamppb.Timestamp{Seconds: m.StoredAt.Unix(), Nanos: int32(m.StoredAt.Nanosecond())}
	f.queueOffset, f.attempt = m.QueueOffset, int32(attempts)
	sp := &f.sp
	sp.Keys = m.Keys
	sp.MessageId = messageID(m)
	sp.BodyDigest = &f.digest
	sp.BodyEncoding = v2.Encoding_IDENTITY
	sp.MessageType = v2.MessageType_NORMAL
	sp.BornTimestamp = &f.born
	sp.BornHost = m.Properties[PropBornHost]
	sp.StoreTimestamp = &f.stored
	sp.ReceiptHandle = &f.handle
	sp.QueueId = int32(m.QueueID)
	sp.QueueOffset = &f.queueOffset
	sp.InvisibleDuration = invisible
	sp.DeliveryAttempt = &f.attempt
	if m.Tags != "" {
		f.tag = m.Tags
		sp.Tag = &f.tag
	}
	if g := m.Properties[PropMessageGroup]; g != "" {
		f.group = g
		sp.MessageGroup = &f.group
		sp.MessageType = v2.MessageType_FIFO
	}
	if ms := deliverMS(m); ms > 0 {
		f.delivery = timestamppb.Timestamp{Seconds: ms / 1000, Nanos: int32(ms%1000) * 1e6}
		sp.DeliveryTimestamp = &f.delivery
		if sp.MessageType == v2.MessageType_NORMAL {
			sp.MessageType = v2.MessageType_DELAY
		}
	}
	f.topic.Name = m.Topic
	f.msg.Topic = &f.topic
	f.msg.UserProperties = userProperties(m)
	f.msg.SystemProperties = sp
	f.msg.Body = m.Body
	f.content.Message = &f.msg
	f.resp.Content = &f.content
	return &f.resp, b
}

// userProperties are m's properties without the system ones (nil when
// there are none).
func userProperties(m *store.Message) map[string]string {
	var user map[string]string
	for k, v := range m.Properties {
		if !systemProps[k] {
			if user == nil {
				user = make(map[string]string, len(m.Properties))
			}
			user[k] = v
		}
	}
	return user
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
