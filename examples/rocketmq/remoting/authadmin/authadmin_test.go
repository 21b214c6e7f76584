package authadmin_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/authadmin"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

func TestMain(m *testing.M) { rmqtest.Main(m) }

// testACL: admin is the super user; ops may Update and Get "*" (Apache's
// Update/Get on the cluster) but is no super user; app only sends.
const testACL = `{
  "users": [
    {"accessKey": "admin", "secretKey": "adm1n", "superUser": true},
    {"accessKey": "ops", "secretKey": "0ps"},
    {"accessKey": "app", "secretKey": "s3cret"}
  ],
  "rules": [
    {"user": "ops", "resources": ["*"], "actions": ["Update", "Get"], "decision": "Allow"},
    {"user": "app", "resources": ["Topic:orders"], "actions": ["Pub"], "decision": "Allow"}
  ]
}`

type env struct {
	t    *testing.T
	az   *acl.Authorizer
	file string
	addr string
}

func start(t *testing.T) *env {
	t.Helper()
	file := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(file, []byte(testACL), 0o600))
	az, err := acl.Open(file, acl.Options{})
	require.NoError(t, err)
	b := rmqtest.StartConfig(t, server.Config{ACL: az, ACLFile: file})
	return &env{t: t, az: az, file: file, addr: b.Broker}
}

var opaque atomic.Int32

// call sends one request signed as the v2 client signs (ak "" = unsigned)
// and returns the answer.
func (e *env) call(ak, sk string, code int16, ext map[string]string, body []byte) *wire.Command {
	e.t.Helper()
	nc, err := net.Dial("tcp", e.addr)
	require.NoError(e.t, err)
	defer nc.Close()
	fields := map[string]string{}
	for k, v := range ext {
		fields[k] = v
	}
	if ak != "" {
		fields[acl.FieldAccessKey] = ak
		fields[acl.FieldSignature] = acl.SignRemoting(sk, fields, body)
	}
	req := &wire.Command{Code: code, Language: "JAVA", Version: 475, Opaque: opaque.Add(1), ExtFields: fields, Body: body}
	frame, err := wire.Encode(req)
	require.NoError(e.t, err)
	_, err = nc.Write(frame)
	require.NoError(e.t, err)
	raw, err := wire.ReadFrame(bufio.NewReader(nc), wire.DefaultMaxFrame)
	require.NoError(e.t, err)
	resp, err := wire.Decode(raw)
	require.NoError(e.t, err)
	require.Equal(e.t, req.Opaque, resp.Opaque)
	return resp
}

func (e *env) admin(code int16, ext map[string]string, body []byte) *wire.Command {
	e.t.Helper()
	return e.call("admin", "adm1n", code, ext, body)
}

func (e *env) mustOK(resp *wire.Command) []byte {
	e.t.Helper()
	require.Equal(e.t, wire.Success, resp.Code, "remark: %s", resp.Remark)
	return resp.Body
}

// onDisk is the file's configuration; it must be the one in force.
func (e *env) onDisk() *acl.Config {
	e.t.Helper()
	c, err := acl.Load(e.file)
	require.NoError(e.t, err)
	assert.Equal(e.t, e.az.Config(), c, "the file on disk loads to the rules in force")
	return c
}

