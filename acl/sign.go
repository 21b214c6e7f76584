package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// What the RocketMQ 5 gRPC clients send (metadata keys and the header's
// fixed parts), as github.com/apache/rocketmq-clients/golang/v5 writes them:
//
//	x-mq-date-time: 20260301T120000Z
//	authorization:  MQv2-HMAC-SHA1 Credential=<ak>//Rocketmq, SignedHeaders=x-mq-date-time, Signature=<hex>
//
// where Signature is hex(HMAC-SHA1(secret, the x-mq-date-time value)).
const (
	V5DateTimeHeader      = "x-mq-date-time"
	V5AuthorizationHeader = "authorization"
	V5Algorithm           = "MQv2-HMAC-SHA1"
	V5DateTimeLayout      = "20060102T150405Z"
)

// What the RocketMQ remoting clients add to a request's ext fields
// (primitive.Credentials in rocketmq-client-go/v2, AclClientRPCHook in Java).
const (
	FieldAccessKey     = "AccessKey"
	FieldSignature     = "Signature"
	FieldSecurityToken = "SecurityToken"
)

// V5Credential is a parsed v5 authorization header.
type V5Credential struct {
	AccessKey     string
	SignedHeaders string
	Signature     [sha1.Size]byte // the decoded HMAC-SHA1
}

// ParseV5Authorization reads "MQv2-HMAC-SHA1 Credential=<ak>[/…],
// SignedHeaders=x-mq-date-time, Signature=<hex>". The credential's first
// "/"-separated part is the access key, as Apache reads it; SignedHeaders,
// when present, must be x-mq-date-time (the only header any client signs).
// Anything else is ErrMalformed, or ErrNoCredentials for an empty header.
func ParseV5Authorization(h string) (V5Credential, error) {
	var c V5Credential
	if strings.TrimSpace(h) == "" {
		return c, ErrNoCredentials
	}
	alg, rest, ok := strings.Cut(h, " ")
	if !ok || alg != V5Algorithm {
		return c, fmt.Errorf("%w: want %q first", ErrMalformed, V5Algorithm)
	}
	var sawCred, sawSig bool
	for rest != "" {
		var kv string
		kv, rest, _ = strings.Cut(rest, ",")
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return c, fmt.Errorf("%w: %q is not key=value", ErrMalformed, kv)
		}
		switch k {
		case "Credential":
			c.AccessKey, _, _ = strings.Cut(v, "/")
			sawCred = true
		case "SignedHeaders":
			if !strings.EqualFold(v, V5DateTimeHeader) {
				return c, fmt.Errorf("%w: SignedHeaders %q (want %s)", ErrMalformed, v, V5DateTimeHeader)
			}
			c.SignedHeaders = v
		case "Signature":
			if len(v) != 2*sha1.Size {
				return c, fmt.Errorf("%w: Signature is not %d hex bytes", ErrMalformed, sha1.Size)
			}
			if _, err := hex.Decode(c.Signature[:], []byte(v)); err != nil {
				return c, fmt.Errorf("%w: Signature is not %d hex bytes", ErrMalformed, sha1.Size)
			}
			sawSig = true
		}
	}
	if !sawCred || c.AccessKey == "" {
		return c, fmt.Errorf("%w: no access key in Credential", ErrMalformed)
	}
	if !sawSig {
		return c, fmt.Errorf("%w: no Signature", ErrMalformed)
	}
	return c, nil
}

// ParseV5DateTime reads an x-mq-date-time value (yyyyMMddTHHmmssZ, UTC).
// The Go v5 client formats its local time with a literal Z, so a client
// whose time zone is not UTC sends a time off by its zone offset: run such
// clients with TZ=UTC or widen Options.MaxSkew.
func ParseV5DateTime(s string) (time.Time, error) {
	t, err := time.Parse(V5DateTimeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q: want yyyyMMddTHHmmssZ", ErrMalformed, V5DateTimeHeader, s)
	}
	return t, nil
}

