package wire_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// batchOf encodes items as a SEND_BATCH_MESSAGE body.
func batchOf(items ...wire.BatchItem) []byte {
	var b []byte
	for _, it := range items {
		p := wire.AppendProperties(nil, it.Props)
		total := 4 + 4 + 4 + 4 + 4 + len(it.Body) + 2 + len(p)
		b = binary.BigEndian.AppendUint32(b, uint32(total))
		b = binary.BigEndian.AppendUint32(b, 0xAABBCCDD)
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint32(b, uint32(it.Flag))
		b = binary.BigEndian.AppendUint32(b, uint32(len(it.Body)))
		b = append(b, it.Body...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(p)))
		b = append(b, p...)
	}
	return b
}

// FuzzDecodeBatch: any body either decodes into at most maxMessages items
// whose bodies lie inside it, or is refused; it never panics.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(batchOf(wire.BatchItem{Body: []byte("a"), Props: map[string]string{"TAGS": "t"}}), 4)
	f.Add(batchOf(wire.BatchItem{Body: []byte("a")}, wire.BatchItem{Flag: 3, Body: []byte("bc")}), 1)
	f.Add([]byte{}, 4)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, 4)
	f.Add([]byte{0, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}, 4)
	f.Fuzz(func(t *testing.T, body []byte, max int) {
		max = max%64 + 1
		if max < 1 {
			max += 64
		}
		items, err := wire.DecodeBatch(body, max)
		if err != nil {
			return
		}
		require.NotEmpty(t, items)
		require.LessOrEqual(t, len(items), max)
		n := 0
		for _, it := range items {
			n += len(it.Body)
		}
		require.LessOrEqual(t, n, len(body))
	})
}

// FuzzParseProperties: any string parses without panic, and what it
// parses into encodes back to something that parses the same.
func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{"", "A\x011\x02", "A\x011\x02B\x012", "\x01\x02", "A\x01", "\x02\x02\x01", "UNIQ_KEY\x01abc\x02TAGS\x01t\x02"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := wire.ParseProperties(s)
		again := wire.ParseProperties(string(wire.AppendProperties(nil, p)))
		if len(p) == 0 {
			require.Empty(t, again)
			return
		}
		require.Equal(t, p, again)
	})
}
