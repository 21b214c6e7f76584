package acl

import (
	"crypto/sha1"
	"crypto/subtle"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Authorizer decides requests against a configuration that Reload swaps
// whole at runtime, and checks the signatures of both RocketMQ protocols
// against the same users. It is safe for concurrent use.
//
// What it caches: the keyed HMAC state of each user (rebuilt with the
// configuration) and the v5 signatures it verified (re-verified when a
// reload changed that user's secret). Decisions are never cached: every
// Authorize reads the configuration current at that moment.
type Authorizer struct {
	opts   Options
	policy atomic.Pointer[policy]
	replay replayCache
	edits  sync.Mutex // serializes Reload, ReloadFile and Edit

	allowed, denied, authOK, authFailed, replays, reloads, reloadErrors atomic.Uint64
}

// Stats are the Authorizer's counters since New.
type Stats struct {
	Allowed       uint64 // Authorize calls that allowed
	Denied        uint64 // Authorize calls that refused (unknown users included)
	Authenticated uint64 // signatures that verified
	AuthFailures  uint64 // requests whose credentials did not (replays included)
	Replays       uint64 // v5 signatures refused as replayed
	Reloads       uint64 // configurations swapped in (the first one included)
	ReloadErrors  uint64 // Reload/ReloadFile calls refused; the old rules stayed
	Users, Rules  int    // in the current configuration
}

// New builds an Authorizer on cfg (nil: no users, so everything is
// refused). A bad cfg is an error wrapping ErrInvalid.
func New(cfg *Config, opts Options) (*Authorizer, error) {
	a := &Authorizer{opts: opts.withDefaults()}
	a.replay.m = make(map[replayKey]seen)
	a.replay.max = a.opts.ReplayCacheSize
	if cfg == nil {
		cfg = &Config{}
	}
	if err := a.Reload(cfg); err != nil {
		return nil, err
	}
	return a, nil
}

// Open is New on the file at path (see Load).
func Open(path string, opts Options) (*Authorizer, error) {
	cfg, err := Load(path)
	if err != nil {
		return nil, err
	}
	return New(cfg, opts)
}

// Reload swaps in cfg atomically: every later call sees all of it, none
// sees part. A bad cfg is refused with an error and the old rules stay.
func (a *Authorizer) Reload(cfg *Config) error {
	a.edits.Lock()
	defer a.edits.Unlock()
	return a.reload(cfg)
}

func (a *Authorizer) reload(cfg *Config) error {
	if cfg == nil {
		a.reloadErrors.Add(1)
		return fmt.Errorf("acl: reload: nil config: %w", ErrInvalid)
	}
	p, err := compile(cfg)
	if err != nil {
		a.reloadErrors.Add(1)
		a.opts.Logger.Warn("acl: reload refused, old rules kept", "err", err)
		return err
	}
	a.policy.Store(p)
	a.reloads.Add(1)
	a.opts.Logger.Info("acl: rules loaded", "users", len(p.users), "rules", p.rules)
	return nil
}

// ReloadFile is Reload of the file at path; an unreadable or bad file
// changes nothing. It holds off Edit while it reads, so an edit persisted
// to the same file is never overwritten by an older read of it.
func (a *Authorizer) ReloadFile(path string) error {
	a.edits.Lock()
	defer a.edits.Unlock()
	cfg, err := Load(path)
	if err != nil {
		a.reloadErrors.Add(1)
		a.opts.Logger.Warn("acl: reload refused, old rules kept", "path", path, "err", err)
		return err
	}
	return a.reload(cfg)
}

// Config is a copy of the configuration in force.
func (a *Authorizer) Config() *Config { return a.policy.Load().cfg.Clone() }

// IsSuperUser reports whether name is an enabled super user of the
// configuration in force.
func (a *Authorizer) IsSuperUser(name string) bool {
	u := a.policy.Load().users[name]
	return u != nil && u.super && !u.disabled
}

// Edit changes the configuration in force: edit gets a copy to change;
// the result is checked as Reload checks it, then handed to commit (a host
// writes its file there; nil commits nothing), then swapped in. An error
// from edit, from the check or from commit changes nothing and is
// returned. Edits, reloads and ReloadFile are serialized.
func (a *Authorizer) Edit(edit func(*Config) error, commit func(*Config) error) error {
	a.edits.Lock()
	defer a.edits.Unlock()
	cfg := a.policy.Load().cfg.Clone()
	if err := edit(cfg); err != nil {
		return err
	}
	if _, err := compile(cfg); err != nil {
		return err
	}
	if commit != nil {
		if err := commit(cfg); err != nil {
			return err
		}
	}
	return a.reload(cfg)
}

// Authorize decides whether user may do act (one action, or several of
// which any one suffices) on res, from ip (the zero Addr when unknown; see
// the package doc for how rules with source ranges treat it). It returns
// Allow and nil, or Deny and a *DeniedError (ErrDenied; ErrUnknownUser too
// for a user that does not exist).
func (a *Authorizer) Authorize(user string, res Resource, act Action, ip netip.Addr) (Decision, error) {
	u := a.policy.Load().users[user]
	var reason string
	switch {
	case u == nil:
		reason = "unknown user"
	case u.disabled:
		reason = "user disabled"
	case act == 0 || act&^All != 0:
		reason = "no valid action named"
	default:
		var d Decision
		if d, reason = u.decide(res, act, ip); d == Allow {
			a.allowed.Add(1)
			return Allow, nil
		}
	}
	a.denied.Add(1)
	e := &DeniedError{User: user, Resource: res, Action: act, Reason: reason, unknown: u == nil}
	if ip.IsValid() {
		e.IP = ip.String()
	}
	a.opts.Logger.Info("acl: denied", "user", user, "resource", res.String(), "action", act.String(),
		"ip", e.IP, "reason", reason)
	return Deny, e
}

// AuthenticateV5 checks the credentials of a v5 gRPC request — its
// authorization and x-mq-date-time metadata values — and returns the
// access key they prove. It refuses (ErrUnauthenticated and a cause): an
// empty header (ErrNoCredentials), one it cannot parse (ErrMalformed), an
// unknown key (ErrUnknownUser), a time outside MaxSkew (ErrClockSkew), a
// wrong signature (ErrBadSignature), and a signature first seen longer
// than ReplayWindow ago (ErrReplay).
func (a *Authorizer) AuthenticateV5(authorization, dateTime string) (string, error) {
	user, err := a.authenticateV5(authorization, dateTime)
	return user, a.counted(user, "v5", err)
}

func (a *Authorizer) authenticateV5(authorization, dateTime string) (string, error) {
	c, err := ParseV5Authorization(authorization)
	if err != nil {
		return c.AccessKey, err
	}
	u := a.policy.Load().users[c.AccessKey]
	if u == nil {
		return c.AccessKey, fmt.Errorf("%w: %w %q", ErrUnauthenticated, ErrUnknownUser, c.AccessKey)
	}
	if u.disabled {
		return u.name, ErrDisabled
	}
	signed, err := ParseV5DateTime(dateTime)
	if err != nil {
		return u.name, err
	}
	now := a.opts.Now()
	if d := now.Sub(signed); d > a.opts.MaxSkew || -d > a.opts.MaxSkew {
		return u.name, fmt.Errorf("%w: signed %s, now %s", ErrClockSkew, dateTime, now.UTC().Format(V5DateTimeLayout))
	}
	k := replayKey{user: u.name, dateTime: dateTime, sig: c.Signature}
	if e, ok := a.replay.get(k); ok && e.secret == u.secret {
		if now.Sub(e.first) > a.opts.ReplayWindow {
			a.replays.Add(1)
			return u.name, fmt.Errorf("%w: first seen %s ago", ErrReplay, now.Sub(e.first).Round(time.Millisecond))
		}
		return u.name, nil
	}
	m := u.mac()
	ok := m.verifyV5(&c.Signature, dateTime)
	u.putMAC(m)
	if !ok {
		return u.name, ErrBadSignature
	}
	a.replay.put(k, seen{first: now, expires: signed.Add(a.opts.MaxSkew), secret: u.secret}, now)
	return u.name, nil
}

// AuthenticateRemoting checks the AccessKey and Signature ext fields of a
// remoting request against its other fields and body (see SignRemoting)
// and returns the access key they prove. No AccessKey is
// ErrNoCredentials; a missing Signature ErrMalformed; an unknown key
// ErrUnknownUser; a wrong signature ErrBadSignature.
func (a *Authorizer) AuthenticateRemoting(fields map[string]string, body []byte) (string, error) {
	user, err := a.authenticateRemoting(fields, body)
	return user, a.counted(user, "remoting", err)
}

func (a *Authorizer) authenticateRemoting(fields map[string]string, body []byte) (string, error) {
	ak := fields[FieldAccessKey]
	if ak == "" {
		return "", ErrNoCredentials
	}
	sig := fields[FieldSignature]
	if sig == "" {
		return ak, fmt.Errorf("%w: AccessKey without Signature", ErrMalformed)
	}
	u := a.policy.Load().users[ak]
	if u == nil {
		return ak, fmt.Errorf("%w: %w %q", ErrUnauthenticated, ErrUnknownUser, ak)
	}
	if u.disabled {
		return ak, ErrDisabled
	}
	m := u.mac()
	ok := m.verifyRemoting(sig, true, fields, body)
	u.putMAC(m)
	if !ok {
		return ak, badRemotingSignature(u, fields, body)
	}
	return ak, nil
}

// badRemotingSignature explains a mismatch. SecurityToken is signed like
// every other field (Apache's broker and Java's AclClientRPCHook sign it;
// neither checks it otherwise), but rocketmq-client-go/v2 sends it without
// signing it: such a request is refused, with a remark saying so.
func badRemotingSignature(u *user, fields map[string]string, body []byte) error {
	if _, ok := fields[FieldSecurityToken]; !ok {
		return ErrBadSignature
	}
	rest := make(map[string]string, len(fields))
	for k, v := range fields {
		if k != FieldSecurityToken {
			rest[k] = v
		}
	}
	if !VerifyRemoting(u.secret, rest, body) {
		return ErrBadSignature
	}
	return fmt.Errorf("%w: the SecurityToken field is not signed (rocketmq-client-go/v2 sends it unsigned, "+
		"and Apache's broker refuses that too): leave Credentials.SecurityToken empty", ErrBadSignature)
}

// AuthenticateSecret checks a plain access key and secret (an HTTP admin
// call's Basic credentials) in constant time and returns the access key.
func (a *Authorizer) AuthenticateSecret(accessKey, secret string) (string, error) {
	u := a.policy.Load().users[accessKey]
	var err error
	switch {
	case accessKey == "":
		err = ErrNoCredentials
	case u == nil:
		err = fmt.Errorf("%w: %w %q", ErrUnauthenticated, ErrUnknownUser, accessKey)
	case u.disabled:
		err = ErrDisabled
	case subtle.ConstantTimeCompare([]byte(secret), []byte(u.secret)) != 1:
		err = ErrBadSignature
	}
	return accessKey, a.counted(accessKey, "secret", err)
}

func (a *Authorizer) counted(user, protocol string, err error) error {
	if err == nil {
		a.authOK.Add(1)
		return nil
	}
	a.authFailed.Add(1)
	a.opts.Logger.Info("acl: authentication failed", "protocol", protocol, "user", user, "err", err)
	return err
}

// Stats returns the counters and the size of the current configuration.
func (a *Authorizer) Stats() Stats {
	p := a.policy.Load()
	return Stats{
		Allowed: a.allowed.Load(), Denied: a.denied.Load(),
		Authenticated: a.authOK.Load(), AuthFailures: a.authFailed.Load(), Replays: a.replays.Load(),
		Reloads: a.reloads.Load(), ReloadErrors: a.reloadErrors.Load(),
		Users: len(p.users), Rules: p.rules,
	}
}

// replayKey names one v5 signature: the date-time is part of it so that a
// cached verification can never vouch for another date-time.
type replayKey struct {
	user, dateTime string
	sig            [sha1.Size]byte
}

type seen struct {
	first   time.Time // when this signature first verified
	expires time.Time // signed time + MaxSkew: the skew check refuses it after that
	secret  string    // the secret it verified under
}

// replayCache remembers verified v5 signatures until the clock-skew window
// has passed them, bounded by max entries.
type replayCache struct {
	mu  sync.Mutex
	m   map[replayKey]seen
	max int
}

func (c *replayCache) get(k replayKey) (seen, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	return e, ok
}

// put records a verification; an earlier first sighting is kept (two
// requests with one signature may verify at once).
func (c *replayCache) put(k replayKey, e seen, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok && old.first.Before(e.first) {
		e.first = old.first
	}
	if len(c.m) >= c.max {
		c.sweep(now)
	}
	c.m[k] = e
}

// sweep drops expired entries, then arbitrary ones down to half of max.
func (c *replayCache) sweep(now time.Time) {
	for k, e := range c.m {
		if now.After(e.expires) {
			delete(c.m, k)
		}
	}
	for k := range c.m {
		if len(c.m) <= c.max/2 {
			break
		}
		delete(c.m, k)
	}
}
