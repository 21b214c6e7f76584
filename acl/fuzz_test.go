package acl

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// FuzzParse: any input is a Config or an ErrInvalid error, never a panic,
// and a parsed Config builds an Authorizer that answers without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte(engineDoc))
	f.Add([]byte(`{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["Topic:x*"],"actions":["All"],"decision":"Deny","sourceIps":["::1","10.0.0.0/8"]}]}`))
	f.Add([]byte(`{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["*"],"actions":["Pub"],"decision":"Allow","sourceIps":["fe80::1%eth0"]}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		a, err := New(c, Options{})
		if err != nil {
			t.Fatalf("Parse accepted what New refuses: %v", err)
		}
		// The document round-trips through its own JSON form.
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(again); err != nil {
			t.Fatalf("re-parse of %s: %v", again, err)
		}
		for _, u := range c.Users {
			_, _ = a.Authorize(u.AccessKey, Topic("t"), Pub|Sub, netip.MustParseAddr("10.0.0.1"))
			_, _ = a.Authorize(u.AccessKey, Group("g"), All, netip.Addr{})
		}
	})
}

// FuzzParseV5Authorization: a header parses or fails with ErrUnauthenticated;
// a parsed one has an access key, and a header built from it parses back to
// the same credential.
func FuzzParseV5Authorization(f *testing.F) {
	f.Add(V5Authorization("orders-app", "s3cret", "20260301T120000Z"), "20260301T120000Z")
	f.Add("MQv2-HMAC-SHA1 Credential=a, Signature="+strings.Repeat("0", 40), "x")
	f.Add("MQv2-HMAC-SHA1 ,,,=", "")
	f.Add("", "20261301T250000Z")
	f.Fuzz(func(t *testing.T, h, dt string) {
		c, err := ParseV5Authorization(h)
		if _, derr := ParseV5DateTime(dt); derr != nil && !errors.Is(derr, ErrMalformed) {
			t.Fatalf("date-time error without ErrMalformed: %v", derr)
		}
		if err != nil {
			if !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("error without ErrUnauthenticated: %v", err)
			}
			return
		}
		if c.AccessKey == "" {
			t.Fatal("parsed without an access key")
		}
		_ = VerifyV5("k", c, dt)
	})
}

// FuzzVerifyRemoting: fields and body decoded from arbitrary bytes verify
// without panicking, and what SignRemoting signs verifies.
func FuzzVerifyRemoting(f *testing.F) {
	f.Add("topic=orders\nqueueId=1", []byte("body"), "s3cret")
	f.Add("Signature=AAAA\nAccessKey=a", []byte{}, "")
	f.Add("a=\n=b\nSignature="+strings.Repeat("=", 60), []byte{0, 1}, "k")
	f.Fuzz(func(t *testing.T, kvs string, body []byte, secret string) {
		fields := map[string]string{}
		for _, line := range strings.Split(kvs, "\n") {
			k, v, _ := strings.Cut(line, "=")
			fields[k] = v
		}
		_ = VerifyRemoting(secret, fields, body)
		fields[FieldSignature] = SignRemoting(secret, fields, body)
		if !VerifyRemoting(secret, fields, body) {
			t.Fatal("own signature does not verify")
		}
	})
}
