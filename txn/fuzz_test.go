package txn

import (
	"testing"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// FuzzDecodeProgress: any bytes decode to a progress that encodes back to
// the same bytes, or to ErrCorrupt; never a panic.
func FuzzDecodeProgress(f *testing.F) {
	f.Add(encodeProgress(progress{half: 3, op: 7, halfNext: 9, opNext: 12}))
	f.Add(encodeProgress(progress{}))
	f.Add([]byte("BCTX\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeProgress(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, b, encodeProgress(p))
	})
}

// FuzzParseRecords: half and op records of any content are read or
// refused, never a panic, and an op record round-trips.
func FuzzParseRecords(f *testing.F) {
	f.Add("12", "commit", "orders", "3", "pg", "4", "30")
	f.Add("x", "check", "", "-1", "", "", "-5")
	f.Fuzz(func(t *testing.T, body, op, topic, qid, group, floor, imm string) {
		if id, k, ok := parseOp(&store.Message{Body: []byte(body), Properties: map[string]string{propOp: op}}); ok {
			id2, k2, ok2 := parseOp(opRecord(id, k))
			require.True(t, ok2)
			require.Equal(t, id, id2)
			require.Equal(t, k, k2)
		}
		h := &store.Message{Topic: HalfTopic, Properties: map[string]string{PropRealTopic: topic, PropRealQueue: qid,
			PropProducerGroup: group, propOpFloor: floor, PropCheckImmunityTime: imm}}
		if hi, ok := parseHalf(h); ok {
			require.NotEmpty(t, hi.group)
			require.GreaterOrEqual(t, int64(hi.immunity), int64(0))
			_ = restore(h)
			_ = committed(h)
		}
	})
}
