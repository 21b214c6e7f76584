package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brokercore/brokercore"
)

// Apache RocketMQ response codes a refused admin request answers.
const (
	CodeSystemError      int16 = 1
	CodeTopicNotExist    int16 = 17
	CodeInvalidParameter int16 = 29
)

// MaxQueues bounds a topic's read and write queue numbers.
const MaxQueues = 1024

// MessageTypeKey is the topic attribute that fixes its message type
// (Apache's TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE).
const MessageTypeKey = "message.type"

// messageTypes are the values of message.type this broker takes (Apache's
// TopicMessageType but MIXED, which Apache refuses too unless mixed types
// are enabled).
var messageTypes = map[string]bool{"UNSPECIFIED": true, "NORMAL": true, "FIFO": true, "DELAY": true, "TRANSACTION": true}

// Refusal is a refused admin request: the Apache response code and remark
// to answer. It wraps ErrInvalid.
type Refusal struct {
	Code   int16
	Remark string
}

func (r *Refusal) Error() string { return fmt.Sprintf("meta: refused (%d): %s", r.Code, r.Remark) }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (r *Refusal) Unwrap() error { return ErrInvalid }

func refuse(code int16, format string, args ...any) error {
	return &Refusal{Code: code, Remark: fmt.Sprintf(format, args...)}
}

// Topic is Apache's TopicConfig, in its JSON spelling.
type Topic struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int               `json:"readQueueNums"`
	WriteQueueNums  int               `json:"writeQueueNums"`
	Perm            int               `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int               `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes"`
}

// MessageType is the topic's message.type ("" when not set).
func (t Topic) MessageType() string { return t.Attributes[MessageTypeKey] }

// ParseCreateTopic reads an UPDATE_AND_CREATE_TOPIC header
// (CreateTopicRequestHeader) over cur, the topic's current configuration
// (nil when new), with Apache's checks and codes: a bad name is
// INVALID_PARAMETER, bad attributes SYSTEM_ERROR with Apache's words.
func ParseCreateTopic(ext map[string]string, cur *Topic) (Topic, error) {
	name := ext["topic"]
	if err := brokercore.CheckClientTopic(name); err != nil {
		return Topic{}, refuse(CodeInvalidParameter, "%v", err)
	}
	num := func(k string, def int) (int, error) {
		v, ok := ext[k]
		if !ok || v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, refuse(CodeInvalidParameter, "%s %q is not a number", k, v)
		}
		return n, nil
	}
	t := Topic{TopicName: name, TopicFilterType: "SINGLE_TAG", Attributes: map[string]string{}}
	var err error
	if t.ReadQueueNums, err = num("readQueueNums", 16); err != nil {
		return Topic{}, err
	}
	if t.WriteQueueNums, err = num("writeQueueNums", 16); err != nil {
		return Topic{}, err
	}
	if t.Perm, err = num("perm", 6); err != nil {
		return Topic{}, err
	}
	if t.TopicSysFlag, err = num("topicSysFlag", 0); err != nil {
		return Topic{}, err
	}
	t.Order = ext["order"] == "true"
	switch {
	case t.ReadQueueNums < 1 || t.ReadQueueNums > MaxQueues || t.WriteQueueNums < 1 || t.WriteQueueNums > MaxQueues:
		return Topic{}, refuse(CodeInvalidParameter, "queue numbers must be 1..%d: readQueueNums %d, writeQueueNums %d", MaxQueues, t.ReadQueueNums, t.WriteQueueNums)
	case t.Perm < 0 || t.Perm > 7:
		return Topic{}, refuse(CodeInvalidParameter, "perm %d is not a permission (2 W, 4 R, 6 RW)", t.Perm)
	}
	if cur != nil {
		for k, v := range cur.Attributes {
			t.Attributes[k] = v
		}
	}
	if err := alterAttributes(t.Attributes, ext["attributes"], cur == nil); err != nil {
		return Topic{}, err
	}
	return t, nil
}

