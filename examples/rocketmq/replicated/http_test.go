package replicated

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/meta"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
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
// moves every node's committed offset; a follower forwards it to the
// leader and answers the leader's result. Every node answers
// /admin/offsets from its replica, and its own /metrics.
func TestHTTPAdminResetThroughAFollowerIsForwardedToTheLeader(t *testing.T) {
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

	code, body := reset(f, "offset=3")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"group":"g","topic":"orders","queues":[{"queue":0,"offset":3}]}`, body)
	committedEverywhere(3)
	_, fromFollower := f.core.offsets.Committed("g", "orders", 0)
	require.False(t, fromFollower, "the follower's own offset manager moved")
	off, ok := leader.core.offsets.Committed("g", "orders", 0)
	require.True(t, ok)
	require.Equal(t, int64(3), off, "the leader's own offsets (its connections' epochs)")
	code, body = httpDo(t, http.MethodPost, "http://"+f.HTTPAddr()+"/admin/reset?group=g&topic=orders&timestamp=0")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"group":"g","topic":"orders","queues":[{"queue":0,"offset":0},{"queue":1,"offset":0},{"queue":2,"offset":0},{"queue":3,"offset":0}]}`, body)
	committedEverywhere(0)

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
		require.NotNil(t, rows[1].Committed, "the reset of every queue, through the follower")
		require.Equal(t, int64(0), *rows[1].Committed)

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

// A follower that knows no leader answers a reset 503 with Retry-After and
// the reason, and nothing moves; so does a leader whose raft refuses the
// reset (a reset is never answered 200 unless raft committed it).
func TestHTTPAdminResetWithoutALeaderIsRetryLater(t *testing.T) {
	c, l := resetFixture(t, withHTTP)
	n := c.leaveAlone(l)
	resp, err := http.Post("http://"+n.HTTPAddr()+"/admin/reset?group=g&topic=orders&queue=0&offset=2", "", nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(b))
	require.Equal(t, resetRetryAfter, resp.Header.Get("Retry-After"))
	require.Contains(t, string(b), "knows no leader")
	off, _ := n.Node().Committed("g", "orders", 0)
	require.Equal(t, int64(5), off)
	_, local := n.core.offsets.Committed("g", "orders", 0)
	require.False(t, local)
}

// With ACL on, a follower checks the caller's Basic credentials itself
// (401, 403 there) and forwards the reset signed with them: the leader
// checks it as the INVOKE_BROKER_TO_RESET_OFFSET it is, against its rules
// (Update on the group and the topic, as Apache's ResetOffsetRequestHeader
// and the HTTP endpoint ask: a user with both may reset through any node,
// one with the group only may not), and only then resets.
func TestHTTPAdminResetThroughAFollowerIsCheckedOnBothWithACL(t *testing.T) {
	doc := `{"users":[{"accessKey":"admin","secretKey":"adm1n-secret","superUser":true},
	    {"accessKey":"app","secretKey":"app-secret"},{"accessKey":"ops","secretKey":"ops-secret"},
	    {"accessKey":"grp","secretKey":"grp-secret"}],
	  "rules":[{"user":"app","resources":["Topic:orders","Group:*"],"actions":["Pub","Sub"],"decision":"Allow"},
	    {"user":"ops","resources":["Topic:orders","Group:g"],"actions":["Update"],"decision":"Allow"},
	    {"user":"grp","resources":["Group:g"],"actions":["Update"],"decision":"Allow"}]}`
	c, l := resetFixture(t, withACLDoc(t, doc), withHTTP)
	f := c.nodes[(l+1)%3]
	resetTo := func(user, secret string, offset int64) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/admin/reset?group=g&topic=orders&queue=0&offset=%d", f.HTTPAddr(), offset), nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, secret)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	reset := func(user, secret string) (int, string) { t.Helper(); return resetTo(user, secret, 1) }
	stays := func() {
		t.Helper()
		off, _ := c.nodes[l].Node().Committed("g", "orders", 0)
		require.Equal(t, int64(5), off)
	}
	code, body := reset("", "")
	require.Equal(t, http.StatusUnauthorized, code, body)
	code, body = reset("admin", "wrong")
	require.Equal(t, http.StatusUnauthorized, code, body)
	code, body = reset("app", "app-secret")
	require.Equal(t, http.StatusForbidden, code, body)
	stays()
	code, body = reset("grp", "grp-secret")
	require.Equal(t, http.StatusForbidden, code, body)
	stays()
	// The leader's own check: the same reset, signed by grp, sent to it
	// directly, is refused there too.
	direct := adminCmd(broker.CodeInvokeBrokerToResetOffset, map[string]string{"group": "g", "topic": "orders", "queueId": "0",
		"offset": "1", "timestamp": "0", acl.FieldAccessKey: "grp"}, nil)
	direct.ExtFields[acl.FieldSignature] = acl.SignRemoting("grp-secret", direct.ExtFields, nil)
	resp, err := call(c.nodes[l].BrokerAddr(), direct)
	require.NoError(t, err)
	require.Equal(t, int16(16), resp.Code, resp.Remark)
	stays()

	for _, at := range []struct {
		user, secret string
		offset       int64
	}{{"ops", "ops-secret", 1}, {"admin", "adm1n-secret", 2}} {
		code, body := resetTo(at.user, at.secret, at.offset)
		require.Equal(t, http.StatusOK, code, "%s: %s", at.user, body)
		require.JSONEq(t, fmt.Sprintf(`{"group":"g","topic":"orders","queues":[{"queue":0,"offset":%d}]}`, at.offset), body)
		for i, s := range c.nodes {
			require.Eventually(t, func() bool {
				off, _ := s.Node().Committed("g", "orders", 0)
				return off == at.offset
			}, 10*time.Second, 10*time.Millisecond, "%s: node %d", at.user, i)
		}
	}
}

// parseResetBody reads what the leader answers (meta.ResetOffsetBody).
func TestParseResetBodyReadsTheLeadersAnswer(t *testing.T) {
	out, err := parseResetBody(meta.ResetOffsetBody("broker-a", "orders", map[int]int64{2: 7, 0: 0, 10: 123456789}))
	require.NoError(t, err)
	require.Equal(t, []resetQueue{{0, 0}, {2, 7}, {10, 123456789}}, out)
	_, err = parseResetBody([]byte(`{"offsetTable":{}}`))
	require.Error(t, err)
}
