package authadmin

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// putACL is AUTH_CREATE_ACL and AUTH_UPDATE_ACL (the same in Apache): each
// entry of the body replaces the subject's entry for its resource, the
// other entries stay. The subject is the body's, or the header's.
func (s *Service) putACL(req *wire.Command) result {
	info, err := DecodeACLInfo(req.Body)
	if err != nil || len(info.Policies) == 0 {
		return fail(wire.SystemError, "The body of acl is null")
	}
	subject := info.Subject
	if subject == "" {
		subject = req.ExtFields["subject"]
	}
	name, err := parseSubject(subject)
	if err != nil {
		return fail(wire.SystemError, "%v", err)
	}
	rules, r, good := policyRules(name, info.Policies)
	if !good {
		return r
	}
	return s.edit(req, func(c *acl.Config) error {
		if _, exists := c.User(name); !exists {
			return refuse(wire.NoPermission, "The subject of %s is not exist.", subjectKey(name))
		}
		for _, rc := range rules {
			if err := c.PutRule(rc); err != nil {
				return err
			}
		}
		return nil
	})
}

// policyRules checks the policies of a body as Apache's
// AuthorizationMetadataManager does and turns their entries into rules
// (consecutive entries alike but for their resource become one rule).
func policyRules(user string, policies []PolicyInfo) ([]acl.RuleConfig, result, bool) {
	var rules []acl.RuleConfig
	for _, p := range policies {
		if strings.EqualFold(strings.TrimSpace(p.PolicyType), policyDefault) {
			return nil, fail(wire.NoPermission, "The policy type Default is not supported: only Custom."), false
		}
		for _, e := range p.Entries {
			rc, err := entryRule(user, e)
			if err != nil {
				return nil, fail(wire.NoPermission, "%v", err), false
			}
			if n := len(rules); n > 0 && sameButResources(rules[n-1], rc) {
				rules[n-1].Resources = append(rules[n-1].Resources, rc.Resources...)
				continue
			}
			rules = append(rules, rc)
		}
	}
	if len(rules) == 0 {
		return nil, fail(wire.NoPermission, "The policies is empty."), false
	}
	return rules, result{}, true
}

func sameButResources(a, b acl.RuleConfig) bool {
	return a.Decision == b.Decision && slices.Equal(a.Actions, b.Actions) && slices.Equal(a.SourceIPs, b.SourceIPs)
}

// entryRule is one PolicyEntryInfo as a rule, refused with Apache's
// messages. Unknown action names are dropped, as Apache's AclConverter
// drops them.
func entryRule(user string, e PolicyEntryInfo) (acl.RuleConfig, error) {
	rc := acl.RuleConfig{User: user}
	if strings.TrimSpace(e.Resource) == "" {
		return rc, fmt.Errorf("The resource is null.")
	}
	res, err := acl.CanonicalResource(strings.TrimSpace(e.Resource))
	if err != nil {
		return rc, fmt.Errorf("The resource %s is invalid: want Topic:name, Group:name (a name may end with *) or *.", e.Resource)
	}
	rc.Resources = []string{res}
	for _, a := range e.Actions {
		a = strings.TrimSpace(a)
		if strings.EqualFold(a, "Any") {
			return rc, fmt.Errorf("The actions can not be Any.")
		}
		if act, err := acl.ParseAction(a); err == nil {
			rc.Actions = append(rc.Actions, acl.ActionNames(act)...)
		}
	}
	if len(rc.Actions) == 0 {
		return rc, fmt.Errorf("The actions is empty.")
	}
	for _, ip := range e.SourceIps {
		ip = strings.TrimSpace(ip)
		if ip == "" {
			return rc, fmt.Errorf("The source ip is empty.")
		}
		if !validSource(ip) {
			return rc, fmt.Errorf("The source ip is invalid.")
		}
		rc.SourceIPs = append(rc.SourceIPs, ip)
	}
	d, err := acl.ParseDecision(strings.TrimSpace(e.Decision))
	if err != nil {
		return rc, fmt.Errorf("The decision is null or illegal.")
	}
	rc.Decision = d.String()
	return rc, nil
}

