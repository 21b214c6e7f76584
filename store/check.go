package store

import "fmt"

// Limits every Append enforces, exported so that a front-end can refuse a
// message before it accepts it (and a replicated log before it proposes it).
const (
	// MaxTopicLength is the longest topic name the record format holds, in
	// bytes.
	MaxTopicLength = maxTopicLength
	// MaxQueueID is the largest queue ID.
	MaxQueueID = maxQueueID
)

// CheckMessage reports, wrapping ErrInvalid, why Append would refuse m for
// being malformed: a nil message, an empty or over-long topic, a queue ID
// outside 0..MaxQueueID, a body over maxBody bytes (0 means
// DefaultMaxMessageSize) or metadata over MaxMetadataSize. It is exactly
// the check Append makes on each message of a batch (with the store's own
// MaxMessageSize), so a message that passes it with the same limit is never
// refused by Append as malformed. It changes nothing.
func CheckMessage(m *Message, maxBody int) error {
	if maxBody <= 0 {
		maxBody = DefaultMaxMessageSize
	}
	return checkMessage(0, m, maxBody)
}

// checkMessage checks message i of a batch against the store's limits.
func checkMessage(i int, m *Message, maxBody int) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: message %d is nil", ErrInvalid, i)
	case m.Topic == "":
		return fmt.Errorf("%w: message %d has an empty topic", ErrInvalid, i)
	case len(m.Topic) > maxTopicLength:
		return fmt.Errorf("%w: message %d topic is %d bytes, limit %d", ErrInvalid, i, len(m.Topic), maxTopicLength)
	case m.QueueID < 0 || m.QueueID > maxQueueID:
		return fmt.Errorf("%w: message %d has queue %d", ErrInvalid, i, m.QueueID)
	case len(m.Body) > maxBody:
		return fmt.Errorf("%w: message %d body is %d bytes, limit %d", ErrInvalid, i, len(m.Body), maxBody)
	case metaSize(m) > MaxMetadataSize:
		return fmt.Errorf("%w: message %d metadata is %d bytes, limit %d", ErrInvalid, i, metaSize(m), MaxMetadataSize)
	}
	return nil
}
