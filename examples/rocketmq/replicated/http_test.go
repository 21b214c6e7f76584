package replicated

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

func withHTTP(cfg *Config) { cfg.MetricsAddr = "127.0.0.1:0" }

func httpDo(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The admin endpoint's offset reset goes through raft on the leader and
// moves every node's committed offset; a follower refuses it (503, naming
// the leader and mqadmin's resetOffsetByTime) and nothing moves. Every
// node answers /admin/offsets from its replica, and its own /metrics.
func TestHTTPAdminResetGoesThroughRaftAndAFollowerRefusesIt(t *testing.T) {
	c := startCluster(t, 3, withHTTP)
	l := c.leader(30 * time.Second)
	f := c.nodes[(l+1)%3]
	leader := c.nodes[l]
	w := writer{leader.Node()}
	var msgs []*store.Message
	for range 5 {
		msgs = append(msgs, &store.Message{Topic: "orders", Body: []byte("m")})
	}
	require.NoError(t, w.Append(msgs))
	require.NoError(t, w.CommitOffset("g", "orders", 0, 5))
	for _, s := range c.nodes {
		_, err := s.Topics().Ensure("orders", 4)
		require.NoError(t, err)
	}
	committedEverywhere := func(want int64) {
		t.Helper()
		for i, s := range c.nodes {
			require.Eventually(t, func() bool {
				off, ok := s.Node().Committed("g", "orders", 0)
				return ok && off == want
			}, 10*time.Second, 10*time.Millisecond, "node %d", i)
		}
	}
	committedEverywhere(5)
	reset := func(s *Server, q string) (int, string) {
		return httpDo(t, http.MethodPost, "http://"+s.HTTPAddr()+"/admin/reset?group=g&topic=orders&queue=0&"+q)
	}

	code, body := reset(f, "offset=2")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, "does not lead")
	require.Contains(t, body, leader.BrokerAddr())
	require.Contains(t, body, "resetOffsetByTime")
	committedEverywhere(5)
	_, fromFollower := f.core.offsets.Committed("g", "orders", 0)
	require.False(t, fromFollower, "the follower's own offset manager moved")

	code, body = reset(leader, "offset=2")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"group":"g","topic":"orders","queues":[{"queue":0,"offset":2}]}`, body)
	committedEverywhere(2)
	code, body = reset(leader, "timestamp=0") // the first message
	require.Equal(t, http.StatusOK, code, body)
	committedEverywhere(0)

	for _, s := range c.nodes {
		code, body = httpDo(t, http.MethodGet, "http://"+s.HTTPAddr()+"/admin/offsets?group=g&topic=orders")
		require.Equal(t, http.StatusOK, code, body)
		var rows []struct {
			Queue     int    `json:"queue"`
			Committed *int64 `json:"committed"`
			Max       int64  `json:"max"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &rows))
		require.Len(t, rows, 4)
		require.NotNil(t, rows[0].Committed)
		require.Equal(t, int64(0), *rows[0].Committed)
		require.Equal(t, int64(5), rows[0].Max)
		require.Nil(t, rows[1].Committed)

		_, body = httpDo(t, http.MethodGet, "http://"+s.HTTPAddr()+"/metrics")
		leads := 0
		if s == leader {
			leads = 1
		}
		require.Contains(t, body, fmt.Sprintf("\nrocketmq_replica_leader %d\n", leads))
		require.True(t, strings.Contains(body, "rocketmq_store_"), "the node's store stats")
	}
}

// With ACL on, the endpoint takes an ACL user's HTTP Basic credentials, as
// a single broker's.
func TestHTTPAdminNeedsCredentialsWithACL(t *testing.T) {
	c := startCluster(t, 3, withACL(t), withHTTP)
	l := c.leader(30 * time.Second)
	url := "http://" + c.nodes[l].HTTPAddr()
	code, body := httpDo(t, http.MethodPost, url+"/admin/reset?group=g&topic=orders&offset=0")
	require.Equal(t, http.StatusUnauthorized, code, body)
	code, body = httpDo(t, http.MethodGet, url+"/metrics")
	require.Equal(t, http.StatusUnauthorized, code, body)
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	require.NoError(t, err)
	req.SetBasicAuth("reader", "r3ader-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
