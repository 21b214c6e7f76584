package acl

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Editing a configuration: the functions an admin front-end (Apache's
// createUser/createAcl requests, a CLI, an HTTP call) needs, on a Config
// value. They check their arguments; Authorizer.Edit checks the whole
// result again before anything takes effect.

// Clone is a deep copy of c: editing it leaves c unchanged.
func (c *Config) Clone() *Config {
	out := &Config{Users: slices.Clone(c.Users), Rules: make([]RuleConfig, len(c.Rules))}
	for i, r := range c.Rules {
		r.Resources = slices.Clone(r.Resources)
		r.Actions = slices.Clone(r.Actions)
		r.SourceIPs = slices.Clone(r.SourceIPs)
		out.Rules[i] = r
	}
	return out
}

// Marshal is the JSON document of c, indented, that Parse reads back to the
// same users and rules.
func (c *Config) Marshal() ([]byte, error) {
	out := c.Clone()
	if out.Users == nil {
		out.Users = []UserConfig{}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("acl: config: %w", err)
	}
	return append(b, '\n'), nil
}

// ruleUser is the user a rule names, without Apache's "User:" prefix.
func ruleUser(rc RuleConfig) string { return strings.TrimPrefix(rc.User, "User:") }

// User returns the user with access key name.
func (c *Config) User(name string) (UserConfig, bool) {
	for _, u := range c.Users {
		if u.AccessKey == name {
			return u, true
		}
	}
	return UserConfig{}, false
}

func checkUser(u UserConfig) error {
	if err := checkAccessKey(u.AccessKey); err != nil {
		return fmt.Errorf("acl: user: %v: %w", err, ErrInvalid)
	}
	if u.SecretKey == "" {
		return fmt.Errorf("acl: user %s: empty secretKey: %w", u.AccessKey, ErrInvalid)
	}
	return nil
}

// AddUser adds u. A user with the same access key is ErrExists; an empty
// or malformed access key, or an empty secret, ErrInvalid.
func (c *Config) AddUser(u UserConfig) error {
	if err := checkUser(u); err != nil {
		return err
	}
	if _, ok := c.User(u.AccessKey); ok {
		return fmt.Errorf("acl: user %s: %w", u.AccessKey, ErrExists)
	}
	c.Users = append(c.Users, u)
	return nil
}

// PutUser replaces the user with u's access key by u (its rules stay). No
// such user is ErrNotFound.
func (c *Config) PutUser(u UserConfig) error {
	if err := checkUser(u); err != nil {
		return err
	}
	for i := range c.Users {
		if c.Users[i].AccessKey == u.AccessKey {
			c.Users[i] = u
			return nil
		}
	}
	return fmt.Errorf("acl: user %s: %w", u.AccessKey, ErrNotFound)
}

// RemoveUser removes the user and every rule about it, and reports whether
// the user existed.
func (c *Config) RemoveUser(name string) bool {
	n := len(c.Users)
	c.Users = slices.DeleteFunc(c.Users, func(u UserConfig) bool { return u.AccessKey == name })
	c.Rules = slices.DeleteFunc(c.Rules, func(r RuleConfig) bool { return ruleUser(r) == name })
	return len(c.Users) != n
}

// RulesOf returns the rules about user, in file order (copies).
func (c *Config) RulesOf(user string) []RuleConfig {
	var out []RuleConfig
	for _, r := range c.Clone().Rules {
		if ruleUser(r) == user {
			out = append(out, r)
		}
	}
	return out
}

// PutRule makes rc the only rule of its user on each of its resources:
// those resources are first taken out of the user's other rules (a rule
// left with none is dropped), then rc is appended — Apache's createAcl and
// updateAcl, which replace the entry of a subject and resource. Resources
// compare by meaning ("topic:a" is "Topic:a"). The user must exist
// (ErrNotFound); a malformed rule is ErrInvalid.
func (c *Config) PutRule(rc RuleConfig) error {
	user := ruleUser(rc)
	if _, ok := c.User(user); !ok {
		return fmt.Errorf("acl: rule: user %q: %w", rc.User, ErrNotFound)
	}
	if _, err := compileRule(len(c.Rules), rc); err != nil {
		return fmt.Errorf("acl: rule: %w", err)
	}
	for _, res := range rc.Resources {
		if _, err := c.RemoveRules(user, res); err != nil {
			return err
		}
	}
	rc.User = user
	rc.Resources = slices.Clone(rc.Resources)
	rc.Actions = slices.Clone(rc.Actions)
	rc.SourceIPs = slices.Clone(rc.SourceIPs)
	c.Rules = append(c.Rules, rc)
	return nil
}

// RemoveRules takes resource out of user's rules (a rule left with none is
// dropped), or removes all of user's rules when resource is "". It returns
// how many rules it changed or dropped; a malformed resource is
// ErrInvalid.
func (c *Config) RemoveRules(user, resource string) (int, error) {
	var want pattern
	if resource != "" {
		p, err := parsePattern(resource)
		if err != nil {
			return 0, err
		}
		want = p
	}
	changed := 0
	out := c.Rules[:0]
	for _, r := range c.Rules {
		if ruleUser(r) != user {
			out = append(out, r)
			continue
		}
		if resource == "" {
			changed++
			continue
		}
		kept := r.Resources[:0:0]
		for _, s := range r.Resources {
			if p, err := parsePattern(s); err == nil && p == want {
				continue
			}
			kept = append(kept, s)
		}
		if len(kept) != len(r.Resources) {
			changed++
			r.Resources = kept
		}
		if len(r.Resources) > 0 {
			out = append(out, r)
		}
	}
	clear(c.Rules[len(out):])
	c.Rules = out
	return changed, nil
}

// CanonicalResource is the resource pattern s as this package writes it
// ("topic:a*" → "Topic:a*", "Group:%RETRY%g" → "Group:g"), or ErrInvalid.
func CanonicalResource(s string) (string, error) {
	p, err := parsePattern(s)
	if err != nil {
		return "", err
	}
	return p.String(), nil
}

// ActionNames are the names of the actions in a, as a rule writes them:
// ["All"] for every action.
func ActionNames(a Action) []string {
	if a&All == All {
		return []string{"All"}
	}
	var out []string
	for _, n := range actionNames {
		if a&n.a != 0 {
			out = append(out, n.name)
		}
	}
	return out
}
