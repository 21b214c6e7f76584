package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/store"
)

// testClock is the broker's store clock in these tests: StoredAt is what
// the test says.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// queryIDs runs queryMsgByKey and returns the message ids it printed.
func queryIDs(t *testing.T, ns string, args ...string) []string {
	t.Helper()
	code, out, errOut := mqadmin(append([]string{"queryMsgByKey", "-n", ns}, args...)...)
	require.Equal(t, exitOK, code, "%v: %s", args, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.True(t, strings.HasPrefix(lines[0], "#Message ID"), out)
	var ids []string
	for _, l := range lines[1:] {
		ids = append(ids, strings.Fields(l)[0])
	}
	return ids
}

// TestQueryMsgByKeyIsServedByTheKeyIndex: queryMsgByKey (QUERY_MESSAGE)
// finds a key behind 12,000 messages of other keys in the same queue (the
// old scan read 10,000 per queue), honours the time range (milliseconds,
// inclusive) and the max number (the newest), answers no message whose key
// only looks alike (a longer key, the same key in another topic), and
// queryMsgById -t finds a message by its unique key.
func TestQueryMsgByKeyIsServedByTheKeyIndex(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	b := rmqtest.StartConfig(t, server.Config{Core: brokercore.Options{Store: store.Options{Now: clock.Now}}})
	ns := b.NameSrv
	code, _, errOut := mqadmin("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "qk", "-r", "1", "-w", "1")
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = mqadmin("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "qk-other", "-r", "1", "-w", "1")
	require.Equal(t, exitOK, code, errOut)
	st := b.Server.Core().Store()

	for i := 0; i < 12_000; i += 500 {
		batch := make([]*store.Message, 500)
		for j := range batch {
			batch[j] = &store.Message{Topic: "qk", Keys: []string{"noise-" + strconv.Itoa(i+j)}, Body: []byte("n"),
				Properties: map[string]string{"UNIQ_KEY": fmt.Sprintf("NOISE%08d", i+j), "KEYS": "noise-" + strconv.Itoa(i+j)}}
		}
		require.NoError(t, st.Append(batch...))
	}
	t0 := clock.Now()
	var ids []string
	for i := range 5 {
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		id := fmt.Sprintf("NEEDLE%04d", i)
		ids = append(ids, id)
		require.NoError(t, st.Append(
			&store.Message{Topic: "qk", Keys: []string{"order-1"}, Body: []byte("x"), Properties: map[string]string{"UNIQ_KEY": id, "KEYS": "order-1"}},
			&store.Message{Topic: "qk", Keys: []string{"order-10"}, Body: []byte("x"), Properties: map[string]string{"UNIQ_KEY": "LONGER" + id, "KEYS": "order-10"}},
			&store.Message{Topic: "qk-other", Keys: []string{"order-1"}, Body: []byte("x"), Properties: map[string]string{"UNIQ_KEY": "OTHER" + id, "KEYS": "order-1"}},
		))
	}
	ms := func(i int) string { return strconv.FormatInt(t0.Add(time.Duration(i)*time.Second).UnixMilli(), 10) }

	assert.Equal(t, ids, queryIDs(t, ns, "-t", "qk", "-k", "order-1"), "found behind 12,000 others, nothing alike")
	assert.Equal(t, ids[1:4], queryIDs(t, ns, "-t", "qk", "-k", "order-1", "-b", ms(1), "-e", ms(3)), "the time range, inclusive")
	assert.Equal(t, ids[3:], queryIDs(t, ns, "-t", "qk", "-k", "order-1", "-m", "2"), "max keeps the newest")
	assert.Equal(t, []string{"NOISE00000007"}, queryIDs(t, ns, "-t", "qk", "-k", "noise-7"), "the oldest message too")
	assert.Empty(t, queryIDs(t, ns, "-t", "qk", "-k", "order-1", "-b", ms(10)))

	code, out, errOut := mqadmin("queryMsgById", "-n", ns, "-t", "qk", "-i", ids[2])
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, ids[2])
	assert.Contains(t, out, sprintf("%-20s %s", "Keys:", "[order-1]"))

	// After a restart the key index answers the same (from its files).
	require.NoError(t, b.Restart())
	assert.Equal(t, ids, queryIDs(t, b.NameSrv, "-t", "qk", "-k", "order-1"))
}

// indexFiles lists the store's index files of topic's queues.
func indexFiles(t *testing.T, dir, topic string) []string {
	t.Helper()
	prefix := base64.RawURLEncoding.EncodeToString([]byte(topic)) + "."
	ents, err := os.ReadDir(filepath.Join(dir, brokercore.StoreDir, "index"))
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestDeleteTopicReleasesTheDataAndTheOffsets: deleteTopic removes the
// topic's consumer offsets of every group (GET_CONSUME_STATS no longer
// shows them; other topics' stay) and its queues in the store (reads
// return nothing, its index files are gone), durably across a restart; a
// topic created again under the name starts empty.
func TestDeleteTopicReleasesTheDataAndTheOffsets(t *testing.T) {
	b := rmqtest.Start(t)
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := mqadmin(append([]string{args[0], "-n", b.NameSrv}, args[1:]...)...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		return out
	}
	must("updateTopic", "-c", "DefaultCluster", "-t", "gone", "-r", "2", "-w", "2")
	must("updateTopic", "-c", "DefaultCluster", "-t", "kept", "-r", "1", "-w", "1")
	st := b.Server.Core().Store()
	for i := range 300 {
		require.NoError(t, st.Append(&store.Message{Topic: "gone", QueueID: i % 2, Keys: []string{"k"}, Body: []byte("g")},
			&store.Message{Topic: "kept", Keys: []string{"k"}, Body: []byte("k")}))
	}
	for _, g := range []string{"g1", "g2"} {
		must("updateSubGroup", "-c", "DefaultCluster", "-g", g)
		for q := range 2 {
			require.NoError(t, b.Server.Core().Offsets().Commit(g, "gone", q, 100))
		}
		require.NoError(t, b.Server.Core().Offsets().Commit(g, "kept", 0, 50))
	}
	require.NoError(t, b.Restart()) // the index files are written
	st = b.Server.Core().Store()
	require.NotEmpty(t, indexFiles(t, b.Dir, "gone"))
	assert.Contains(t, must("consumerProgress", "-g", "g1"), "gone")

	out := must("deleteTopic", "-c", "DefaultCluster", "-t", "gone")
	assert.Contains(t, out, "delete topic [gone] from NameServer success.")
	check := func() {
		t.Helper()
		st := b.Server.Core().Store()
		for _, g := range []string{"g1", "g2"} {
			out := must("consumerProgress", "-g", g)
			assert.NotContains(t, out, "gone", "GET_CONSUME_STATS of %s", g)
			assert.Contains(t, out, "kept")
			_, ok := b.Server.Core().Offsets().Committed(g, "gone", 0)
			assert.False(t, ok)
		}
		for q := range 2 {
			next := st.MaxOffset("gone", q)
			assert.Equal(t, next, st.MinOffset("gone", q), "queue %d holds nothing", q)
			got, err := st.Read("gone", q, next, 32)
			require.NoError(t, err)
			assert.Empty(t, got)
		}
		assert.Empty(t, indexFiles(t, b.Dir, "gone"), "the queues' index files are gone")
		got, err := st.Read("kept", 0, 0, 1000)
		require.NoError(t, err)
		assert.Len(t, got, 300, "another topic is untouched")
		byKey, err := st.LookupKey("gone", "k", time.Time{}, time.Time{}, 64)
		require.NoError(t, err)
		assert.Empty(t, byKey)
	}
	check()
	require.NoError(t, b.Restart())
	check()
}
