package acl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const authDoc = `{"users":[{"accessKey":"app","secretKey":"s3cret"},{"accessKey":"other","secretKey":"x"}]}`

func TestAuthenticateV5AcceptsTheClientAndCountsIt(t *testing.T) {
	clk := newClock()
	a := mustNew(t, authDoc, Options{Now: clk.Now})
	dt, auth := clientV5Headers("app", "s3cret", clk.Now())
	user, err := a.AuthenticateV5(auth, dt)
	require.NoError(t, err)
	assert.Equal(t, "app", user)
	// Calls within the same second share the signature: all accepted.
	clk.Advance(900 * time.Millisecond)
	_, err = a.AuthenticateV5(auth, dt)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), a.Stats().Authenticated)
}

func TestAuthenticateV5Refusals(t *testing.T) {
	clk := newClock()
	a := mustNew(t, authDoc, Options{Now: clk.Now, MaxSkew: time.Minute, ReplayWindow: 5 * time.Second})
	now := clk.Now()
	dt, _ := clientV5Headers("app", "s3cret", now)
	cases := []struct {
		name    string
		auth    string
		dt      string
		wantErr error
	}{
		{"no header", "", dt, ErrNoCredentials},
		{"garbage", "Basic abc", dt, ErrMalformed},
		{"unknown key", V5Authorization("ghost", "s3cret", dt), dt, ErrUnknownUser},
		{"wrong secret", V5Authorization("app", "guess", dt), dt, ErrBadSignature},
		{"another user's secret", V5Authorization("app", "x", dt), dt, ErrBadSignature},
		{"date-time not the signed one", V5Authorization("app", "s3cret", dt), "20260301T120001Z", ErrBadSignature},
		{"no date-time", V5Authorization("app", "s3cret", dt), "", ErrMalformed},
		{"too old", V5Authorization("app", "s3cret", "20260301T115858Z"), "20260301T115858Z", ErrClockSkew},
		{"from the future", V5Authorization("app", "s3cret", "20260301T120102Z"), "20260301T120102Z", ErrClockSkew},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := a.AuthenticateV5(c.auth, c.dt)
			require.ErrorIs(t, err, c.wantErr)
			assert.ErrorIs(t, err, ErrUnauthenticated)
		})
	}
	assert.Equal(t, uint64(len(cases)), a.Stats().AuthFailures)
}

func TestAuthenticateV5RefusesAReplayAfterTheWindow(t *testing.T) {
	clk := newClock()
	a := mustNew(t, authDoc, Options{Now: clk.Now, MaxSkew: time.Minute, ReplayWindow: 5 * time.Second})
	dt, auth := clientV5Headers("app", "s3cret", clk.Now())
	_, err := a.AuthenticateV5(auth, dt)
	require.NoError(t, err)
	clk.Advance(5 * time.Second)
	_, err = a.AuthenticateV5(auth, dt)
	require.NoError(t, err, "still inside the replay window")
	clk.Advance(time.Millisecond)
	_, err = a.AuthenticateV5(auth, dt)
	assert.ErrorIs(t, err, ErrReplay, "the same signature later is a recording played back")
	assert.Equal(t, uint64(1), a.Stats().Replays)
	// A fresh signature of the same user is fine.
	dt2, auth2 := clientV5Headers("app", "s3cret", clk.Now())
	_, err = a.AuthenticateV5(auth2, dt2)
	assert.NoError(t, err)
}

func TestAuthenticateV5ReverifiesAfterASecretChange(t *testing.T) {
	// The verified-signature cache must not vouch for a secret a reload
	// replaced.
	clk := newClock()
	a := mustNew(t, authDoc, Options{Now: clk.Now})
	dt, auth := clientV5Headers("app", "s3cret", clk.Now())
	_, err := a.AuthenticateV5(auth, dt)
	require.NoError(t, err)
	require.NoError(t, a.Reload(mustParse(t, `{"users":[{"accessKey":"app","secretKey":"rotated"}]}`)))
	_, err = a.AuthenticateV5(auth, dt)
	assert.ErrorIs(t, err, ErrBadSignature)
	require.NoError(t, a.Reload(mustParse(t, `{"users":[]}`)))
	_, err = a.AuthenticateV5(auth, dt)
	assert.ErrorIs(t, err, ErrUnknownUser, "a removed user is gone at once")
}

func TestReplayCacheStaysBounded(t *testing.T) {
	clk := newClock()
	a := mustNew(t, authDoc, Options{Now: clk.Now, ReplayCacheSize: 8, MaxSkew: time.Hour})
	for i := range 50 {
		dt, auth := clientV5Headers("app", "s3cret", t0.Add(-time.Duration(i)*time.Second))
		_, err := a.AuthenticateV5(auth, dt)
		require.NoError(t, err)
	}
	a.replay.mu.Lock()
	n := len(a.replay.m)
	a.replay.mu.Unlock()
	assert.LessOrEqual(t, n, 8)
}

