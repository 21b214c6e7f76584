package acl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
)

// MaxConfigSize bounds the configuration file Load reads (4 MiB).
const MaxConfigSize = 4 << 20

// Config is the document of users and rules: what Parse reads and Load
// reads from a file. The JSON form (every field name as tagged here):
//
//	{
//	  "users": [
//	    {"accessKey": "admin",      "secretKey": "change-me", "superUser": true},
//	    {"accessKey": "orders-app", "secretKey": "s3cret"}
//	  ],
//	  "rules": [
//	    {"user": "orders-app", "resources": ["Topic:orders-*", "Group:orders-workers"],
//	     "actions": ["Pub", "Sub"], "decision": "Allow", "sourceIps": ["10.0.0.0/8", "127.0.0.1"]},
//	    {"user": "orders-app", "resources": ["Topic:orders-audit"], "actions": ["All"], "decision": "Deny"}
//	  ]
//	}
//
// Unknown fields are refused, so a misspelt "decison" cannot silently mean
// something else.
type Config struct {
	Users []UserConfig `json:"users"`
	Rules []RuleConfig `json:"rules"`
}

// UserConfig is one user: the access key clients send, the secret they
// sign with, and whether the user is a super user (every action on every
// resource, whatever the rules say — Apache's UserType SUPER).
type UserConfig struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
	SuperUser bool   `json:"superUser,omitempty"`
	// Disabled refuses the user's credentials (ErrDisabled) and every
	// Authorize for it, without forgetting the user (Apache's userStatus
	// disable).
	Disabled bool `json:"disabled,omitempty"`
}

// RuleConfig is one rule: the user it is about ("orders-app", or Apache's
// "User:orders-app"); the resources it covers ("*", "Topic:*",
// "Topic:orders-*", "Topic:orders", and the same for Group); the actions
// (Pub, Sub, Create, Update, Delete, Get, List, All; case-insensitive);
// the decision (Allow or Deny, required); and optionally the source
// addresses it applies to (CIDR ranges or single addresses; none = any).
type RuleConfig struct {
	User      string   `json:"user"`
	Resources []string `json:"resources"`
	Actions   []string `json:"actions"`
	Decision  string   `json:"decision"`
	SourceIPs []string `json:"sourceIps,omitempty"`
}

// Parse reads a JSON configuration and checks it the way New does. A bad
// document is an error wrapping ErrInvalid that names the first problem.
func Parse(data []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("acl: config: %v: %w", err, ErrInvalid)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("acl: config: data after the document: %w", ErrInvalid)
	}
	if _, err := compile(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

// Load reads and parses the configuration file at path.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("acl: config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("acl: config %s: %w", path, err)
	}
	if len(data) > MaxConfigSize {
		return nil, fmt.Errorf("acl: config %s: larger than %d bytes: %w", path, MaxConfigSize, ErrInvalid)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// checkAccessKey refuses what cannot travel in both protocols' headers:
// the v5 header separates fields with "," and the credential with "/".
func checkAccessKey(ak string) error {
	if ak == "" {
		return errors.New("empty accessKey")
	}
	for _, r := range ak {
		if r <= ' ' || r == 0x7f || r == ',' || r == '/' || r == '=' {
			return fmt.Errorf("accessKey %q: no spaces, control characters, ',', '/' or '='", ak)
		}
	}
	return nil
}

// compile checks c and builds the lookup structure Authorize uses.
func compile(c *Config) (*policy, error) {
	p := &policy{users: make(map[string]*user, len(c.Users)), cfg: c.Clone()}
	for i, uc := range c.Users {
		if err := checkAccessKey(uc.AccessKey); err != nil {
			return nil, fmt.Errorf("acl: config: users[%d]: %v: %w", i, err, ErrInvalid)
		}
		if uc.SecretKey == "" {
			return nil, fmt.Errorf("acl: config: users[%d] (%s): empty secretKey: %w", i, uc.AccessKey, ErrInvalid)
		}
		if _, dup := p.users[uc.AccessKey]; dup {
			return nil, fmt.Errorf("acl: config: users[%d]: accessKey %q defined twice: %w", i, uc.AccessKey, ErrInvalid)
		}
		p.users[uc.AccessKey] = newUser(uc)
	}
	for i, rc := range c.Rules {
		name := strings.TrimPrefix(rc.User, "User:")
		u, ok := p.users[name]
		if !ok {
			return nil, fmt.Errorf("acl: config: rules[%d]: user %q is not in users: %w", i, rc.User, ErrInvalid)
		}
		r, err := compileRule(i, rc)
		if err != nil {
			return nil, fmt.Errorf("acl: config: rules[%d]: %w", i, err)
		}
		u.rules = append(u.rules, r)
		p.rules++
	}
	return p, nil
}

func compileRule(i int, rc RuleConfig) (rule, error) {
	r := rule{index: i}
	if len(rc.Resources) == 0 {
		return r, fmt.Errorf("no resources: %w", ErrInvalid)
	}
	for _, s := range rc.Resources {
		pt, err := parsePattern(s)
		if err != nil {
			return r, err
		}
		r.patterns = append(r.patterns, pt)
	}
	if len(rc.Actions) == 0 {
		return r, fmt.Errorf("no actions: %w", ErrInvalid)
	}
	for _, s := range rc.Actions {
		a, err := ParseAction(s)
		if err != nil {
			return r, err
		}
		r.actions |= a
	}
	d, err := ParseDecision(rc.Decision)
	if err != nil {
		return r, err
	}
	r.decision = d
	for _, s := range rc.SourceIPs {
		pf, err := parseSource(s)
		if err != nil {
			return r, err
		}
		r.nets = append(r.nets, pf)
	}
	return r, nil
}

// parseSource reads a CIDR range or a single address.
func parseSource(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pf, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("sourceIps %q: %v: %w", s, err, ErrInvalid)
		}
		if pf.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("sourceIps %q: write an IPv4 range as IPv4: %w", s, ErrInvalid)
		}
		return pf.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("sourceIps %q: %v: %w", s, err, ErrInvalid)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
