package acl

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const editDoc = `{
  "users": [
    {"accessKey": "admin", "secretKey": "adm1n", "superUser": true},
    {"accessKey": "app", "secretKey": "s3cret"},
    {"accessKey": "other", "secretKey": "0ther"}
  ],
  "rules": [
    {"user": "app", "resources": ["Topic:a", "topic:b"], "actions": ["Pub"], "decision": "Allow"},
    {"user": "User:app", "resources": ["Group:g"], "actions": ["Sub"], "decision": "Allow", "sourceIps": ["127.0.0.1"]},
    {"user": "other", "resources": ["Topic:a"], "actions": ["All"], "decision": "Allow"}
  ]
}`

func editConfig(t *testing.T) *Config {
	t.Helper()
	c, err := Parse([]byte(editDoc))
	require.NoError(t, err)
	return c
}

func TestConfigUserEdits(t *testing.T) {
	c := editConfig(t)
	require.ErrorIs(t, c.AddUser(UserConfig{AccessKey: "app", SecretKey: "x"}), ErrExists)
	require.ErrorIs(t, c.AddUser(UserConfig{AccessKey: "new"}), ErrInvalid, "no secret")
	require.ErrorIs(t, c.AddUser(UserConfig{AccessKey: "a,b", SecretKey: "x"}), ErrInvalid)
	require.NoError(t, c.AddUser(UserConfig{AccessKey: "new", SecretKey: "n"}))
	u, ok := c.User("new")
	require.True(t, ok)
	assert.Equal(t, "n", u.SecretKey)

	require.ErrorIs(t, c.PutUser(UserConfig{AccessKey: "ghost", SecretKey: "g"}), ErrNotFound)
	require.NoError(t, c.PutUser(UserConfig{AccessKey: "app", SecretKey: "changed", Disabled: true}))
	u, _ = c.User("app")
	assert.Equal(t, UserConfig{AccessKey: "app", SecretKey: "changed", Disabled: true}, u)
	assert.Len(t, c.RulesOf("app"), 2, "replacing a user keeps its rules")

	assert.False(t, c.RemoveUser("ghost"))
	assert.True(t, c.RemoveUser("app"))
	_, ok = c.User("app")
	assert.False(t, ok)
	assert.Empty(t, c.RulesOf("app"), "its rules went with it")
	assert.Len(t, c.RulesOf("other"), 1, "another user's rules stay")
	_, err := compile(c)
	require.NoError(t, err)
}

func TestConfigPutRuleReplacesTheEntryOfAResource(t *testing.T) {
	c := editConfig(t)
	// "Topic:b" is in the first rule as "topic:b": the same resource.
	require.NoError(t, c.PutRule(RuleConfig{User: "User:app", Resources: []string{"Topic:b"}, Actions: []string{"Sub"}, Decision: "Deny"}))
	got := c.RulesOf("app")
	require.Len(t, got, 3)
	assert.Equal(t, []string{"Topic:a"}, got[0].Resources, "b left the first rule, a stayed")
	assert.Equal(t, RuleConfig{User: "app", Resources: []string{"Topic:b"}, Actions: []string{"Sub"}, Decision: "Deny"}, got[2])
	assert.Equal(t, []string{"Topic:a"}, c.RulesOf("other")[0].Resources, "another user's rule on a is not touched")

	require.NoError(t, c.PutRule(RuleConfig{User: "app", Resources: []string{"Group:g"}, Actions: []string{"All"}, Decision: "Allow"}))
	got = c.RulesOf("app")
	require.Len(t, got, 3, "the rule left without resources is dropped")
	assert.Equal(t, []string{"Group:g"}, got[2].Resources)

	require.ErrorIs(t, c.PutRule(RuleConfig{User: "ghost", Resources: []string{"*"}, Actions: []string{"Pub"}, Decision: "Allow"}), ErrNotFound)
	before := c.Clone()
	for name, rc := range map[string]RuleConfig{
		"bad resource": {User: "app", Resources: []string{"Cluster:c"}, Actions: []string{"Pub"}, Decision: "Allow"},
		"bad action":   {User: "app", Resources: []string{"Topic:a"}, Actions: []string{"Any"}, Decision: "Allow"},
		"no decision":  {User: "app", Resources: []string{"Topic:a"}, Actions: []string{"Pub"}},
		"bad ip":       {User: "app", Resources: []string{"Topic:a"}, Actions: []string{"Pub"}, Decision: "Allow", SourceIPs: []string{"300.1.1.1"}},
	} {
		require.ErrorIs(t, c.PutRule(rc), ErrInvalid, name)
		require.Equal(t, before, c, "%s changed nothing", name)
	}
}

func TestConfigRemoveRules(t *testing.T) {
	c := editConfig(t)
	n, err := c.RemoveRules("app", "Topic:a")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"topic:b"}, c.RulesOf("app")[0].Resources)
	n, err = c.RemoveRules("app", "Topic:nothing")
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = c.RemoveRules("app", "Topic:a*b")
	require.ErrorIs(t, err, ErrInvalid)
	n, err = c.RemoveRules("app", "")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Empty(t, c.RulesOf("app"))
	assert.Len(t, c.Rules, 1)
}

