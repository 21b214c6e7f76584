package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/internal/atomicfile"
)

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
	t.m[brokercore.DefaultTopic] = defQueues
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
	if err := brokercore.CheckTopicName(topic); err != nil {
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