func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestUserRequests(t *testing.T) {
	e := start(t)
	e.mustOK(e.admin(authadmin.CodeCreateUser, map[string]string{"username": "bob"},
		jsonBody(t, authadmin.UserInfo{Username: "bob", Password: "b0b"})))
	assert.Equal(t, `{"password":"b0b","userStatus":"enable","userType":"Normal","username":"bob"}`,
		string(e.mustOK(e.admin(authadmin.CodeGetUser, map[string]string{"username": "bob"}, nil))))
	u, ok := e.onDisk().User("bob")
	require.True(t, ok)
	assert.Equal(t, acl.UserConfig{AccessKey: "bob", SecretKey: "b0b"}, u)

	// Update: the password and the status change, the type stays.
	e.mustOK(e.admin(authadmin.CodeUpdateUser, map[string]string{"username": "bob"},
		[]byte(`{"username":"bob","password":"n3w","userStatus":"disable"}`)))
	u, _ = e.onDisk().User("bob")
	assert.Equal(t, acl.UserConfig{AccessKey: "bob", SecretKey: "n3w", Disabled: true}, u)
	_, err := e.az.AuthenticateSecret("bob", "n3w")
	require.ErrorIs(t, err, acl.ErrDisabled, "in force at once")
	e.mustOK(e.admin(authadmin.CodeUpdateUser, map[string]string{"username": "bob"}, []byte(`{"userStatus":"enable","userType":"super"}`)))
	assert.True(t, e.az.IsSuperUser("bob"), "the super user may make a super user")

	var list []authadmin.UserInfo
	require.NoError(t, json.Unmarshal(e.mustOK(e.admin(authadmin.CodeListUser, map[string]string{"filter": "o"}, nil)), &list))
	assert.Equal(t, []authadmin.UserInfo{
		{Username: "bob", Password: "n3w", UserType: "Super", UserStatus: "enable"},
		{Username: "ops", Password: "0ps", UserType: "Normal", UserStatus: "enable"},
	}, list, "the users whose name contains o, by name")
	assert.Empty(t, e.mustOK(e.admin(authadmin.CodeListUser, map[string]string{"filter": "zzz"}, nil)))

	e.mustOK(e.admin(authadmin.CodeDeleteUser, map[string]string{"username": "bob"}, nil))
	_, ok = e.onDisk().User("bob")
	assert.False(t, ok)
	assert.Empty(t, e.mustOK(e.admin(authadmin.CodeGetUser, map[string]string{"username": "bob"}, nil)), "Apache answers SUCCESS without a body")
	e.mustOK(e.admin(authadmin.CodeDeleteUser, map[string]string{"username": "bob"}, nil))
}

func TestACLRequests(t *testing.T) {
	e := start(t)
	ip := netip.MustParseAddr("127.0.0.1")
	// Apache's mqadmin createAcl -s User:app -r Topic:orders,Group:g -a Pub,Sub -d Allow -i 127.0.0.1
	body := authadmin.ACLInfo{Subject: "User:app", Policies: []authadmin.PolicyInfo{{Entries: []authadmin.PolicyEntryInfo{
		{Resource: "Topic:orders", Actions: []string{"Pub", "Sub"}, Decision: "Allow", SourceIps: []string{"127.0.0.1"}},
		{Resource: "Group:g", Actions: []string{"Pub", "Sub"}, Decision: "Allow", SourceIps: []string{"127.0.0.1"}},
	}}}}
	e.mustOK(e.admin(authadmin.CodeCreateACL, map[string]string{"subject": "User:app"}, jsonBody(t, body)))
	_, err := e.az.Authorize("app", acl.Group("g"), acl.Sub, ip)
	require.NoError(t, err, "in force at once")
	assert.Equal(t, []acl.RuleConfig{{User: "app", Resources: []string{"Topic:orders", "Group:g"}, Actions: []string{"Pub", "Sub"},
		Decision: "Allow", SourceIPs: []string{"127.0.0.1"}}}, e.onDisk().RulesOf("app"),
		"the file's Pub rule on orders was replaced by the new entry")

	// updateAcl: Deny Sub on the group; the topic's entry stays.
	e.mustOK(e.admin(authadmin.CodeUpdateACL, map[string]string{"subject": "User:app"},
		[]byte(`{"policies":[{"entries":[{"resource":"group:g","actions":["sub"],"decision":"deny"}]}]}`)))
	_, err = e.az.Authorize("app", acl.Group("g"), acl.Sub, ip)
	require.ErrorIs(t, err, acl.ErrDenied)
	e.onDisk()

	got := e.mustOK(e.admin(authadmin.CodeGetACL, map[string]string{"subject": "User:app"}, nil))
	assert.JSONEq(t, `{"subject":"User:app","policies":[{"policyType":"Custom","entries":[
		{"resource":"Topic:orders","actions":["Pub","Sub"],"decision":"Allow","sourceIps":["127.0.0.1"]},
		{"resource":"Group:g","actions":["Sub"],"decision":"Deny"}]}]}`, string(got))

	var list []authadmin.ACLInfo
	require.NoError(t, json.Unmarshal(e.mustOK(e.admin(authadmin.CodeListACL, map[string]string{"resourceFilter": "Group"}, nil)), &list))
	require.Len(t, list, 1, "only app has an entry on a group")
	assert.Equal(t, "User:app", list[0].Subject)
	assert.Equal(t, []authadmin.PolicyEntryInfo{{Resource: "Group:g", Actions: []string{"Sub"}, Decision: "Deny"}}, list[0].Policies[0].Entries)
	require.NoError(t, json.Unmarshal(e.mustOK(e.admin(authadmin.CodeListACL, nil, nil)), &list))
	assert.Len(t, list, 2, "app and ops")

	e.mustOK(e.admin(authadmin.CodeDeleteACL, map[string]string{"subject": "User:app", "resource": "Group:g"}, nil))
	_, err = e.az.Authorize("app", acl.Group("g"), acl.Sub, ip)
	require.ErrorIs(t, err, acl.ErrDenied, "no rule now")
	assert.Len(t, e.onDisk().RulesOf("app"), 1)
	e.mustOK(e.admin(authadmin.CodeDeleteACL, map[string]string{"subject": "User:app"}, nil))
	assert.Empty(t, e.onDisk().RulesOf("app"))
	assert.Empty(t, e.mustOK(e.admin(authadmin.CodeGetACL, map[string]string{"subject": "User:app"}, nil)))
}

