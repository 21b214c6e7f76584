package grpcapi

import (
	"crypto/md5"
	"encoding/hex"
	"hash/crc32"
	"strconv"
	"strings"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/brokercore/brokercore/store"
)

// TestFramesRenderEveryFieldAndStayIndependent: a batch's frames share one
// allocation and one scratch buffer; each must still marshal to its own
// message with every field the client reads, and nothing of one frame may
// show through in another.
func TestFramesRenderEveryFieldAndStayIndependent(t *testing.T) {
	born := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	stored := born.Add(time.Second)
	deliver := born.Add(time.Hour).Truncate(time.Millisecond)
	msgs := []*store.Message{
		{Topic: "t1", QueueID: 3, QueueOffset: 41, Tags: "tagA", Keys: []string{"k1", "k2"}, Body: []byte("hello"),
			BornAt: born, StoredAt: stored,
			Properties: map[string]string{PropUniqKey: "id-1", PropBornHost: "10.0.0.1", PropMessageGroup: "g1", "user": "v"}},
		{Topic: "t2", QueueID: 0, QueueOffset: 7, Body: []byte(strings.Repeat("x", 300)), BornAt: born, StoredAt: stored,
			Properties: map[string]string{PropUniqKey: "id-2", PropDeliveryTime: strconv.FormatInt(deliver.UnixMilli(), 10)}},
		{Topic: "t3", QueueID: 1, QueueOffset: 0, LogOffset: 255, Body: []byte("z"), BornAt: born, StoredAt: stored},
	}
	handles := []string{"popA", strings.Repeat("P", 300), "popC"} // the second outgrows the scratch
	invisible := durationpb.New(30 * time.Second)
	frames := newFrames(len(msgs))
	var scratch [16]byte
	b := scratch[:0]
	var wire [][]byte
	for i, m := range msgs {
		var resp *v2.ReceiveMessageResponse
		resp, b = frames[i].fill(m, receipt{queue: m.QueueID, offset: m.QueueOffset, pop: handles[i]}, i+1, invisible, b)
		raw, err := proto.Marshal(resp)
		require.NoError(t, err)
		wire = append(wire, raw)
	}
	for i, raw := range wire {
		var got v2.ReceiveMessageResponse
		require.NoError(t, proto.Unmarshal(raw, &got))
		pm := got.GetMessage()
		require.NotNil(t, pm, "frame %d", i)
		m, sp := msgs[i], pm.GetSystemProperties()
		require.Equal(t, m.Topic, pm.GetTopic().GetName())
		require.Equal(t, m.Body, pm.GetBody())
		require.Equal(t, messageID(m), sp.GetMessageId())
		r, err := parseReceipt(sp.GetReceiptHandle())
		require.NoError(t, err)
		require.Equal(t, receipt{queue: m.QueueID, offset: m.QueueOffset, pop: handles[i]}, r)
		sum := md5.Sum(m.Body) // Apache's proxy: MD5, upper-case hex (BinaryUtil.generateMd5)
		require.Equal(t, strings.ToUpper(hex.EncodeToString(sum[:])), sp.GetBodyDigest().GetChecksum())
		require.Equal(t, v2.DigestType_MD5, sp.GetBodyDigest().GetType())
		require.EqualValues(t, i+1, sp.GetDeliveryAttempt())
		require.EqualValues(t, m.QueueID, sp.GetQueueId())
		require.Equal(t, m.QueueOffset, sp.GetQueueOffset())
		require.True(t, born.Equal(sp.GetBornTimestamp().AsTime()))
		require.True(t, stored.Equal(sp.GetStoreTimestamp().AsTime()))
		require.Equal(t, 30*time.Second, sp.GetInvisibleDuration().AsDuration())
		require.Equal(t, m.Keys, sp.GetKeys())
		require.Equal(t, m.Properties[PropBornHost], sp.GetBornHost())
	}
	first := func(i int) *v2.SystemProperties {
		var got v2.ReceiveMessageResponse
		require.NoError(t, proto.Unmarshal(wire[i], &got))
		return got.GetMessage().GetSystemProperties()
	}
	sp0, sp1, sp2 := first(0), first(1), first(2)
	require.Equal(t, "tagA", sp0.GetTag())
	require.Equal(t, "g1", sp0.GetMessageGroup())
	require.Equal(t, v2.MessageType_FIFO, sp0.GetMessageType())
	require.Nil(t, sp0.DeliveryTimestamp)
	require.Nil(t, sp1.Tag, "a frame without a tag shows none")
	require.Nil(t, sp1.MessageGroup)
	require.Equal(t, v2.MessageType_DELAY, sp1.GetMessageType())
	require.True(t, deliver.Equal(sp1.GetDeliveryTimestamp().AsTime()))
	require.Equal(t, v2.MessageType_NORMAL, sp2.GetMessageType())
	require.Equal(t, "FF000000000000000000000000000000FF", sp2.GetMessageId(), "a message stored without UNIQ_KEY")
	var got0 v2.ReceiveMessageResponse
	require.NoError(t, proto.Unmarshal(wire[0], &got0))
	require.Equal(t, map[string]string{"user": "v"}, got0.GetMessage().GetUserProperties(), "system properties are not user properties")
}

// BenchmarkDigest1KiB is the body digest of a receive frame: MD5 (what
// Apache sends and every client checks) against the CRC32 it replaced.
func BenchmarkDigest1KiB(b *testing.B) {
	body := make([]byte, 1024)
	buf := make([]byte, 0, 64)
	b.Run("md5", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			buf = appendDigest(buf[:0], body)
		}
	})
	b.Run("crc32", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			buf = strconv.AppendUint(buf[:0], uint64(crc32.ChecksumIEEE(body)), 16)
		}
	})
}

// Advertise names one address or several IP literals separated by ";"
// (in that order: the client sorts and shuffles them itself).
func TestParseAdvertise(t *testing.T) {
	e := parseAdvertise("127.0.0.1:8081; 127.0.0.1:8082")
	require.NotNil(t, e)
	require.Equal(t, v2.AddressScheme_IPv4, e.Scheme)
	require.Len(t, e.Addresses, 2)
	require.Equal(t, int32(8082), e.Addresses[1].Port)
	require.Len(t, parseAdvertise("broker.example:8081").Addresses, 1)
	for _, bad := range []string{"127.0.0.1:8081;a.example:1", "a.example:1;b.example:2", "127.0.0.1:8081;x", "[::1]:1;127.0.0.1:2"} {
		require.Nil(t, parseAdvertise(bad), bad)
	}
}
