package wire_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/stretchr/testify/require"
)

func TestCodecRoundTripBothSerializeTypes(t *testing.T) {
	for _, ser := range []byte{wire.SerializeJSON, wire.SerializeRocketMQ} {
		in := &wire.Command{Code: 10, Language: "GO", Version: 317, Opaque: 42, Flag: wire.FlagOneway,
			Remark: "hi", ExtFields: map[string]string{"topic": "t", "queueId": "3"}, Body: []byte("body"), Serialize: ser}
		frame, err := wire.Encode(in)
		require.NoError(t, err)
		require.Equal(t, uint32(len(frame)-4), binary.BigEndian.Uint32(frame))
		require.Equal(t, ser, frame[4], "high byte of the header length is the serialize type")
		got, err := wire.ReadFrame(bufio.NewReader(bytes.NewReader(frame)), wire.DefaultMaxFrame)
		require.NoError(t, err)
		out, err := wire.Decode(got)
		require.NoError(t, err)
		require.Equal(t, in, out)
		require.True(t, out.IsOneway())
		require.False(t, out.IsResponse())
	}
}

func TestDecodeJSONHeaderOfTheGoClient(t *testing.T) {
	// What rocketmq-client-go writes (jsoniter of its RemotingCommand).
	h := []byte(`{"code":105,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"topic":"TBW102"}}`)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(h)))
	frame = append(frame, h...)
	c, err := wire.Decode(frame)
	require.NoError(t, err)
	require.Equal(t, int16(105), c.Code)
	require.Equal(t, int32(7), c.Opaque)
	require.Equal(t, "TBW102", c.ExtFields["topic"])
	require.Nil(t, c.Body)
}

func TestDecodeRejectsBrokenInput(t *testing.T) {
	cases := map[string][]byte{
		"short":            {0, 0},
		"header too long":  {0, 0, 0, 200, '{', '}'},
		"not json":         append([]byte{0, 0, 0, 3}, "abc"...),
		"no code":          append([]byte{0, 0, 0, 2}, "{}"...),
		"unknown codec":    {7, 0, 0, 0},
		"binary truncated": {1, 0, 0, 3, 0, 10, 9},
	}
	for name, in := range cases {
		_, err := wire.Decode(in)
		require.Error(t, err, name)
	}
	_, err := wire.ReadFrame(bufio.NewReader(bytes.NewReader([]byte{0x7f, 0, 0, 0})), 1024)
	require.ErrorIs(t, err, wire.ErrFrame)
	_, err = wire.ReadFrame(bufio.NewReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff})), 1024)
	require.ErrorIs(t, err, wire.ErrFrame)
	_, err = wire.ReadFrame(bufio.NewReader(bytes.NewReader([]byte{0, 0, 0, 9, 1, 2})), 1024)
	require.ErrorIs(t, err, wire.ErrFrame)
}

func TestExtFieldNumbersAreKeptAsText(t *testing.T) {
	h := []byte(`{"code":30,"opaque":1,"extFields":{"queueId":3,"topic":"t"}}`)
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(h))), h...)
	c, err := wire.Decode(frame)
	require.NoError(t, err)
	require.Equal(t, "3", c.ExtFields["queueId"])
}

func FuzzDecode(f *testing.F) {
	for _, ser := range []byte{wire.SerializeJSON, wire.SerializeRocketMQ} {
		b, _ := wire.Encode(&wire.Command{Code: 11, Opaque: 1, ExtFields: map[string]string{"a": "b"}, Body: []byte{1, 2}, Serialize: ser})
		f.Add(b[4:])
	}
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := wire.Decode(frame)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes and decodes to the same command.
		b, err := wire.Encode(c)
		if err != nil {
			return
		}
		c2, err := wire.Decode(b[4:])
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if c2.Code != c.Code || c2.Opaque != c.Opaque || !bytes.Equal(c2.Body, c.Body) || len(c2.ExtFields) != len(c.ExtFields) {
			t.Fatalf("round trip changed the command: %+v vs %+v", c, c2)
		}
	})
}

func TestPropertiesRoundTrip(t *testing.T) {
	p := map[string]string{"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "X"}
	require.Equal(t, p, wire.ParseProperties(string(wire.AppendProperties(nil, p))))
	require.Nil(t, wire.ParseProperties(""))
	require.Equal(t, map[string]string{"a": "b"}, wire.ParseProperties("junk\x02a\x01b\x02"))
}