func TestAuthenticateRemoting(t *testing.T) {
	a := mustNew(t, authDoc, Options{})
	body := []byte("hello")
	fields := map[string]string{"topic": "orders", "queueId": "1"}
	user, err := a.AuthenticateRemoting(clientV2Sign("app", "s3cret", fields, body), body)
	require.NoError(t, err)
	assert.Equal(t, "app", user)

	_, err = a.AuthenticateRemoting(fields, body)
	assert.ErrorIs(t, err, ErrNoCredentials)
	_, err = a.AuthenticateRemoting(map[string]string{"AccessKey": "app"}, body)
	assert.ErrorIs(t, err, ErrMalformed)
	_, err = a.AuthenticateRemoting(clientV2Sign("ghost", "s3cret", fields, body), body)
	assert.ErrorIs(t, err, ErrUnknownUser)
	_, err = a.AuthenticateRemoting(clientV2Sign("app", "wrong", fields, body), body)
	assert.ErrorIs(t, err, ErrBadSignature)
	tampered := clientV2Sign("app", "s3cret", fields, body)
	tampered["topic"] = "payroll"
	_, err = a.AuthenticateRemoting(tampered, body)
	assert.ErrorIs(t, err, ErrBadSignature)
	_, err = a.AuthenticateRemoting(clientV2Sign("app", "s3cret", fields, body), []byte("other"))
	assert.ErrorIs(t, err, ErrBadSignature)
	s := a.Stats()
	assert.Equal(t, uint64(1), s.Authenticated)
	assert.Equal(t, uint64(6), s.AuthFailures)
}

func TestAuthenticateRemotingRefusesARotatedSecretAtOnce(t *testing.T) {
	// The keyed HMAC states pooled per user must go with the secret they
	// were keyed with: after a reload (or an edit) rotates it, the old
	// secret's signatures are refused from the next request on.
	a := mustNew(t, authDoc, Options{})
	body := []byte("hello")
	fields := map[string]string{"topic": "orders", "queueId": "1"}
	old := clientV2Sign("app", "s3cret", fields, body)
	for range 8 { // warm the pool with states keyed by the old secret
		_, err := a.AuthenticateRemoting(old, body)
		require.NoError(t, err)
	}
	require.NoError(t, a.Reload(mustParse(t, `{"users":[{"accessKey":"app","secretKey":"rotated"}]}`)))
	_, err := a.AuthenticateRemoting(old, body)
	require.ErrorIs(t, err, ErrBadSignature, "the old secret, right after the reload")
	_, err = a.AuthenticateRemoting(clientV2Sign("app", "rotated", fields, body), body)
	require.NoError(t, err)

	require.NoError(t, a.Edit(func(c *Config) error {
		c.Users[0].SecretKey = "edited"
		return nil
	}, nil))
	_, err = a.AuthenticateRemoting(clientV2Sign("app", "rotated", fields, body), body)
	require.ErrorIs(t, err, ErrBadSignature, "the secret an edit replaced")
	_, err = a.AuthenticateRemoting(clientV2Sign("app", "edited", fields, body), body)
	require.NoError(t, err)
	assert.Equal(t, "edited", a.Config().Users[0].SecretKey)
}

func TestAuthenticateSecret(t *testing.T) {
	a := mustNew(t, authDoc, Options{})
	user, err := a.AuthenticateSecret("app", "s3cret")
	require.NoError(t, err)
	assert.Equal(t, "app", user)
	_, err = a.AuthenticateSecret("app", "s3cre")
	assert.ErrorIs(t, err, ErrBadSignature)
	_, err = a.AuthenticateSecret("ghost", "s3cret")
	assert.ErrorIs(t, err, ErrUnknownUser)
	_, err = a.AuthenticateSecret("", "")
	assert.ErrorIs(t, err, ErrNoCredentials)
}

// TestAuthenticateRemotingSecurityToken: the token is signed like any
// other field (Apache's broker, Java's AclClientRPCHook) and otherwise
// ignored; the v2 Go client's unsigned token is refused with a remark
// naming it.
func TestAuthenticateRemotingSecurityToken(t *testing.T) {
	a := mustNew(t, authDoc, Options{})
	body := []byte("hello")
	fields := map[string]string{"topic": "orders", "queueId": "1"}

	goClient := clientV2Sign("app", "s3cret", fields, body) // as rocketmq-client-go/v2: token added, not signed
	goClient[FieldSecurityToken] = "sts"
	_, err := a.AuthenticateRemoting(goClient, body)
	require.ErrorIs(t, err, ErrBadSignature)
	assert.Contains(t, err.Error(), "SecurityToken field is not signed")

	java := map[string]string{"topic": "orders", "queueId": "1", FieldAccessKey: "app", FieldSecurityToken: "sts"}
	java[FieldSignature] = SignRemoting("s3cret", java, body) // as AclClientRPCHook: token signed
	user, err := a.AuthenticateRemoting(java, body)
	require.NoError(t, err)
	assert.Equal(t, "app", user)

	java[FieldSecurityToken] = "other"
	_, err = a.AuthenticateRemoting(java, body)
	require.ErrorIs(t, err, ErrBadSignature, "the token is signed: changing it breaks the signature")
	assert.NotContains(t, err.Error(), "SecurityToken", "a plain mismatch says nothing about the token")

	wrong := clientV2Sign("app", "wrong", fields, body)
	wrong[FieldSecurityToken] = "sts"
	_, err = a.AuthenticateRemoting(wrong, body)
	require.ErrorIs(t, err, ErrBadSignature)
	assert.NotContains(t, err.Error(), "SecurityToken", "a wrong secret is a plain mismatch")
}
