package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// clientV2Sign is rocketmq-client-go/v2's ACLInterceptor
// (internal/remote/interceptor.go, v2.1.3-0.20251226070945-2173d070fd1b)
// with only its inputs and output changed: what the official client puts
// in ExtFields, so the broker's check is tested against the client's code
// rather than against its own idea of it.
func clientV2Sign(ak, sk string, extFields map[string]string, body []byte) map[string]string {
	cmdExt := make(map[string]string, len(extFields)+2)
	for k, v := range extFields {
		cmdExt[k] = v
	}
	m := make(map[string]string)
	order := make([]string, 1)
	m["AccessKey"] = ak
	order[0] = "AccessKey"
	for k, v := range cmdExt {
		m[k] = v
		order = append(order, k)
	}
	sort.Slice(order, func(i, j int) bool {
		return strings.Compare(order[i], order[j]) < 0
	})
	content := ""
	for idx := range order {
		content += m[order[idx]]
	}
	buf := make([]byte, len(content)+len(body))
	copy(buf, []byte(content))
	copy(buf[len(content):], body)
	mac := hmac.New(func() hash.Hash { return sha1.New() }, []byte(sk))
	mac.Write(buf)
	cmdExt["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	cmdExt["AccessKey"] = ak
	return cmdExt
}

// clientV5Headers is the Go v5 client's Sign (golang/v5 client.go, v5.1.4):
// the x-mq-date-time and authorization metadata it sends at now.
func clientV5Headers(ak, secret string, now time.Time) (dateTime, authorization string) {
	dateTime = now.Format("20060102T150405Z")
	authorization = fmt.Sprintf("%s %s=%s/%s/%s, %s=%s, %s=%s",
		"MQv2-HMAC-SHA1", "Credential", ak, "", "Rocketmq", "SignedHeaders", "x-mq-date-time", "Signature",
		func() string {
			h := hmac.New(sha1.New, []byte(secret))
			h.Write([]byte(dateTime))
			return hex.EncodeToString(h.Sum(nil))
		}())
	return dateTime, authorization
}

func TestRemotingSignatureMatchesTheV2Client(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ak := rapid.StringMatching(`[A-Za-z0-9_-]{1,12}`).Draw(t, "ak")
		sk := rapid.String().Draw(t, "sk")
		fields := rapid.MapOf(rapid.StringMatching(`[A-Za-z]{1,8}`), rapid.String()).Draw(t, "fields")
		delete(fields, "AccessKey")
		delete(fields, "Signature")
		body := rapid.SliceOf(rapid.Byte()).Draw(t, "body")
		sent := clientV2Sign(ak, sk, fields, body)
		if !VerifyRemoting(sk, sent, body) {
			t.Fatalf("the client's signature does not verify")
		}
		if got := SignRemoting(sk, sent, body); got != sent["Signature"] {
			t.Fatalf("SignRemoting = %q, client sent %q", got, sent["Signature"])
		}
		if VerifyRemoting(sk+"x", sent, body) {
			t.Fatalf("verifies under another secret")
		}
		if VerifyRemoting(sk, sent, append(body, 0)) {
			t.Fatalf("verifies with another body")
		}
		sent["extra"] = "1"
		if VerifyRemoting(sk, sent, body) {
			t.Fatalf("verifies with an added field")
		}
	})
}

func TestRemotingSignatureLongValuesAndManyFields(t *testing.T) {
	// The content is streamed through a fixed buffer: values longer than it
	// and more fields than its key array must sign the same.
	fields := map[string]string{"big": strings.Repeat("v", 2000)}
	for i := range 40 {
		fields[fmt.Sprintf("k%02d", i)] = strings.Repeat("x", i*17)
	}
	sent := clientV2Sign("ak", "sk", fields, []byte("body"))
	assert.True(t, VerifyRemoting("sk", sent, []byte("body")))
}

func TestRemotingSignatureRefusesGarbage(t *testing.T) {
	sent := clientV2Sign("ak", "sk", map[string]string{"topic": "t"}, nil)
	for _, sig := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte("short")),
		strings.Repeat("A", 200)} {
		sent["Signature"] = sig
		assert.False(t, VerifyRemoting("sk", sent, nil), "%q", sig)
	}
}

func TestV5SignatureMatchesTheV5Client(t *testing.T) {
	dt, auth := clientV5Headers("orders-app", "s3cret", t0)
	c, err := ParseV5Authorization(auth)
	require.NoError(t, err)
	assert.Equal(t, "orders-app", c.AccessKey)
	assert.Equal(t, "x-mq-date-time", c.SignedHeaders)
	assert.True(t, VerifyV5("s3cret", c, dt))
	assert.False(t, VerifyV5("other", c, dt))
	assert.False(t, VerifyV5("s3cret", c, "20260301T120001Z"))
	assert.Equal(t, auth, V5Authorization("orders-app", "s3cret", dt))
	ts, err := ParseV5DateTime(dt)
	require.NoError(t, err)
	assert.True(t, ts.Equal(t0))
}

func TestParseV5AuthorizationRefusesMalformedHeaders(t *testing.T) {
	good := "Signature=" + strings.Repeat("ab", 20)
	_, err := ParseV5Authorization("")
	assert.ErrorIs(t, err, ErrNoCredentials)
	for _, h := range []string{
		"MQv2-HMAC-SHA1",
		"MQv1-HMAC-SHA1 Credential=a, " + good,
		"MQv2-HMAC-SHA1 Credential=a",
		"MQv2-HMAC-SHA1 " + good,
		"MQv2-HMAC-SHA1 Credential=/x, " + good,
		"MQv2-HMAC-SHA1 Credential=a, Signature=zz",
		"MQv2-HMAC-SHA1 Credential=a, Signature=abcd",
		"MQv2-HMAC-SHA1 Credential=a, SignedHeaders=host, " + good,
		"MQv2-HMAC-SHA1 Credential=a, junk, " + good,
	} {
		_, err := ParseV5Authorization(h)
		assert.ErrorIs(t, err, ErrMalformed, h)
		assert.ErrorIs(t, err, ErrUnauthenticated, h)
	}
	_, err = ParseV5DateTime("2026-03-01T12:00:00Z")
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestRemotingVerifyReusesTheFieldOrderOnlyForTheSameNames(t *testing.T) {
	// One keyed state verifies requests with the same names, then other
	// names of the same count, then fewer: each must be checked against
	// its own sorted order.
	m := &macState{h: hmac.New(sha1.New, []byte("sk"))}
	for _, fields := range []map[string]string{
		{"a": "1", "b": "2", "c": "3"},
		{"a": "4", "b": "5", "c": "6"},
		{"a": "1", "b": "2", "d": "3"},
		{"z": "1", "b": "2", "a": "3"},
		{"a": "1"},
	} {
		sent := clientV2Sign("ak", "sk", fields, []byte("x"))
		m.h.Reset()
		assert.True(t, m.verifyRemoting(sent[FieldSignature], true, sent, []byte("x")), "%v", fields)
		sent["a"] = sent["a"] + "!"
		m.h.Reset()
		assert.False(t, m.verifyRemoting(sent[FieldSignature], true, sent, []byte("x")), "%v tampered", fields)
	}
}
