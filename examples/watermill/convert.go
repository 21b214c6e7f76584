package brokercore

import (
	"bytes"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/brokercore/brokercore/store"
)

// toStore maps a Watermill message onto a store message: the payload is the
// body, every metadata entry a property, and the UUID the UUIDProperty and the
// message's key (so brokercore tools can find it by key).
func toStore(topic string, queueID int, m *message.Message, now time.Time) *store.Message {
	props := make(map[string]string, len(m.Metadata)+1)
	for k, v := range m.Metadata {
		props[k] = v
	}
	props[UUIDProperty] = m.UUID
	var keys []string
	if m.UUID != "" {
		keys = []string{m.UUID}
	}
	return &store.Message{
		Topic:      topic,
		QueueID:    queueID,
		Keys:       keys,
		Body:       m.Payload,
		Properties: props,
		BornAt:     now,
	}
}

// fromStore is the inverse of toStore. A message appended by something other
// than a Publisher has no UUIDProperty; its UUID is then its position,
// "topic/queue/offset", which is stable across redeliveries. Messages from
// pop are shared with its in-flight table and later deliveries, so the body
// is copied: a handler may modify its payload.
func fromStore(m *store.Message) *message.Message {
	uuid, ok := m.Properties[UUIDProperty]
	if !ok {
		uuid = fmt.Sprintf("%s/%d/%d", m.Topic, m.QueueID, m.QueueOffset)
	}
	msg := message.NewMessage(uuid, bytes.Clone(m.Body))
	for k, v := range m.Properties {
		if k != UUIDProperty {
			msg.Metadata[k] = v
		}
	}
	return msg
}
