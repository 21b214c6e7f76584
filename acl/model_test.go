package acl

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// refDecide is the rule engine written the slow, obvious way from the
// package doc: for each requested action, collect the decisions of the
// matching rules; Deny among them refuses that action, Allow permits it,
// none refuses it; the request passes if any action is permitted.
func refDecide(c *Config, user string, res Resource, act Action, ip netip.Addr) Decision {
	var u *UserConfig
	for i := range c.Users {
		if c.Users[i].AccessKey == user {
			u = &c.Users[i]
		}
	}
	if u == nil || act == 0 || act&^All != 0 {
		return Deny
	}
	if u.SuperUser {
		return Allow
	}
	for bit := Action(1); bit <= List; bit <<= 1 {
		if act&bit == 0 {
			continue
		}
		var sawAllow, sawDeny bool
		for _, r := range c.Rules {
			if strings.TrimPrefix(r.User, "User:") != user || !refActions(r, bit) || !refResource(r, res) {
				continue
			}
			d, _ := ParseDecision(r.Decision)
			if !refSource(r, d, ip) {
				continue
			}
			if d == Deny {
				sawDeny = true
			} else {
				sawAllow = true
			}
		}
		if sawAllow && !sawDeny {
			return Allow
		}
	}
	return Deny
}

func refActions(r RuleConfig, bit Action) bool {
	for _, s := range r.Actions {
		if a, _ := ParseAction(s); a&bit != 0 {
			return true
		}
	}
	return false
}

func refResource(r RuleConfig, res Resource) bool {
	for _, s := range r.Resources {
		if s == "*" {
			return true
		}
		kind, name, _ := strings.Cut(s, ":")
		if !strings.EqualFold(kind, res.Kind.String()) {
			continue
		}
		if name == "*" || name == res.Name ||
			(strings.HasSuffix(name, "*") && strings.HasPrefix(res.Name, strings.TrimSuffix(name, "*"))) {
			return true
		}
	}
	return false
}

func refSource(r RuleConfig, d Decision, ip netip.Addr) bool {
	if len(r.SourceIPs) == 0 {
		return true
	}
	if !ip.IsValid() {
		return d == Deny
	}
	for _, s := range r.SourceIPs {
		if !strings.Contains(s, "/") {
			s += fmt.Sprintf("/%d", netip.MustParseAddr(s).BitLen())
		}
		if netip.MustParsePrefix(s).Masked().Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// TestAuthorizeMatchesTheReferenceModel: random users, rules and requests
// over a small alphabet (so rules collide often): Authorize agrees with the
// obvious implementation.
func TestAuthorizeMatchesTheReferenceModel(t *testing.T) {
	users := []string{"u1", "u2", "u3"}
	names := []string{"a", "ab", "abc", "b"}
	pats := []string{"*", "Topic:*", "Group:*", "Topic:a", "Topic:a*", "Topic:ab*", "Topic:b", "Group:a", "Group:ab*", "Group:b"}
	acts := []string{"Pub", "Sub", "Create", "Update", "Delete", "Get", "List", "All"}
	ips := []string{"10.0.0.0/8", "10.1.0.0/16", "192.168.1.1", "fd00::/8"}
	addrs := []string{"", "10.1.2.3", "10.2.0.1", "192.168.1.1", "192.168.1.2", "fd00::1", "::ffff:10.1.2.3"}
	rapid.Check(t, func(t *rapid.T) {
		var c Config
		for _, u := range users {
			c.Users = append(c.Users, UserConfig{AccessKey: u, SecretKey: "s", SuperUser: rapid.IntRange(0, 5).Draw(t, "super") == 0})
		}
		for range rapid.IntRange(0, 8).Draw(t, "rules") {
			c.Rules = append(c.Rules, RuleConfig{
				User:      rapid.SampledFrom(users).Draw(t, "user"),
				Resources: rapid.SliceOfNDistinct(rapid.SampledFrom(pats), 1, 3, rapid.ID[string]).Draw(t, "res"),
				Actions:   rapid.SliceOfNDistinct(rapid.SampledFrom(acts), 1, 3, rapid.ID[string]).Draw(t, "acts"),
				Decision:  rapid.SampledFrom([]string{"Allow", "Deny"}).Draw(t, "decision"),
				SourceIPs: rapid.SliceOfNDistinct(rapid.SampledFrom(ips), 0, 2, rapid.ID[string]).Draw(t, "ips"),
			})
		}
		a, err := New(&c, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			user := rapid.SampledFrom(append(users, "ghost")).Draw(t, "ruser")
			var res Resource
			if rapid.Bool().Draw(t, "topic") {
				res = Topic(rapid.SampledFrom(names).Draw(t, "name"))
			} else {
				res = Group(rapid.SampledFrom(names).Draw(t, "name"))
			}
			act := Action(rapid.IntRange(1, int(All)).Draw(t, "act"))
			var ip netip.Addr
			if s := rapid.SampledFrom(addrs).Draw(t, "ip"); s != "" {
				ip = netip.MustParseAddr(s)
			}
			got, _ := a.Authorize(user, res, act, ip)
			if want := refDecide(&c, user, res, act, ip); got != want {
				t.Fatalf("Authorize(%s, %s, %s, %v) = %s, model says %s", user, res, act, ip, got, want)
			}
		}
	})
}