// TestRefusalsChangeNothing: each refused request answers Apache's code and
// remark, and neither the rules in force nor the file change.
func TestRefusalsChangeNothing(t *testing.T) {
	e := start(t)
	goodACL := `{"subject":"User:app","policies":[{"entries":[{"resource":"Topic:x","actions":["Pub"],"decision":"Allow"}]}]}`
	cases := []struct {
		name       string
		ak, sk     string
		code       int16
		ext        map[string]string
		body       string
		wantCode   int16
		wantRemark string
	}{
		{"unsigned", "", "", authadmin.CodeCreateUser, map[string]string{"username": "x"}, `{"password":"p"}`, wire.NoPermission, "no credentials"},
		{"wrong secret", "admin", "guess", authadmin.CodeDeleteUser, map[string]string{"username": "app"}, "", wire.NoPermission, "signature"},
		{"a user without admin rights creates", "app", "s3cret", authadmin.CodeCreateUser, map[string]string{"username": "x"}, `{"password":"p"}`, wire.NoPermission, "may not"},
		{"a user without admin rights reads", "app", "s3cret", authadmin.CodeListUser, nil, "", wire.NoPermission, "may not"},
		{"a user without admin rights deletes an acl", "app", "s3cret", authadmin.CodeDeleteACL, map[string]string{"subject": "User:ops"}, "", wire.NoPermission, "may not"},
		{"a non-super admin creates a super user", "ops", "0ps", authadmin.CodeCreateUser, map[string]string{"username": "x"}, `{"password":"p","userType":"Super"}`, wire.SystemError, "The super user can only be create by super user"},
		{"a non-super admin updates the super user", "ops", "0ps", authadmin.CodeUpdateUser, map[string]string{"username": "admin"}, `{"password":"p"}`, wire.NoPermission, "The super user can only be update by super user"},
		{"a non-super admin deletes the super user", "ops", "0ps", authadmin.CodeDeleteUser, map[string]string{"username": "admin"}, "", wire.NoPermission, "The super user can only be update by super user"},
		{"duplicate create", "admin", "adm1n", authadmin.CodeCreateUser, map[string]string{"username": "app"}, `{"password":"p"}`, wire.NoPermission, "The user is existed"},
		{"create without a name", "admin", "adm1n", authadmin.CodeCreateUser, map[string]string{}, `{"username":"x","password":"p"}`, authadmin.InvalidParameter, "The username is blank"},
		{"create without a password", "admin", "adm1n", authadmin.CodeCreateUser, map[string]string{"username": "x"}, `{}`, wire.NoPermission, "password can not be blank"},
		{"create with a name clients cannot send", "admin", "adm1n", authadmin.CodeCreateUser, map[string]string{"username": "a,b"}, `{"password":"p"}`, wire.NoPermission, "accessKey"},
		{"create with bad JSON", "admin", "adm1n", authadmin.CodeCreateUser, map[string]string{"username": "x"}, `{"password":`, wire.SystemError, "The body of user is invalid"},
		{"create without a body", "admin", "adm1n", authadmin.CodeCreateUser, map[string]string{"username": "x"}, ``, wire.SystemError, "The body of user is invalid"},
		{"update an unknown user", "admin", "adm1n", authadmin.CodeUpdateUser, map[string]string{"username": "ghost"}, `{"password":"p"}`, wire.NoPermission, "The user is not exist"},
		{"acl with bad JSON", "admin", "adm1n", authadmin.CodeCreateACL, map[string]string{"subject": "User:app"}, `[1,2]`, wire.SystemError, "The body of acl is null"},
		{"acl without policies", "admin", "adm1n", authadmin.CodeCreateACL, map[string]string{"subject": "User:app"}, `{"subject":"User:app"}`, wire.SystemError, "The body of acl is null"},
		{"acl for an unknown user", "admin", "adm1n", authadmin.CodeCreateACL, map[string]string{"subject": "User:ghost"}, `{"policies":[{"entries":[{"resource":"Topic:x","actions":["Pub"],"decision":"Allow"}]}]}`, wire.NoPermission, "The subject of User:ghost is not exist."},
		{"acl on a cluster", "admin", "adm1n", authadmin.CodeCreateACL, nil, `{"subject":"User:app","policies":[{"entries":[{"resource":"Cluster:c","actions":["Pub"],"decision":"Allow"}]}]}`, wire.NoPermission, "The resource Cluster:c is invalid"},
		{"acl with Any", "admin", "adm1n", authadmin.CodeCreateACL, nil, `{"subject":"User:app","policies":[{"entries":[{"resource":"Topic:x","actions":["Any"],"decision":"Allow"}]}]}`, wire.NoPermission, "The actions can not be Any."},
		{"acl without actions", "admin", "adm1n", authadmin.CodeCreateACL, nil, `{"subject":"User:app","policies":[{"entries":[{"resource":"Topic:x","actions":["Publish"],"decision":"Allow"}]}]}`, wire.NoPermission, "The actions is empty."},
		{"acl with a bad ip", "admin", "adm1n", authadmin.CodeCreateACL, nil, `{"subject":"User:app","policies":[{"entries":[{"resource":"Topic:x","actions":["Pub"],"decision":"Allow","sourceIps":["10.0.0.300"]}]}]}`, wire.NoPermission, "The source ip is invalid."},
		{"acl without a decision", "admin", "adm1n", authadmin.CodeCreateACL, nil, `{"subject":"User:app","policies":[{"entries":[{"resource":"Topic:x","actions":["Pub"]}]}]}`, wire.NoPermission, "The decision is null or illegal."},
		{"acl of a Default policy", "admin", "adm1n", authadmin.CodeUpdateACL, nil, `{"subject":"User:app","policies":[{"policyType":"Default","entries":[{"resource":"Topic:x","actions":["Pub"],"decision":"Allow"}]}]}`, wire.NoPermission, "Default is not supported"},
		{"acl of a non-user subject", "admin", "adm1n", authadmin.CodeCreateACL, map[string]string{"subject": "Role:x"}, `{"policies":[{"entries":[{"resource":"Topic:x","actions":["Pub"],"decision":"Allow"}]}]}`, wire.SystemError, "only User"},
		{"a good acl by a user without rights", "app", "s3cret", authadmin.CodeCreateACL, map[string]string{"subject": "User:app"}, goodACL, wire.NoPermission, "may not"},
		{"delete the acl of an unknown user", "admin", "adm1n", authadmin.CodeDeleteACL, map[string]string{"subject": "User:ghost"}, "", wire.NoPermission, "The subject is not exist."},
		{"delete an acl that is not there", "admin", "adm1n", authadmin.CodeDeleteACL, map[string]string{"subject": "User:admin"}, "", wire.NoPermission, "The acl is not exist."},
		{"delete a malformed resource", "admin", "adm1n", authadmin.CodeDeleteACL, map[string]string{"subject": "User:app", "resource": "Topic:a*b"}, "", wire.NoPermission, "is invalid"},
		{"get the acl of an unknown user", "admin", "adm1n", authadmin.CodeGetACL, map[string]string{"subject": "User:ghost"}, "", wire.NoPermission, "The subject is not exist."},
	}
	before, err := os.ReadFile(e.file)
	require.NoError(t, err)
	inForce := e.az.Config()
	for _, c := range cases {
		resp := e.call(c.ak, c.sk, c.code, c.ext, []byte(c.body))
		assert.Equal(t, c.wantCode, resp.Code, "%s: %s", c.name, resp.Remark)
		assert.Contains(t, resp.Remark, c.wantRemark, c.name)
		after, err := os.ReadFile(e.file)
		require.NoError(t, err)
		require.Equal(t, string(before), string(after), "%s: the file is unchanged", c.name)
		require.Equal(t, inForce, e.az.Config(), "%s: the rules in force are unchanged", c.name)
	}
	_, err = os.Stat(e.file + ".tmp")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestAnAdminMayManageNormalUsers: Update and Get on "*" are enough for
// everything but super users.
func TestAnAdminMayManageNormalUsers(t *testing.T) {
	e := start(t)
	ops := func(code int16, ext map[string]string, body string) []byte {
		return e.mustOK(e.call("ops", "0ps", code, ext, []byte(body)))
	}
	ops(authadmin.CodeCreateUser, map[string]string{"username": "carol"}, `{"password":"c"}`)
	ops(authadmin.CodeCreateACL, map[string]string{"subject": "User:carol"}, `{"policies":[{"entries":[{"resource":"Topic:*","actions":["Sub"],"decision":"Allow"}]}]}`)
	assert.NotEmpty(t, ops(authadmin.CodeGetACL, map[string]string{"subject": "User:carol"}, ""))
	ops(authadmin.CodeDeleteUser, map[string]string{"username": "carol"}, "")
	assert.Empty(t, e.onDisk().RulesOf("carol"), "deleting a user deletes its acl")
}

// TestAFailedWriteChangesNothing: when the file cannot be written the
// answer is SYSTEM_ERROR and the change is not in force.
func TestAFailedWriteChangesNothing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "acl.json")
	require.NoError(t, os.WriteFile(file, []byte(testACL), 0o600))
	az, err := acl.Open(file, acl.Options{})
	require.NoError(t, err)
	b := rmqtest.StartConfig(t, server.Config{ACL: az, ACLFile: filepath.Join(dir, "missing", "acl.json")})
	e := &env{t: t, az: az, file: file, addr: b.Broker}
	resp := e.admin(authadmin.CodeCreateUser, map[string]string{"username": "x"}, []byte(`{"password":"p"}`))
	assert.Equal(t, wire.SystemError, resp.Code)
	_, ok := az.Config().User("x")
	assert.False(t, ok)
	_, err = az.AuthenticateSecret("x", "p")
	assert.ErrorIs(t, err, acl.ErrUnknownUser)
}

// TestRequestsAreNotServedWithACLOff: there are no users to manage.
func TestRequestsAreNotServedWithACLOff(t *testing.T) {
	b := rmqtest.Start(t)
	e := &env{t: t, addr: b.Broker}
	resp := e.call("", "", authadmin.CodeListUser, nil, nil)
	assert.Equal(t, wire.RequestCodeNotSupported, resp.Code)
}