func TestMarshalParsesBackToTheSameConfig(t *testing.T) {
	c := editConfig(t)
	c.Users[1].Disabled = true
	b, err := c.Marshal()
	require.NoError(t, err)
	back, err := Parse(b)
	require.NoError(t, err)
	assert.Equal(t, c, back)

	empty, err := (&Config{}).Marshal()
	require.NoError(t, err)
	_, err = Parse(empty)
	require.NoError(t, err)
}

func TestEditTakesEffectOnlyWhenCheckedAndCommitted(t *testing.T) {
	a, err := New(editConfig(t), Options{})
	require.NoError(t, err)
	ip := netip.MustParseAddr("127.0.0.1")

	// A commit that fails changes nothing.
	boom := errors.New("disk full")
	err = a.Edit(func(c *Config) error {
		return c.PutRule(RuleConfig{User: "other", Resources: []string{"Topic:x"}, Actions: []string{"Pub"}, Decision: "Allow"})
	}, func(*Config) error { return boom })
	require.ErrorIs(t, err, boom)
	_, err = a.Authorize("other", Topic("x"), Pub, ip)
	require.ErrorIs(t, err, ErrDenied)

	// An edit the check refuses changes nothing and never reaches commit.
	err = a.Edit(func(c *Config) error {
		c.Rules = append(c.Rules, RuleConfig{User: "ghost", Resources: []string{"*"}, Actions: []string{"Pub"}, Decision: "Allow"})
		return nil
	}, func(*Config) error { t.Fatal("commit of a bad config"); return nil })
	require.ErrorIs(t, err, ErrInvalid)

	// A good one takes effect at once, and commit saw what took effect.
	var committed *Config
	require.NoError(t, a.Edit(func(c *Config) error {
		return c.PutRule(RuleConfig{User: "other", Resources: []string{"Topic:x"}, Actions: []string{"Pub"}, Decision: "Allow"})
	}, func(c *Config) error { committed = c.Clone(); return nil }))
	_, err = a.Authorize("other", Topic("x"), Pub, ip)
	require.NoError(t, err)
	assert.Equal(t, committed, a.Config())

	// Config is a copy.
	cp := a.Config()
	cp.Users = nil
	assert.Len(t, a.Config().Users, 3)
}

func TestDisabledUserIsRefusedEverywhere(t *testing.T) {
	c := editConfig(t)
	c.Users[1].Disabled = true // app
	c.Users[0].Disabled = true // admin
	a, err := New(c, Options{})
	require.NoError(t, err)
	_, err = a.Authorize("app", Topic("a"), Pub, netip.Addr{})
	require.ErrorIs(t, err, ErrDenied)
	_, err = a.Authorize("admin", Topic("a"), Pub, netip.Addr{})
	require.ErrorIs(t, err, ErrDenied, "a disabled super user too")
	assert.False(t, a.IsSuperUser("admin"))
	_, err = a.AuthenticateSecret("app", "s3cret")
	require.ErrorIs(t, err, ErrDisabled)
	fields := map[string]string{FieldAccessKey: "app", "topic": "a"}
	fields[FieldSignature] = SignRemoting("s3cret", fields, nil)
	_, err = a.AuthenticateRemoting(fields, nil)
	require.ErrorIs(t, err, ErrDisabled)
	_, err = a.AuthenticateV5(V5Authorization("app", "s3cret", "20260301T120000Z"), "20260301T120000Z")
	require.ErrorIs(t, err, ErrDisabled)
	_, err = a.Authorize("other", Topic("a"), Pub, netip.Addr{})
	require.NoError(t, err, "an enabled user is not affected")
}

// TestConcurrentEditsAndReloadsLoseNothing: edits are serialized with each
// other and with ReloadFile, so every edit committed to the file is in
// force and in the file at the end.
func TestConcurrentEditsAndReloadsLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(path, []byte(editDoc), 0o600))
	a, err := Open(path, Options{})
	require.NoError(t, err)
	commit := func(c *Config) error {
		b, err := c.Marshal()
		if err != nil {
			return err
		}
		return os.WriteFile(path, b, 0o600) // the test's own, non-atomic write: Edit serializes it with ReloadFile
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 5 {
				name := fmt.Sprintf("u%d-%d", i, j)
				assert.NoError(t, a.Edit(func(c *Config) error { return c.AddUser(UserConfig{AccessKey: name, SecretKey: "s"}) }, commit))
			}
		}()
		go func() {
			defer wg.Done()
			for range 5 {
				assert.NoError(t, a.ReloadFile(path))
			}
		}()
	}
	wg.Wait()
	onDisk, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, a.Config(), onDisk)
	assert.Len(t, onDisk.Users, 3+8*5)
}
