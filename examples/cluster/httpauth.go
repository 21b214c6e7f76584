package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/replica"
)

// The HTTP API's admin proof (-cluster-secret-file).
//
// With a cluster secret, the requests that change who votes, where a
// consumer group reads or what a delayed message does — POST /members,
// /members/remove, /offsets/reset, /cancel — must prove the secret in a
// header:
//
//	X-Cluster-Auth: v2:<unix ms>:<nonce, 32 hex digits>:<mac, 64 hex digits>
//
//	mac = HMAC-SHA256(K, "brokercore http v2\n" authority "\n" method "\n"
//	                     request URI "\n" unix ms "\n" nonce "\n" hex(SHA-256(body)))
//	K   = replica.DeriveKey(secret, "brokercore http admin v1")
//
// (lower-case hex). authority is the node the proof is for: its HTTP
// address (-http-addr, replica.Config.Addr: host:port as members and
// redirects name it, which is what a client addressing it sends as Host).
// A node accepts a proof whose time is within ±30 s of its clock, whose
// MAC over its own address matches (compared in constant time), and that
// it has not accepted before (it remembers accepted proofs until they
// expire, so a recorded request cannot be replayed to it). Anything else
// is answered 401 before the handler runs, logged (a few lines a minute)
// and counted (http_refused in /status). Every node verifies, and a proof
// made for one node verifies on no other: a follower's redirect to the
// leader needs a proof made for the leader (joinCluster and -post sign
// every hop anew; a client that re-sends the header as it is, as Go's
// default client and curl -L do, is refused by the leader), and a
// recorded request cannot be replayed to a leader elected since. Like the
// raft handshake it authenticates and does not encrypt.
const (
	authHeader      = "X-Cluster-Auth"
	authVersion     = "v2"
	authPurpose     = "brokercore http admin v1" // replica.DeriveKey's purpose: not the raft port's key
	authLabel       = "brokercore http v2"
	authSkew        = 30 * time.Second
	authNonceLen    = 16       // bytes
	authMaxBody     = 64 << 10 // an admin request's body is a few dozen bytes
	authMaxSeen     = 4096     // accepted proofs remembered (within authSkew)
	authRefusalLogs = 16       // refusal log lines per minute
	authMaxProof    = 128      // a proof's length: 101 to 120 bytes
)

// ErrHTTPAuth: an admin request (membership, offset reset, cancel) without
// a valid proof of the cluster secret made for this node.
var ErrHTTPAuth = errors.New("request not authenticated with the cluster secret")

// ErrInsecureHTTP: an HTTP address beyond loopback without -insecure-http.
var ErrInsecureHTTP = errors.New("refusing a non-loopback HTTP address without -insecure-http")

// httpKey is the HTTP proofs' key for a cluster secret (nil without one).
func httpKey(secret []byte) []byte {
	if len(secret) == 0 {
		return nil
	}
	return replica.DeriveKey(secret, authPurpose)
}

// proof is a parsed X-Cluster-Auth header.
type proof struct {
	at    int64  // unix ms
	nonce string // hex
	mac   []byte
}

// parseProof parses an X-Cluster-Auth value; it never panics and refuses
// anything but the exact format (bounded size, a time in canonical decimal,
// lower-case hex), so a value has one spelling.
func parseProof(h string) (proof, error) {
	if len(h) > authMaxProof {
		return proof{}, fmt.Errorf("%w: proof of %d bytes", ErrHTTPAuth, len(h))
	}
	f := strings.Split(h, ":")
	if len(f) != 4 || f[0] != authVersion {
		return proof{}, fmt.Errorf("%w: not a %s proof", ErrHTTPAuth, authVersion)
	}
	at, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || at < 0 || strconv.FormatInt(at, 10) != f[1] { // one spelling of each time
		return proof{}, fmt.Errorf("%w: bad time", ErrHTTPAuth)
	}
	if !lowerHex(f[2], authNonceLen) || !lowerHex(f[3], sha256.Size) {
		return proof{}, fmt.Errorf("%w: bad nonce or mac", ErrHTTPAuth)
	}
	mac, _ := hex.DecodeString(f[3])
	return proof{at: at, nonce: f[2], mac: mac}, nil
}

