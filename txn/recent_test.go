package txn

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

// The half a resolution takes from memory is the one the log holds, field
// for field: what a commit appends does not depend on whether it was kept.
func TestRecentHalfEqualsTheLogs(t *testing.T) {
	r := newRig(t, Options{})
	h, err := r.m.Prepare(&store.Message{Topic: "orders", QueueID: 1, Tags: "t", Keys: []string{"k"}, Body: []byte("a"),
		Properties: map[string]string{PropUniqKey: "u", "x": "y"}}, "pg")
	require.NoError(t, err)
	h.Properties["x"] = "changed by the caller" // Prepare's answer is the caller's
	kept := r.m.recent.get(h.QueueOffset)
	require.NotNil(t, kept)
	msgs, err := r.log.Read(HalfTopic, 0, h.QueueOffset, 1)
	require.NoError(t, err)
	assert.Equal(t, msgs[0], kept)
	require.NoError(t, r.m.Commit(h.QueueOffset))
	assert.Nil(t, r.m.recent.get(h.QueueOffset), "gone once resolved")
}

// Past its limit of halves the oldest is no longer kept, and its
// resolution reads it from the log.
func TestResolvingAHalfNoLongerKeptReadsTheLog(t *testing.T) {
	r := newRig(t, Options{})
	r.m.recent.limit = 3
	var ids []int64
	for i := 0; i < 5; i++ {
		ids = append(ids, r.prepare("orders", itoa(i)))
	}
	assert.Nil(t, r.m.recent.get(ids[0]))
	assert.Nil(t, r.m.recent.get(ids[1]))
	assert.NotNil(t, r.m.recent.get(ids[2]))
	r.m.recent.mu.Lock()
	assert.Len(t, r.m.recent.m, 3)
	r.m.recent.mu.Unlock()
	require.NoError(t, r.m.Commit(ids[0]))
	require.NoError(t, r.m.Commit(ids[2]))
	assert.Equal(t, []string{"0", "2"}, r.delivered("orders"))
}
