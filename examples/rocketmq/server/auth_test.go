package server_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/store"
)

const adminACL = `{
  "users": [
    {"accessKey": "admin", "secretKey": "adm1n", "superUser": true},
    {"accessKey": "app", "secretKey": "s3cret"},
    {"accessKey": "ops", "secretKey": "0ps"}
  ],
  "rules": [
    {"user": "app", "resources": ["Topic:t", "Group:g"], "actions": ["Sub", "Get"], "decision": "Allow"},
    {"user": "ops", "resources": ["*"], "actions": ["Update", "Get"], "decision": "Allow"}
  ]
}`

func startWithACL(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	c, err := acl.Parse([]byte(adminACL))
	require.NoError(t, err)
	cfg.ACL, err = acl.New(c, acl.Options{})
	require.NoError(t, err)
	return start(t, cfg)
}

func call(t *testing.T, method, u, ak, sk string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	require.NoError(t, err)
	if ak != "" {
		req.SetBasicAuth(ak, sk)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminEndpointsNeedACredentialWhenACLIsOn(t *testing.T) {
	s := startWithACL(t, server.Config{})
	require.NoError(t, s.Core().Store().Append(&store.Message{Topic: "t", Body: []byte("x")}))
	_, err := s.Topics().Ensure("t", 0)
	require.NoError(t, err)
	base := "http://" + s.MetricsAddr()
	reset := base + "/admin/reset?group=g&topic=t&offset=1"
	offsets := base + "/admin/offsets?group=g&topic=t"

	for name, c := range map[string]struct {
		method, url, ak, sk string
		want                int
	}{
		"reset without credentials":    {http.MethodPost, reset, "", "", http.StatusUnauthorized},
		"reset with a wrong secret":    {http.MethodPost, reset, "ops", "guess", http.StatusUnauthorized},
		"reset by an unknown key":      {http.MethodPost, reset, "ghost", "0ps", http.StatusUnauthorized},
		"reset by a user without it":   {http.MethodPost, reset, "app", "s3cret", http.StatusForbidden},
		"offsets without credentials":  {http.MethodGet, offsets, "", "", http.StatusUnauthorized},
		"metrics without credentials":  {http.MethodGet, base + "/metrics", "", "", http.StatusUnauthorized},
		"offsets by a user allowed it": {http.MethodGet, offsets, "app", "s3cret", http.StatusOK},
		"metrics by any user":          {http.MethodGet, base + "/metrics", "app", "s3cret", http.StatusOK},
	} {
		code, body := call(t, c.method, c.url, c.ak, c.sk)
		assert.Equal(t, c.want, code, "%s: %s", name, body)
	}
	_, ok := s.Core().Offsets().Committed("g", "t", 0)
	assert.False(t, ok, "no refused reset changed an offset")

	code, body := call(t, http.MethodPost, reset, "ops", "0ps")
	require.Equal(t, http.StatusOK, code, body)
	code, body = call(t, http.MethodPost, base+"/admin/reset?group=g&topic=t&offset=0", "admin", "adm1n")
	require.Equal(t, http.StatusOK, code, body)

	_, metrics := call(t, http.MethodGet, base+"/metrics", "admin", "adm1n")
	assert.Contains(t, metrics, "rocketmq_acl_denied_total 1")
	assert.Contains(t, metrics, "rocketmq_acl_auth_failures_total")
}

func TestMetricsCanBePublicWithACLOn(t *testing.T) {
	s := startWithACL(t, server.Config{PublicMetrics: true})
	code, _ := get(t, "http://"+s.MetricsAddr()+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	code, _ = call(t, http.MethodGet, "http://"+s.MetricsAddr()+"/admin/offsets?group=g&topic=t", "", "")
	assert.Equal(t, http.StatusUnauthorized, code, "admin calls still need their credential")
}

func TestStartRefusesANonLoopbackAddressWithACLOff(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0"} {
		_, err := server.Start(server.Config{Dir: t.TempDir(), BrokerAddr: addr, NameSrvAddr: "127.0.0.1:0", MetricsAddr: "-"})
		require.Error(t, err, addr)
		assert.True(t, errors.Is(err, server.ErrInsecureListen), "%s: %v", addr, err)
		assert.True(t, strings.Contains(err.Error(), "insecure-allow-remote"), "the error names the flag")
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		s, err := server.Start(server.Config{Dir: t.TempDir(), BrokerAddr: "127.0.0.1:0", NameSrvAddr: "127.0.0.1:0",
			MetricsAddr: addr, GRPCAddr: "-"})
		if err != nil {
			assert.False(t, errors.Is(err, server.ErrInsecureListen), "%s: %v", addr, err)
			continue
		}
		require.NoError(t, s.Close())
	}
}
