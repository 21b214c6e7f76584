package wire

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func FuzzFastHeader(f *testing.F) {
	f.Add([]byte(`{"code":105,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"topic":"TBW102"}}`))
	f.Add([]byte(`{"code":-1,"extFields":{"a":"\u00e9\n\"x\\","b":""}, "remark":"\ud83d\ude00"}`))
	f.Add([]byte(`{"code":1,"code":2}`))
	f.Add([]byte(`{"code":1,"extFields":{"n":3}}`))
	f.Add([]byte(` { "code" : 10 , "opaque" : 2147483647 } `))
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := fastDecodeHeader(b)
		if !ok {
			return
		}
		std, err := decodeJSONHeaderStd(b)
		if err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v): %q", err, b)
		}
		if fast.ExtFields == nil && std.ExtFields != nil && len(std.ExtFields) == 0 {
			std.ExtFields = nil
		}
		if std.ExtFields == nil && fast.ExtFields != nil && len(fast.ExtFields) == 0 {
			fast.ExtFields = nil
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("fast %+v != encoding/json %+v for %q", fast, std, b)
		}
	})
}

func FuzzFastHeaderEncode(f *testing.F) {
	f.Add(int16(10), int32(5), "remark", "k", "v\x00<>&\u2028\xff")
	f.Fuzz(func(t *testing.T, code int16, opaque int32, remark, k, v string) {
		cmd := &Command{Code: code, Opaque: opaque, Flag: 1, Version: 317, Remark: remark, ExtFields: map[string]string{k: v, "x": "y"}}
		mine := appendJSONHeader(nil, cmd, "GO")
		std, err := json.Marshal(jsonHeader{Code: cmd.Code, Language: "GO", Version: cmd.Version, Opaque: cmd.Opaque,
			Flag: cmd.Flag, Remark: cmd.Remark, ExtFields: cmd.ExtFields})
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(mine, &a); err != nil {
			t.Fatalf("not JSON: %v: %s", err, mine)
		}
		if err := json.Unmarshal(std, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s != %s", mine, std)
		}
	})
}

func TestOffsetMsgIDAndPropertiesLen(t *testing.T) {
	host := [8]byte{127, 0, 0, 1, 0, 0, 0x2a, 0x9f}
	require.Equal(t, "7F00000100002A9F00000000000004D2", OffsetMsgID(host, 1234))
	require.Equal(t, "7F00000100002A9F7FFFFFFFFFFFFFFF", OffsetMsgID(host, 1<<63-1))
	for _, p := range []map[string]string{nil, {}, {"A": "1"}, {"UNIQ_KEY": "abc", "TAGS": "t", PropFlag: "3", PropSysFlag: "1"}} {
		require.Equal(t, len(AppendProperties(nil, p)), PropertiesLen(p))
	}
}