func validSource(s string) bool {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return err == nil && !p.Addr().Is4In6()
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

// deleteACL is AUTH_DELETE_ACL: the subject's entry for the header's
// resource, or all its rules when the request names none.
func (s *Service) deleteACL(req *wire.Command) result {
	name, err := parseSubject(req.ExtFields["subject"])
	if err != nil {
		return fail(wire.NoPermission, "%v", err)
	}
	if strings.EqualFold(strings.TrimSpace(req.ExtFields["policyType"]), policyDefault) {
		return fail(wire.NoPermission, "The policy type Default is not supported: only Custom.")
	}
	resource := strings.TrimSpace(req.ExtFields["resource"])
	if resource != "" {
		if _, err := acl.CanonicalResource(resource); err != nil {
			return fail(wire.NoPermission, "The resource %s is invalid: want Topic:name, Group:name (a name may end with *) or *.", resource)
		}
	}
	return s.edit(req, func(c *acl.Config) error {
		if _, exists := c.User(name); !exists {
			return refuse(wire.NoPermission, "The subject is not exist.")
		}
		if len(c.RulesOf(name)) == 0 {
			return refuse(wire.NoPermission, "The acl is not exist.")
		}
		n, err := c.RemoveRules(name, resource)
		if err == nil && n == 0 {
			return errUnchanged
		}
		return err
	})
}

// getACL is AUTH_GET_ACL: the subject's AclInfo, or SUCCESS without a
// body when it has no rules.
func (s *Service) getACL(req *wire.Command) result {
	name, err := parseSubject(req.ExtFields["subject"])
	if err != nil {
		return fail(wire.SystemError, "%v", err)
	}
	cfg := s.az.Config()
	if _, exists := cfg.User(name); !exists {
		return fail(wire.NoPermission, "The subject is not exist.")
	}
	info, has := aclInfo(name, cfg.RulesOf(name))
	if !has {
		return ok(nil)
	}
	return marshal(info)
}

// listACL is AUTH_LIST_ACL: the AclInfo of every subject whose key
// contains subjectFilter, with only the entries whose resource contains
// resourceFilter (unless the subject's key contains it: Apache's
// LocalAuthorizationMetadataProvider filters so).
func (s *Service) listACL(req *wire.Command) result {
	subjectFilter := strings.TrimSpace(req.ExtFields["subjectFilter"])
	resourceFilter := strings.TrimSpace(req.ExtFields["resourceFilter"])
	cfg := s.az.Config()
	names := make([]string, 0, len(cfg.Users))
	for _, u := range cfg.Users {
		names = append(names, u.AccessKey)
	}
	slices.Sort(names)
	var out []ACLInfo
	for _, name := range names {
		key := subjectKey(name)
		if subjectFilter != "" && !strings.Contains(key, subjectFilter) {
			continue
		}
		info, has := aclInfo(name, cfg.RulesOf(name))
		if has && resourceFilter != "" && !strings.Contains(key, resourceFilter) {
			p := &info.Policies[0]
			p.Entries = slices.DeleteFunc(p.Entries, func(e PolicyEntryInfo) bool { return !strings.Contains(e.Resource, resourceFilter) })
			has = len(p.Entries) > 0
		}
		if has {
			out = append(out, info)
		}
	}
	if len(out) == 0 {
		return ok(nil)
	}
	return marshal(out)
}

// aclInfo is a user's rules as Apache's AclInfo: one Custom policy, an
// entry per resource of each rule, names canonical.
func aclInfo(user string, rules []acl.RuleConfig) (ACLInfo, bool) {
	p := PolicyInfo{PolicyType: policyCustom}
	for _, r := range rules {
		var act acl.Action
		for _, a := range r.Actions {
			x, _ := acl.ParseAction(a) // the configuration in force parsed
			act |= x
		}
		d, _ := acl.ParseDecision(r.Decision)
		for _, res := range r.Resources {
			canon, _ := acl.CanonicalResource(res)
			p.Entries = append(p.Entries, PolicyEntryInfo{Resource: canon, Actions: acl.ActionNames(act),
				Decision: d.String(), SourceIps: slices.Clone(r.SourceIPs)})
		}
	}
	if len(p.Entries) == 0 {
		return ACLInfo{Subject: subjectKey(user)}, false
	}
	return ACLInfo{Subject: subjectKey(user), Policies: []PolicyInfo{p}}, true
}