// SignV5 is the signature a v5 client sends for dateTime: hex of
// HMAC-SHA1 keyed with the secret.
func SignV5(secret, dateTime string) string {
	h := hmac.New(sha1.New, []byte(secret))
	h.Write([]byte(dateTime))
	return hex.EncodeToString(h.Sum(nil))
}

// V5Authorization is the whole authorization header a v5 client sends.
func V5Authorization(accessKey, secret, dateTime string) string {
	return V5Algorithm + " Credential=" + accessKey + "//Rocketmq, SignedHeaders=" + V5DateTimeHeader +
		", Signature=" + SignV5(secret, dateTime)
}

// VerifyV5 reports whether c's signature is dateTime signed with secret,
// in constant time.
func VerifyV5(secret string, c V5Credential, dateTime string) bool {
	return (&macState{h: hmac.New(sha1.New, []byte(secret))}).verifyV5(&c.Signature, dateTime)
}

func (m *macState) verifyV5(sig *[sha1.Size]byte, dateTime string) bool {
	m.buf = append(m.buf[:0], dateTime...)
	m.h.Write(m.buf)
	m.buf = m.h.Sum(m.buf[:0])
	return hmac.Equal(m.buf, sig[:])
}

// SignRemoting is the signature a remoting client puts in the Signature
// field: base64 of HMAC-SHA1, keyed with the secret, over the values of
// every other ext field (AccessKey included) in the order of their sorted
// names, followed by the body — what rocketmq-client-go/v2's ACL
// interceptor and Java's AclClientRPCHook compute, and what Apache checks.
func SignRemoting(secret string, fields map[string]string, body []byte) string {
	m := &macState{h: hmac.New(sha1.New, []byte(secret))}
	_, hasSig := fields[FieldSignature]
	m.writeRemotingContent(hasSig, fields, body)
	return base64.StdEncoding.EncodeToString(m.h.Sum(nil))
}

// VerifyRemoting reports whether fields carry a Signature that SignRemoting
// would compute for them and body under secret, in constant time.
func VerifyRemoting(secret string, fields map[string]string, body []byte) bool {
	sig, ok := fields[FieldSignature]
	return (&macState{h: hmac.New(sha1.New, []byte(secret))}).verifyRemoting(sig, ok, fields, body)
}

// verifyRemoting is VerifyRemoting with fields' Signature value already
// looked up (hasSig: whether fields has one), so that the per-request path
// reads each field once.
func (m *macState) verifyRemoting(sig string, hasSig bool, fields map[string]string, body []byte) bool {
	if base64.StdEncoding.DecodedLen(len(sig)) > 2*sha1.Size {
		return false
	}
	var dec [2 * sha1.Size]byte
	n, err := base64.StdEncoding.Decode(dec[:], []byte(sig))
	if err != nil || n != sha1.Size {
		return false
	}
	m.writeRemotingContent(hasSig, fields, body)
	m.buf = m.h.Sum(m.buf[:0])
	return hmac.Equal(m.buf, dec[:n])
}

// writeRemotingContent feeds the signed content to the hash: the values of
// the sorted field names except Signature (hasSig: fields has one), then
// the body. A client sends the same field names request after request, so
// the sorted order of the last request is kept and reused when the names
// are the same.
func (m *macState) writeRemotingContent(hasSig bool, fields map[string]string, body []byte) {
	n := len(fields)
	if hasSig {
		n--
	}
	b, same := m.buf[:0], len(m.keys) == n
	if same {
		for _, k := range m.keys {
			v, ok := fields[k]
			if !ok {
				same = false
				break
			}
			b = append(b, v...)
		}
	}
	if !same {
		keys := m.keys[:0]
		for k := range fields {
			if k != FieldSignature {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		b = b[:0]
		for _, k := range keys {
			b = append(b, fields[k]...)
		}
		m.keys = keys
	}
	m.h.Write(b)
	m.h.Write(body)
	m.buf = b[:0]
}
