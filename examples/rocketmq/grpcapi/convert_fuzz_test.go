package grpcapi

import (
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
)

// FuzzFromProto: any protobuf bytes either fail to unmarshal, are refused
// by the send converter with a status, or become a message the store
// accepts (store.CheckMessage): the edge refuses what the core would, and
// never panics.
func FuzzFromProto(f *testing.F) {
	good := &v2.Message{Topic: &v2.Resource{Name: "t"}, Body: []byte("x"),
		SystemProperties: &v2.SystemProperties{MessageId: "01ABC", MessageType: v2.MessageType_NORMAL,
			BodyEncoding: v2.Encoding_IDENTITY, BornTimestamp: timestamppb.Now(), Tag: proto.String("a"), Keys: []string{"k"}},
		UserProperties: map[string]string{"u": "v"}}
	for _, m := range []*v2.Message{good,
		{Topic: &v2.Resource{Name: "SCHEDULE_TOPIC_XXXX"}, Body: []byte("x"), SystemProperties: good.SystemProperties},
		{Topic: &v2.Resource{Name: "t"}, Body: []byte("x"), SystemProperties: &v2.SystemProperties{MessageId: "1",
			MessageType: v2.MessageType_DELAY, DeliveryTimestamp: timestamppb.New(time.Now().Add(time.Minute))}},
		{Topic: &v2.Resource{Name: "t"}, Body: []byte("x"), SystemProperties: &v2.SystemProperties{MessageId: "1",
			MessageType: v2.MessageType_FIFO, MessageGroup: proto.String("g")}},
	} {
		b, err := proto.Marshal(m)
		require.NoError(f, err)
		f.Add(b)
	}
	dir := f.TempDir()
	core, err := brokercore.Open(dir, brokercore.Options{Store: store.Options{Sync: store.SyncNone}})
	require.NoError(f, err)
	f.Cleanup(func() { _ = core.Close() })
	s, err := New(core, Options{CertDir: dir})
	require.NoError(f, err)
	f.Cleanup(func() { _ = s.Close() })
	f.Fuzz(func(t *testing.T, b []byte) {
		var pm v2.Message
		if proto.Unmarshal(b, &pm) != nil {
			return
		}
		m, st := s.fromProto(&pm)
		if st != nil {
			require.NotEqual(t, v2.Code_OK, st.GetCode())
			return
		}
		require.NoError(t, store.CheckMessage(m, s.opts.MaxBodySize+(1<<20)), "converted but the store would refuse it")
	})
}
