package replica

import (
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// Entries are decoded on every node from bytes raft hands over; whatever
// the bytes, decoding returns an entry or errBadEntry, never panics, and
// an entry it accepts encodes back to the same bytes.
func FuzzDecodeEntry(f *testing.F) {
	at := time.Unix(1_700_000_000, 5)
	for _, e := range []*entry{
		{Kind: kindProduce, At: at, Msgs: []*store.Message{{Topic: "t", QueueID: 3, Tags: "a", Keys: []string{"k"}, Body: []byte("b"),
			Properties: map[string]string{"x": "y"}, BornAt: at, ReconsumeTimes: 2}}},
		{Kind: kindDeliver, At: at, Msgs: []*store.Message{{Topic: "t"}}, Progress: []byte("p"), Prev: []byte{}},
		{Kind: kindProgress, Progress: []byte("p")},
		{Kind: kindCommit, Commits: []commitItem{{Group: "g", Topic: "t", Queue: 1, Offset: 9, Epoch: 2}}},
		{Kind: kindReset, Commits: []commitItem{{Group: "g", Topic: "t"}}},
		{Kind: kindInit, Text: "c"},
		{Kind: kindMember, Text: "n1", Text2: "127.0.0.1:1"},
		{Kind: kindRelease, At: at, Text: "t", Msgs: []*store.Message{{Topic: "RMQ_SYS_X", Body: []byte("delete t")}}},
		{Kind: kindForget, Text: "g"},
		{Kind: kindFenced, At: at, Term: 7, Msgs: []*store.Message{{Topic: "t"}, {Topic: "RMQ_SYS_TRANS_OP_HALF_TOPIC", Body: []byte("0")}}},
		{Kind: kindFenced, At: at, Term: 7, Split: []int{1, 1}, Msgs: []*store.Message{{Topic: "t"}, {Topic: "u"}}},
	} {
		f.Add(encodeEntry(e))
	}
	f.Add([]byte{})
	f.Add([]byte{99})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEntry(b)
		if err != nil {
			require.ErrorIs(t, err, errBadEntry)
			return
		}
		again, err := decodeEntry(encodeEntry(e))
		require.NoError(t, err)
		require.Equal(t, e, again)
	})
}
