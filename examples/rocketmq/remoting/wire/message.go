package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
)

// RocketMQ property names the broker reads or writes. Those the library's
// retry and dead-letter policy also uses are the library's constants.
const (
	PropTags            = "TAGS"
	PropKeys            = "KEYS"
	PropDelay           = brokercore.PropDelayLevel
	PropUniqKey         = brokercore.PropUniqKey
	PropRetryTopic      = brokercore.PropRetryTopic
	PropOriginMessageID = brokercore.PropOriginMessageID
	PropReconsumeTime   = "RECONSUME_TIME"
	PropMaxReconsume    = "MAX_RECONSUME_TIMES"

	// Properties of the broker's own, stripped before a message goes to a
	// client: the message's int32 flag and sysFlag.
	PropFlag    = "__rmq.flag"
	PropSysFlag = "__rmq.sysflag"
)

// Message sysFlag bits.
const (
	sysFlagCompressed  = 1 << 0
	sysFlagMultiTags   = 1 << 1
	sysFlagBornHostV6  = 1 << 4
	sysFlagStoreHostV6 = 1 << 5
	// SysFlagKept are the bits stored with a message and given back: the
	// body's compression (the consumer inflates it).
	SysFlagKept = sysFlagCompressed
)

// MaxPropertiesLen is the most bytes of encoded properties a message may
// carry: the client reads their length as an int16.
const MaxPropertiesLen = 32767

const (
	nameValueSep = '\x01'
	propertySep  = '\x02'
)

// ParseProperties decodes `key\x01value\x02` pairs. Pairs without a value
// separator are skipped, as the client does.
func ParseProperties(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := make(map[string]string)
	for len(s) > 0 {
		var item string
		if i := strings.IndexByte(s, propertySep); i >= 0 {
			item, s = s[:i], s[i+1:]
		} else {
			item, s = s, ""
		}
		if k, v, ok := strings.Cut(item, string(nameValueSep)); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// AppendProperties encodes props (without the broker's own), sorted by
// key so the encoding is deterministic.
func AppendProperties(b []byte, props map[string]string) []byte {
	keys := make([]string, 0, len(props))
	for k := range props {
		if k == PropFlag || k == PropSysFlag {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b = append(b, k...)
		b = append(b, nameValueSep)
		b = append(b, props[k]...)
		b = append(b, propertySep)
	}
	return b
}

// PropertiesLen is len(AppendProperties(nil, props)), without building it.
func PropertiesLen(props map[string]string) int {
	n := 0
	for k, v := range props {
		if k != PropFlag && k != PropSysFlag {
			n += len(k) + len(v) + 2
		}
	}
	return n
}

// tagsOf returns the TAGS property, as the store's Tags field.
func KeysOf(props map[string]string) []string {
	if k := props[PropKeys]; k != "" {
		return strings.Fields(k)
	}
	return nil
}

// HostBytes is the 8-byte (IPv4 + port) form of an address used in message
// ids and the message encoding.
func HostBytes(addr string) [8]byte {
	var b [8]byte
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return b
	}
	if ip := net.ParseIP(host).To4(); ip != nil {
		copy(b[:4], ip)
	}
	p, _ := strconv.Atoi(port)
	binary.BigEndian.PutUint32(b[4:], uint32(p))
	return b
}

// OffsetMsgID is RocketMQ's offset message id: store host and log offset,
// 32 hex digits.
func OffsetMsgID(storeHost [8]byte, logOffset int64) string {
	return string(AppendOffsetMsgID(make([]byte, 0, 32), storeHost, logOffset))
}

// AppendOffsetMsgID appends OffsetMsgID's text to dst.
func AppendOffsetMsgID(dst []byte, storeHost [8]byte, logOffset int64) []byte {
	const hex = "0123456789ABCDEF"
	var b [16]byte
	copy(b[:8], storeHost[:])
	binary.BigEndian.PutUint64(b[8:], uint64(logOffset))
	for _, c := range b {
		dst = append(dst, hex[c>>4], hex[c&0xF])
	}
	return dst
}

// flagsOf returns a stored message's flag and sysFlag.
func flagsOf(m *store.Message) (flag, sysFlag int32) {
	if v := m.Properties[PropFlag]; v != "" {
		n, _ := strconv.ParseInt(v, 10, 32)
		flag = int32(n)
	}
	if v := m.Properties[PropSysFlag]; v != "" {
		n, _ := strconv.ParseInt(v, 10, 32)
		sysFlag = int32(n)
	}
	return flag, sysFlag
}

// EncodeMessage appends m in the message encoding of a PULL_MESSAGE body
// (message version 1: one-byte topic length).
func EncodeMessage(b []byte, m *store.Message, storeHost [8]byte) []byte {
	flag, sysFlag := flagsOf(m)
	sysFlag &^= sysFlagBornHostV6 | sysFlagStoreHostV6
	props := AppendProperties(nil, m.Properties)
	if len(props) > MaxPropertiesLen {
		props = props[:0] // refused at send time; never produce an undecodable body
	}
	topic := m.Topic
	if len(topic) > 127 {
		topic = topic[:127]
	}
	size := 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + len(m.Body) + 1 + len(topic) + 2 + len(props)
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint32(b, 0xDAA320A7) // MESSAGE_MAGIC_CODE (v1)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(m.Body))
	b = binary.BigEndian.AppendUint32(b, uint32(m.QueueID))
	b = binary.BigEndian.AppendUint32(b, uint32(flag))
	b = binary.BigEndian.AppendUint64(b, uint64(m.QueueOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(m.LogOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(sysFlag))
	b = binary.BigEndian.AppendUint64(b, uint64(m.BornAt.UnixMilli()))
	b = append(b, 127, 0, 0, 1, 0, 0, 0, 0) // born host: not kept
	b = binary.BigEndian.AppendUint64(b, uint64(m.StoredAt.UnixMilli()))
	b = append(b, storeHost[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(m.ReconsumeTimes))
	b = binary.BigEndian.AppendUint64(b, 0) // prepared transaction offset
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Body)))
	b = append(b, m.Body...)
	b = append(b, byte(len(topic)))
	b = append(b, topic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
	return append(b, props...)
}

// errBatch reports a malformed SEND_BATCH_MESSAGE body.
var errBatch = errors.New("malformed batch body")

// BatchItem is one message of a batch body.
type BatchItem struct {
	Flag  int32
	Body  []byte
	Props map[string]string
}

// DecodeBatch decodes a batch body: per message int32 total, int32 magic,
// int32 crc, int32 flag, int32 bodyLen, body, int16 propsLen, props.
func DecodeBatch(body []byte, maxMessages int) ([]BatchItem, error) {
	var out []BatchItem
	r := binReader{b: body}
	for len(r.b) > 0 {
		if len(out) >= maxMessages {
			return nil, fmt.Errorf("%w: more than %d messages", errBatch, maxMessages)
		}
		total := int(int32(r.u32()))
		start := len(r.b) + 4
		_ = r.u32() // magic
		_ = r.u32() // crc
		flag := int32(r.u32())
		b := r.bytes32()
		p := r.bytes16()
		if r.err != nil {
			return nil, fmt.Errorf("%w: message %d: %v", errBatch, len(out), r.err)
		}
		if used := start - len(r.b); total != used {
			return nil, fmt.Errorf("%w: message %d: total size %d, encoded %d", errBatch, len(out), total, used)
		}
		out = append(out, BatchItem{Flag: flag, Body: b, Props: ParseProperties(string(p))})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no message", errBatch)
	}
	return out, nil
}

// BornAt converts a bornTimestamp in milliseconds.
func BornAt(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