// lowerHex reports whether s is exactly n bytes in lower-case hex.
func lowerHex(s string, n int) bool {
	if len(s) != 2*n {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func proofMAC(key []byte, authority, method, uri string, at int64, nonce string, body []byte) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\n%s\n%s\n%s\n%d\n%s\n%s", authLabel, authority, method, uri, at, nonce, hex.EncodeToString(sum[:]))
	return m.Sum(nil)
}

// signProof is the X-Cluster-Auth value for a request to the node at
// authority (its HTTP address), with a fresh nonce.
func signProof(key []byte, authority, method, uri string, body []byte, now time.Time) string {
	var n [authNonceLen]byte
	_, _ = rand.Read(n[:])
	p := proof{at: now.UnixMilli(), nonce: hex.EncodeToString(n[:])}
	p.mac = proofMAC(key, authority, method, uri, p.at, p.nonce, body)
	return p.String()
}

// String is the header value of p (parseProof's input).
func (p proof) String() string {
	return fmt.Sprintf("%s:%d:%s:%s", authVersion, p.at, p.nonce, hex.EncodeToString(p.mac))
}

// sign sets req's proof, for the node req addresses; body is what req
// sends.
func sign(req *http.Request, key []byte, body []byte, now time.Time) {
	authority := req.Host
	if authority == "" {
		authority = req.URL.Host
	}
	req.Header.Set(authHeader, signProof(key, authority, req.Method, req.URL.RequestURI(), body, now))
}

// verifier checks the proofs of one node's HTTP API.
type verifier struct {
	key  []byte
	self string // the node's HTTP address: the authority its proofs are made for
	now  func() time.Time
	log  *slog.Logger

	refused atomic.Uint64
	logged  atomic.Int64 // refusal log lines in the current minute window
	window  atomic.Int64 // that window's unix minute

	mu   sync.Mutex
	seen map[string]int64 // accepted MACs (hex) → when they expire (unix ms)
}

// newVerifier checks the proofs made for the node at self, its HTTP
// address (with a secret and no address, every proof is refused: there is
// nothing to bind it to).
func newVerifier(secret []byte, self string, now func() time.Time, log *slog.Logger) *verifier {
	return &verifier{key: httpKey(secret), self: self, now: now, log: log, seen: map[string]int64{}}
}

// Refused counts the requests refused so far.
func (v *verifier) Refused() uint64 { return v.refused.Load() }

// guard runs h only for a request with a valid proof (every request
// when the node has no secret); the handler reads the body verified.
func (v *verifier) guard(h http.HandlerFunc) http.HandlerFunc {
	if v.key == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := v.verify(r)
		if err != nil {
			v.refuse(r, err)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": err.Error()})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	}
}

// verify checks r's proof and returns its body.
func (v *verifier) verify(r *http.Request) ([]byte, error) {
	vals := r.Header.Values(authHeader)
	if len(vals) != 1 {
		return nil, fmt.Errorf("%w: %d %s headers, want 1", ErrHTTPAuth, len(vals), authHeader)
	}
	p, err := parseProof(vals[0])
	if err != nil {
		return nil, err
	}
	now := v.now().UnixMilli()
	if d := now - p.at; d > authSkew.Milliseconds() || d < -authSkew.Milliseconds() {
		return nil, fmt.Errorf("%w: proof time %d ms from this node's clock (at most %v)", ErrHTTPAuth, d, authSkew)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, authMaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrHTTPAuth, err)
	}
	if len(body) > authMaxBody {
		return nil, fmt.Errorf("%w: body over %d bytes", ErrHTTPAuth, authMaxBody)
	}
	if v.self == "" {
		return nil, fmt.Errorf("%w: this node has no HTTP address (replica.Config.Addr) to bind proofs to", ErrHTTPAuth)
	}
	if !hmac.Equal(p.mac, proofMAC(v.key, v.self, r.Method, r.URL.RequestURI(), p.at, p.nonce, body)) {
		return nil, fmt.Errorf("%w: wrong proof (another secret, another request's, or made for another node than %s)", ErrHTTPAuth, v.self)
	}
	return body, v.remember(hex.EncodeToString(p.mac), p.at+authSkew.Milliseconds(), now)
}

// remember records an accepted proof until it expires; a proof seen
// before is a replay.
func (v *verifier) remember(mac string, expires, now int64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.seen[mac]; ok {
		return fmt.Errorf("%w: proof used before (a replay)", ErrHTTPAuth)
	}
	if len(v.seen) >= authMaxSeen {
		for m, exp := range v.seen {
			if exp < now {
				delete(v.seen, m)
			}
		}
		if len(v.seen) >= authMaxSeen {
			return fmt.Errorf("%w: %d proofs accepted within %v already", ErrHTTPAuth, authMaxSeen, authSkew)
		}
	}
	v.seen[mac] = expires
	return nil
}

// refuse counts and logs a refused request; the log is limited to a few
// lines a minute, the count is not.
func (v *verifier) refuse(r *http.Request, err error) {
	v.refused.Add(1)
	now := time.Now().Unix() / 60
	if v.window.Swap(now) != now {
		v.logged.Store(0)
	}
	if v.logged.Add(1) <= authRefusalLogs {
		v.log.Warn("cluster: http request refused", "remote", r.RemoteAddr, "err", fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, err))
	}
}

// checkHTTPAddr refuses an HTTP address beyond loopback unless insecure
// (-insecure-http): its data endpoints answer anyone who reaches it, and
// without a secret so do membership changes and offset resets.
func checkHTTPAddr(addr string, secret []byte, insecure bool) error {
	if insecure || replica.LoopbackAddr(addr) {
		return nil
	}
	if len(secret) == 0 {
		return fmt.Errorf("-http-addr %s without -cluster-secret-file: anyone who reaches it could add or remove voters and reset offsets: %w", addr, ErrInsecureHTTP)
	}
	return fmt.Errorf("-http-addr %s: its data endpoints (/produce, /pop, /ack, …) answer anyone who reaches it: %w", addr, ErrInsecureHTTP)
}
