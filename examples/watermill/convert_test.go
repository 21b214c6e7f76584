package brokercore

import (
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

// FuzzMessageMapping checks that any Watermill message survives the trip
// through a store message (UUID, payload, metadata), and that decoding any
// store message — including ones no Publisher wrote — never panics and
// never leaks the UUID property into metadata.
func FuzzMessageMapping(f *testing.F) {
	f.Add("uuid-1", []byte("payload"), "key", "value", 0)
	f.Add("", []byte(nil), "", "", 3)
	f.Add("x", []byte{0, 1, 2}, UUIDProperty, "spoof", 1)
	f.Fuzz(func(t *testing.T, uuid string, payload []byte, k, v string, queue int) {
		in := message.NewMessage(uuid, payload)
		in.Metadata.Set(k, v)
		sm := toStore("topic", queue, in, time.Unix(0, 0))
		require.Equal(t, "topic", sm.Topic)
		require.Equal(t, queue, sm.QueueID)

		out := fromStore(sm)
		assert.Equal(t, uuid, out.UUID)
		assert.Equal(t, len(payload), len(out.Payload))
		assert.Equal(t, string(payload), string(out.Payload))
		if k != UUIDProperty {
			assert.Equal(t, in.Metadata, out.Metadata)
		}
		_, leaked := out.Metadata[UUIDProperty]
		assert.False(t, leaked)

		// A message from another producer: its UUID is its UUIDProperty if
		// it has one, else its position.
		foreign := fromStore(&store.Message{Topic: k, QueueID: queue, QueueOffset: int64(len(v)),
			Body: payload, Properties: map[string]string{k: v}})
		if k == UUIDProperty {
			assert.Equal(t, v, foreign.UUID)
		} else {
			assert.Equal(t, fmt.Sprintf("%s/%d/%d", k, queue, len(v)), foreign.UUID)
		}
		_, leaked = foreign.Metadata[UUIDProperty]
		assert.False(t, leaked)
	})
}
