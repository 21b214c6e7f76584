package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"fmt"
	"hash"
	"net/netip"
	"sync"
)

// policy is a compiled Config: immutable once built, swapped whole by
// Reload, so a decision never sees half of two configurations.
type policy struct {
	users map[string]*user
	rules int
	cfg   *Config // the configuration compiled, for Config and Edit
}

// user is one compiled user with its rules in file order.
type user struct {
	name     string
	secret   string
	super    bool
	disabled bool
	rules    []rule
	macs     sync.Pool // of *macState keyed with secret
}

// macState is an HMAC-SHA1 keyed with a user's secret and the scratch
// space of one verification: keying costs two SHA-1 blocks and
// allocations, and anything handed to the hash's Write escapes, so both
// are kept and reused.
type macState struct {
	h    hash.Hash
	buf  []byte
	keys []string // the sorted field names of the last remoting request
}

func newUser(uc UserConfig) *user {
	u := &user{name: uc.AccessKey, secret: uc.SecretKey, super: uc.SuperUser, disabled: uc.Disabled}
	key := []byte(uc.SecretKey)
	u.macs.New = func() any { return &macState{h: hmac.New(sha1.New, key), buf: make([]byte, 0, 1024)} }
	return u
}

// mac hands out a keyed, reset HMAC state.
func (u *user) mac() *macState {
	m := u.macs.Get().(*macState)
	m.h.Reset()
	return m
}

func (u *user) putMAC(m *macState) {
	if cap(m.buf) > 64<<10 || len(m.keys) > 64 {
		m.buf, m.keys = make([]byte, 0, 1024), nil // a huge request does not pin its buffers
	}
	u.macs.Put(m)
}

// rule is one compiled RuleConfig.
type rule struct {
	index    int // position in Config.Rules, for messages
	patterns []pattern
	actions  Action
	decision Decision
	nets     []netip.Prefix // empty: every source
}

// source reports whether the rule applies to a request from ip. A rule
// without ranges applies everywhere. An unknown address (the zero Addr)
// is inside every Deny rule's ranges and outside every Allow rule's: a
// request whose origin is unknown can only lose.
func (r *rule) source(ip netip.Addr) bool {
	if len(r.nets) == 0 {
		return true
	}
	if !ip.IsValid() {
		return r.decision == Deny
	}
	ip = ip.Unmap().WithZone("")
	for _, n := range r.nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

func (r *rule) resource(res Resource) bool {
	for _, p := range r.patterns {
		if p.match(res) {
			return true
		}
	}
	return false
}

// decide is the whole rule engine. A super user may do anything. For a
// normal user each requested action is decided on its own: refused if any
// matching rule denies it, allowed if a matching rule allows it, refused if
// no rule matches. The request passes when one of its actions is allowed.
// The reason names the first Deny rule that decided, for the log.
func (u *user) decide(res Resource, act Action, ip netip.Addr) (Decision, string) {
	if u.disabled {
		return Deny, "user disabled"
	}
	if u.super {
		return Allow, ""
	}
	var allowed, denied Action
	denyRule := -1
	for i := range u.rules {
		r := &u.rules[i]
		covered := r.actions & act
		if covered == 0 || !r.resource(res) || !r.source(ip) {
			continue
		}
		if r.decision == Deny {
			denied |= covered
			if denyRule < 0 {
				denyRule = r.index
			}
			continue
		}
		allowed |= covered
	}
	if allowed&^denied != 0 {
		return Allow, ""
	}
	if denyRule >= 0 {
		return Deny, fmt.Sprintf("denied by rule %d", denyRule)
	}
	return Deny, "no rule allows it"
}
