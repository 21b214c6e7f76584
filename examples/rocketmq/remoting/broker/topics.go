package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"

	"github.com/brokercore/brokercore/examples/rocketmq/internal/atomicfile"
)

// Topic and group names.
const (
	// DefaultTopic is the template topic producers route to when their own
	// topic has no route yet (the client's DefaultTopic).
	DefaultTopic = "TBW102"
	// RetryPrefix and DLQPrefix name a group's retry and dead-letter topics.
	RetryPrefix = "%RETRY%"
	DLQPrefix   = "%DLQ%"
	// MaxTopicLen is the longest topic name: the message encoding gives it
	// one byte, and RocketMQ allows 127 characters.
	MaxTopicLen = 127
	// MaxGroupLen keeps "%RETRY%"+group a valid topic.
	MaxGroupLen = MaxTopicLen - len(RetryPrefix)
)

// validName reports whether s is made of [%|a-zA-Z0-9_-] only.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '%', c == '|', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// ErrTopicName reports a topic name outside [%|a-zA-Z0-9_-]{1,127}.
var ErrTopicName = errors.New("invalid topic name")

// ErrGroupName reports a group name outside [%|a-zA-Z0-9_-]{1,120}.
var ErrGroupName = errors.New("invalid group name")

// ValidTopic checks a topic name.
func ValidTopic(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("%w: empty", ErrTopicName)
	case len(t) > MaxTopicLen:
		return fmt.Errorf("%w: %d characters, at most %d", ErrTopicName, len(t), MaxTopicLen)
	case !validName(t):
		return fmt.Errorf("%w: %q has characters outside [%%|a-zA-Z0-9_-]", ErrTopicName, t)
	}
	return nil
}

// ValidGroup checks a consumer or producer group name.
func ValidGroup(g string) error {
	switch {
	case g == "":
		return fmt.Errorf("%w: empty", ErrGroupName)
	case len(g) > MaxGroupLen:
		return fmt.Errorf("%w: %d characters, at most %d", ErrGroupName, len(g), MaxGroupLen)
	case !validName(g):
		return fmt.Errorf("%w: %q has characters outside [%%|a-zA-Z0-9_-]", ErrGroupName, g)
	}
	return nil
}

// Topics is the topic table shared by the name server and the broker:
// topic -> queue count. A topic's queue count never changes once created.
// With a path it is persisted (atomic replace) on every creation, so routes
// survive a restart with the same queue counts.
type Topics struct {
	path string
	def  int

	mu sync.RWMutex
	m  map[string]int
}

// OpenTopics loads the table at path ("" = memory only). defQueues is the
// queue count of auto-created topics; TBW102 always exists with it.
func OpenTopics(path string, defQueues int) (*Topics, error) {
	if defQueues <= 0 {
		defQueues = 4
	}
	t := &Topics{path: path, def: defQueues, m: map[string]int{}}
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &t.m); err != nil {
				return nil, fmt.Errorf("topics file %s: %w", path, err)
			}
		case errors.Is(err, fs.ErrNotExist):
		default:
			return nil, err
		}
	}
	t.m[DefaultTopic] = defQueues
	return t, nil
}

// DefaultQueues is the queue count of auto-created topics.
func (t *Topics) DefaultQueues() int { return t.def }

// Queues returns the topic's queue count and whether it exists.
func (t *Topics) Queues(topic string) (int, bool) {
	t.mu.RLock()
	n, ok := t.m[topic]
	t.mu.RUnlock()
	return n, ok
}

// Ensure creates topic with n queues (the default when n <= 0) unless it
// exists, and returns its queue count.
func (t *Topics) Ensure(topic string, n int) (int, error) {
	if q, ok := t.Queues(topic); ok {
		return q, nil
	}
	if err := ValidTopic(topic); err != nil {
		return 0, err
	}
	if n <= 0 {
		n = t.def
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if q, ok := t.m[topic]; ok {
		return q, nil
	}
	t.m[topic] = n
	if err := t.saveLocked(); err != nil {
		delete(t.m, topic)
		return 0, err
	}
	return n, nil
}

func (t *Topics) saveLocked() error {
	if t.path == "" {
		return nil
	}
	b, err := json.Marshal(t.m)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(t.path, b, 0o644)
}

// List returns the topics, sorted.
func (t *Topics) List() []string {
	t.mu.RLock()
	out := make([]string, 0, len(t.m))
	for k := range t.m {
		out = append(out, k)
	}
	t.mu.RUnlock()
	sort.Strings(out)
	return out
}
