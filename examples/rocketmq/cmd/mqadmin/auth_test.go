package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

const cliACL = `{
  "users": [
    {"accessKey": "admin", "secretKey": "adm1n", "superUser": true},
    {"accessKey": "app", "secretKey": "s3cret"}
  ],
  "rules": [
    {"user": "app", "resources": ["Topic:orders"], "actions": ["Pub"], "decision": "Allow"}
  ]
}`

// TestAuthSubcommandsAgainstTheRunningBroker runs the user and ACL
// subcommands, signed with -ak/-sk, against the example broker with ACL:
// what they change is in force and in the file, what they print is
// Apache's, a refusal exits 1 with the broker's code and remark.
func TestAuthSubcommandsAgainstTheRunningBroker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(path, []byte(cliACL), 0o600))
	az, err := acl.Open(path, acl.Options{})
	require.NoError(t, err)
	b := rmqtest.StartConfig(t, server.Config{ACL: az, ACLFile: path})
	as := func(ak, sk string, args ...string) (int, string, string) {
		return mqadmin(append([]string{args[0], "-n", b.NameSrv, "-ak", ak, "-sk", sk}, args[1:]...)...)
	}
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := as("admin", "adm1n", args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		return out
	}

	assert.Equal(t, "create user to "+b.Broker+" success.\n", must("createUser", "-c", "DefaultCluster", "-u", "bob", "-p", "b0b"))
	assert.Equal(t, fmt.Sprintf(userFormat, "#UserName", "#Password", "#UserType", "#UserStatus")+fmt.Sprintf(userFormat, "bob", "b0b", "Normal", "enable"),
		must("getUser", "-b", b.Broker, "-u", "bob"))
	must("updateUser", "-b", b.Broker, "-u", "bob", "-s", "disable")
	out := must("listUser", "-c", "DefaultCluster", "-f", "b")
	assert.Contains(t, out, fmt.Sprintf(userFormat, "bob", "b0b", "Normal", "disable"))
	assert.Contains(t, out, "get user from "+b.Broker+" success.")
	assert.NotContains(t, out, "app", "the filter")
	must("updateUser", "-b", b.Broker, "-u", "bob", "-s", "enable")

	assert.Equal(t, "create acl to "+b.Broker+" success.\n",
		must("createAcl", "-b", b.Broker, "-s", "User:bob", "-r", "Topic:orders,Group:billing", "-a", "Pub,Sub", "-d", "Allow", "-i", "127.0.0.1"))
	must("updateAcl", "-c", "DefaultCluster", "-s", "User:bob", "-r", "Group:billing", "-a", "Sub", "-d", "Deny")
	assert.Equal(t, fmt.Sprintf(aclFormat, "#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")+
		fmt.Sprintf(aclFormat, "User:bob", "Custom", "Topic:orders", "[Pub, Sub]", "[127.0.0.1]", "Allow")+
		fmt.Sprintf(aclFormat, "User:bob", "Custom", "Group:billing", "[Sub]", "null", "Deny"),
		must("getAcl", "-b", b.Broker, "-s", "User:bob"))
	out = must("listAcl", "-b", b.Broker, "-r", "Topic:orders")
	assert.Contains(t, out, fmt.Sprintf(aclFormat, "User:app", "Custom", "Topic:orders", "[Pub]", "null", "Allow"))
	assert.NotContains(t, out, "Group:billing")

	cfg, err := acl.Load(path)
	require.NoError(t, err)
	assert.Equal(t, az.Config(), cfg, "the file holds what is in force")
	assert.Len(t, cfg.RulesOf("bob"), 2)

	// Refusals: exit 1, Apache's code and remark; nothing changes.
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	code, _, errOut := as("admin", "adm1n", "createUser", "-b", b.Broker, "-u", "bob", "-p", "x")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errOut, "code 16: The user is existed")
	code, _, errOut = as("app", "s3cret", "deleteUser", "-b", b.Broker, "-u", "bob")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errOut, "code 16")
	code, _, errOut = mqadmin("listUser", "-b", b.Broker)
	assert.Equal(t, exitFail, code, "unsigned")
	assert.Contains(t, errOut, "no credentials")
	code, _, _ = as("admin", "adm1n", "createAcl", "-b", b.Broker, "-s", "User:bob", "-r", "Topic:x")
	assert.Equal(t, exitUsage, code, "-a and -d are required")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))

	assert.Equal(t, "delete acl to "+b.Broker+" success.\n", must("deleteAcl", "-b", b.Broker, "-s", "User:bob", "-r", "Group:billing"))
	must("deleteAcl", "-b", b.Broker, "-s", "User:bob")
	assert.Empty(t, must("getAcl", "-b", b.Broker, "-s", "User:bob"), "no rules: nothing printed, as Apache")
	assert.Equal(t, "delete user to "+b.Broker+" success.\n", must("deleteUser", "-b", b.Broker, "-u", "bob"))
	_, ok := az.Config().User("bob")
	assert.False(t, ok)
}
