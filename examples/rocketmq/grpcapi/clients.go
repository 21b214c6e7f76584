package grpcapi

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Metadata keys the v5 clients send with every call.
const (
	mdClientID = "x-mq-client-id"
	mdLanguage = "x-mq-language"
)

// clientID is the caller's x-mq-client-id, or its address when it sent none.
// It runs on every call: ValueFromIncomingContext reads the one key, where
// FromIncomingContext would copy the whole metadata (a dozen headers).
func clientID(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, mdClientID); len(v) > 0 && v[0] != "" {
		return v[0]
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return "unknown"
}

func language(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, mdLanguage); len(v) > 0 {
		return v[0]
	}
	return ""
}

// clientInfo is what a client told the server in its settings.
type clientInfo struct {
	group       string
	longPolling time.Duration // subscription.long_polling_timeout; 0 = not told
	lastSeen    time.Time
	owner       owner // who registered the id (conns.go)
}

// clientTable remembers clients by x-mq-client-id. The v5 client never
// closes its streams and rarely says goodbye, so entries go by silence.
type clientTable struct {
	mu sync.Mutex
	m  map[string]*clientInfo
}

func newClientTable() *clientTable { return &clientTable{m: make(map[string]*clientInfo)} }

func (t *clientTable) touch(id string, now time.Time, f func(*clientInfo)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.m[id]
	if c == nil {
		c = &clientInfo{}
		t.m[id] = c
	}
	c.lastSeen = now
	if f != nil {
		f(c)
	}
}

// claim binds id to (cn, user) unless its owner refuses them (conns.go);
// refused, it returns the owner and changes nothing.
func (t *clientTable) claim(id string, cn *conn, user string, now, cutoff time.Time) (owner, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.m[id]
	if c == nil {
		c = &clientInfo{}
		t.m[id] = c
	}
	if c.owner.refuses(cn, user, cutoff) {
		return c.owner, false
	}
	if cn != nil {
		c.owner = owner{conn: cn, user: user, at: now}
	}
	c.lastSeen = now
	return owner{}, true
}

// forgetBy forgets id unless its owner refuses (cn, user).
func (t *clientTable) forgetBy(id string, cn *conn, user string, cutoff time.Time) (owner, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.m[id]; c != nil && c.owner.refuses(cn, user, cutoff) {
		return c.owner, false
	}
	delete(t.m, id)
	return owner{}, true
}

func (t *clientTable) longPolling(id string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.m[id]; c != nil {
		return c.longPolling
	}
	return 0
}

// expire forgets clients last seen before cutoff and returns how many.
func (t *clientTable) expire(cutoff time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id, c := range t.m {
		if c.lastSeen.Before(cutoff) {
			delete(t.m, id)
			n++
		}
	}
	return n
}