// alterAttributes applies "+k=v,-k" to attrs as Apache's AttributeUtil
// does: only known keys, only additions when creating.
func alterAttributes(attrs map[string]string, mod string, create bool) error {
	if strings.TrimSpace(mod) == "" {
		return nil
	}
	for _, kv := range strings.Split(mod, ",") {
		kv = strings.TrimSpace(kv)
		if len(kv) < 2 {
			return refuse(CodeSystemError, "attribute %q is neither +key=value nor -key", kv)
		}
		sign, rest := kv[0], kv[1:]
		key, val, hasVal := strings.Cut(rest, "=")
		if key != MessageTypeKey {
			return refuse(CodeSystemError, "unsupported key: %s", key)
		}
		switch sign {
		case '+':
			if !hasVal || val == "" {
				return refuse(CodeSystemError, "attribute %q has no value", kv)
			}
			if val == "MIXED" {
				return refuse(CodeInvalidParameter, "MIXED message type is not supported.")
			}
			if !messageTypes[val] {
				return refuse(CodeSystemError, "value is not in set: %s", val)
			}
			attrs[key] = val
		case '-':
			if create {
				return refuse(CodeSystemError, "only add attribute is supported while creating topic. key: %s", key)
			}
			delete(attrs, key)
		default:
			return refuse(CodeSystemError, "attribute %q is neither +key=value nor -key", kv)
		}
	}
	return nil
}

// Topics is the topic configuration table (what UPDATE_AND_CREATE_TOPIC
// set), safe for concurrent use. A topic without an entry has the
// broker's defaults.
type Topics struct {
	path string
	now  func() time.Time

	mu      sync.RWMutex
	m       map[string]Topic
	version DataVersion
}

type topicsFile struct {
	TopicConfigTable map[string]Topic `json:"topicConfigTable"`
	DataVersion      DataVersion      `json:"dataVersion"`
}

// OpenTopics loads the table from path ("" = in memory only).
func OpenTopics(path string) (*Topics, error) {
	t := &Topics{path: path, now: time.Now, m: map[string]Topic{}}
	if path == "" {
		return t, nil
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	var f topicsFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("meta: %s: %w", path, err)
	}
	for k, v := range f.TopicConfigTable {
		t.m[k] = v
	}
	t.version = f.DataVersion
	return t, nil
}

// Get returns a topic's configuration.
func (t *Topics) Get(name string) (Topic, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.m[name]
	return c, ok
}

// MessageType is the topic's message.type ("" = any).
func (t *Topics) MessageType(name string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[name].MessageType()
}

// Put stores a topic's configuration, durably.
func (t *Topics) Put(c Topic) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.m[c.TopicName]
	t.m[c.TopicName] = c
	if err := t.saveLocked(); err != nil {
		if had {
			t.m[c.TopicName] = old
		} else {
			delete(t.m, c.TopicName)
		}
		return err
	}
	return nil
}

// Delete removes a topic's configuration, durably.
func (t *Topics) Delete(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.m[name]
	if !had {
		return nil
	}
	delete(t.m, name)
	if err := t.saveLocked(); err != nil {
		t.m[name] = old
		return err
	}
	return nil
}

// WrapperJSON is the GET_ALL_TOPIC_CONFIG body (Apache's
// TopicConfigSerializeWrapper) of the topics named, each with its
// configuration or the defaults of def queues.
func (t *Topics) WrapperJSON(names []string, def func(name string) int) []byte {
	t.mu.RLock()
	defer t.mu.RUnlock()
	table := make(map[string]Topic, len(names))
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, n := range sorted {
		c, ok := t.m[n]
		if !ok {
			q := def(n)
			c = Topic{TopicName: n, ReadQueueNums: q, WriteQueueNums: q, Perm: 6, TopicFilterType: "SINGLE_TAG", Attributes: map[string]string{}}
		}
		table[n] = c
	}
	b, _ := json.Marshal(topicsFile{TopicConfigTable: table, DataVersion: t.version})
	return b
}

func (t *Topics) saveLocked() error {
	t.version = DataVersion{Timestamp: t.now().UnixMilli(), Counter: t.version.Counter + 1}
	if t.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(topicsFile{TopicConfigTable: t.m, DataVersion: t.version}, "", "  ")
	if err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	return writeAtomic(t.path, b)
}
