package acl

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const engineDoc = `{
  "users": [
    {"accessKey": "root", "secretKey": "r", "superUser": true},
    {"accessKey": "app", "secretKey": "a"},
    {"accessKey": "office", "secretKey": "o"},
    {"accessKey": "ops", "secretKey": "p"},
    {"accessKey": "nobody-rules", "secretKey": "n"}
  ],
  "rules": [
    {"user": "app", "resources": ["Topic:orders"], "actions": ["Pub"], "decision": "Allow"},
    {"user": "app", "resources": ["Topic:orders-*"], "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"user": "app", "resources": ["Topic:orders-audit"], "actions": ["All"], "decision": "Deny"},
    {"user": "app", "resources": ["Group:billing"], "actions": ["sub"], "decision": "allow"},
    {"user": "app", "resources": ["Topic:shared"], "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"user": "app", "resources": ["Topic:shared"], "actions": ["Sub"], "decision": "Deny"},
    {"user": "User:office", "resources": ["Topic:*"], "actions": ["Pub"], "decision": "Allow", "sourceIps": ["10.1.0.0/16", "192.168.7.7", "fd00::/8"]},
    {"user": "office", "resources": ["Topic:*"], "actions": ["Pub"], "decision": "Deny", "sourceIps": ["10.1.99.0/24"]},
    {"user": "ops", "resources": ["*"], "actions": ["All"], "decision": "Allow"},
    {"user": "ops", "resources": ["Topic:*"], "actions": ["Delete"], "decision": "Deny"},
    {"user": "ops", "resources": ["Group:pay*"], "actions": ["Update"], "decision": "Deny"}
  ]
}`

func TestAuthorizeRuleEngine(t *testing.T) {
	a := mustNew(t, engineDoc, Options{})
	ip := netip.MustParseAddr
	none := netip.Addr{}
	cases := []struct {
		name string
		user string
		res  Resource
		act  Action
		ip   netip.Addr
		want Decision
	}{
		{"exact allow", "app", Topic("orders"), Pub, none, Allow},
		{"exact rule does not grant other actions", "app", Topic("orders"), Sub, none, Deny},
		{"exact is not a prefix", "app", Topic("ordersX"), Pub, none, Deny},
		{"prefix allow", "app", Topic("orders-eu"), Sub, none, Allow},
		{"prefix needs its separator", "app", Topic("orders"), Sub, none, Deny},
		{"deny on exact beats allow on prefix", "app", Topic("orders-audit"), Pub, none, Deny},
		{"deny with All covers every action", "app", Topic("orders-audit"), Sub, none, Deny},
		{"kinds do not mix", "app", Group("orders-eu"), Sub, none, Deny},
		{"group allow, case-insensitive names", "app", Group("billing"), Sub, none, Allow},
		{"retry topic is the group", "app", Group("%RETRY%billing"), Sub, none, Allow},
		{"dead letters are the group", "app", Group("%DLQ%billing"), Sub, none, Allow},
		{"TopicOrGroup maps retry topics", "app", TopicOrGroup("%RETRY%billing"), Sub, none, Allow},
		{"same resource: deny over allow", "app", Topic("shared"), Sub, none, Deny},
		{"same resource: the action not denied stays allowed", "app", Topic("shared"), Pub, none, Allow},
		{"any-of: one allowed action suffices", "app", Topic("shared"), Pub | Sub, none, Allow},
		{"any-of: none allowed", "app", Topic("unlisted"), Pub | Sub, none, Deny},
		{"no rule at all", "nobody-rules", Topic("orders"), Pub, none, Deny},
		{"unknown user", "stranger", Topic("orders"), Pub, none, Deny},
		{"empty user", "", Topic("orders"), Pub, none, Deny},
		{"super user", "root", Topic("anything"), All, none, Allow},
		{"super user ignores absence of rules", "root", Group("g"), Delete, ip("8.8.8.8"), Allow},
		{"ip in range", "office", Topic("t"), Pub, ip("10.1.2.3"), Allow},
		{"ip out of range", "office", Topic("t"), Pub, ip("10.2.0.1"), Deny},
		{"single address", "office", Topic("t"), Pub, ip("192.168.7.7"), Allow},
		{"next to the single address", "office", Topic("t"), Pub, ip("192.168.7.8"), Deny},
		{"IPv4-mapped IPv6 is IPv4", "office", Topic("t"), Pub, ip("::ffff:10.1.2.3"), Allow},
		{"IPv6 range", "office", Topic("t"), Pub, ip("fd12::1"), Allow},
		{"deny range inside allow range", "office", Topic("t"), Pub, ip("10.1.99.5"), Deny},
		{"unknown ip: allow rules with ranges do not apply", "office", Topic("t"), Pub, none, Deny},
		{"All grants every action", "ops", Group("g"), List, none, Allow},
		{"star covers every kind", "ops", Topic("t"), Create, none, Allow},
		{"deny on Topic:* beats allow on *", "ops", Topic("t"), Delete, none, Deny},
		{"deny on Topic:* leaves groups", "ops", Group("t"), Delete, none, Allow},
		{"group prefix deny", "ops", Group("payroll"), Update, none, Deny},
		{"no action", "ops", Topic("t"), 0, none, Deny},
		{"unknown action bits", "ops", Topic("t"), 1 << 12, none, Deny},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := a.Authorize(c.user, c.res, c.act, c.ip)
			assert.Equal(t, c.want, d)
			if c.want == Allow {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrDenied)
			var de *DeniedError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, c.user, de.User)
			assert.Equal(t, c.res, de.Resource)
			assert.Equal(t, c.act, de.Action)
			assert.Contains(t, err.Error(), c.res.String())
		})
	}
}

func TestAuthorizeUnknownUserIsDeniedAndUnknown(t *testing.T) {
	a := mustNew(t, engineDoc, Options{})
	_, err := a.Authorize("stranger", Topic("orders"), Pub, netip.Addr{})
	assert.ErrorIs(t, err, ErrDenied)
	assert.ErrorIs(t, err, ErrUnknownUser)
	_, err = a.Authorize("app", Topic("nope"), Pub, netip.Addr{})
	assert.ErrorIs(t, err, ErrDenied)
	assert.False(t, errors.Is(err, ErrUnknownUser))
	assert.Contains(t, err.Error(), `"app"`)
	assert.Contains(t, err.Error(), "Pub")
}

func TestAuthorizeIsDeterministic(t *testing.T) {
	// The same question gets the same answer however often it is asked:
	// nothing in a decision depends on history.
	a := mustNew(t, engineDoc, Options{})
	for range 3 {
		d, _ := a.Authorize("app", Topic("shared"), Sub, netip.Addr{})
		assert.Equal(t, Deny, d)
		d, _ = a.Authorize("app", Topic("shared"), Pub, netip.Addr{})
		assert.Equal(t, Allow, d)
	}
	s := a.Stats()
	assert.Equal(t, uint64(3), s.Allowed)
	assert.Equal(t, uint64(3), s.Denied)
	assert.Equal(t, 5, s.Users)
	assert.Equal(t, 11, s.Rules)
}

func TestNilConfigRefusesEverything(t *testing.T) {
	a, err := New(nil, Options{})
	require.NoError(t, err)
	d, err := a.Authorize("anyone", Topic("t"), Pub, netip.Addr{})
	assert.Equal(t, Deny, d)
	assert.ErrorIs(t, err, ErrUnknownUser)
}

func TestActionAndDecisionNames(t *testing.T) {
	for _, s := range []string{"Pub", "sub", "CREATE", "Update", "Delete", "Get", "List"} {
		a, err := ParseAction(s)
		require.NoError(t, err, s)
		assert.True(t, a != 0 && a&(a-1) == 0, "one bit for %s", s)
	}
	all, err := ParseAction("all")
	require.NoError(t, err)
	assert.Equal(t, All, all)
	_, err = ParseAction("Any")
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, "Pub|Sub", (Pub | Sub).String())
	assert.Equal(t, "All", All.String())
	assert.Equal(t, "none", Action(0).String())
	assert.Equal(t, "Allow", Allow.String())
	assert.Equal(t, "Deny", Decision(0).String(), "the zero decision is Deny")
	_, err = ParseDecision("maybe")
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestResourcePatterns(t *testing.T) {
	cases := []struct {
		pat   string
		res   Resource
		match bool
	}{
		{"*", Topic("x"), true},
		{"*", Group("x"), true},
		{"Topic:*", Topic("x"), true},
		{"topic:*", Group("x"), false},
		{"Topic:a-*", Topic("a-"), true},
		{"Topic:a-*", Topic("a"), false},
		{"Topic:a", Topic("a"), true},
		{"Topic:a", Topic("A"), false},
		{"Group:%RETRY%g", Group("g"), true},
		{"Group:g", Group("%RETRY%g"), true},
	}
	for _, c := range cases {
		p, err := parsePattern(c.pat)
		require.NoError(t, err, c.pat)
		assert.Equal(t, c.match, p.match(c.res), "%s ~ %s", c.pat, c.res)
	}
	for _, bad := range []string{"", "Topic", "Topic:", "Queue:x", "Topic:a*b", "Topic:**", ":x"} {
		_, err := parsePattern(bad)
		assert.ErrorIs(t, err, ErrInvalid, "%q", bad)
	}
}
