package authadmin

import (
	"testing"

	"github.com/brokercore/brokercore/acl"
)

// FuzzDecodeACLInfo: any body decodes or is refused, never a panic; what
// policyRules accepts is a rule set the acl package takes as it is.
func FuzzDecodeACLInfo(f *testing.F) {
	f.Add([]byte(`{"subject":"User:app","policies":[{"policyType":"Custom","entries":[{"resource":"Topic:orders","actions":["Pub","Sub"],"decision":"Allow","sourceIps":["127.0.0.1","10.0.0.0/8"]}]}]}`))
	f.Add([]byte(`{"policies":[{"entries":[{"resource":"*","actions":["All"],"decision":"Deny"},{"resource":"Group:g*","actions":["sub"],"decision":"allow"}]}]}`))
	f.Add([]byte(`{"policies":[{"entries":[{"resource":"Cluster:c","actions":["Any"]}]}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"policies":null} {}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		info, err := DecodeACLInfo(body)
		if err != nil {
			return
		}
		rules, _, ok := policyRules("app", info.Policies)
		if !ok {
			return
		}
		c := &acl.Config{Users: []acl.UserConfig{{AccessKey: "app", SecretKey: "s"}}}
		for _, rc := range rules {
			if err := c.PutRule(rc); err != nil {
				t.Fatalf("accepted entry %+v refused by the acl package: %v", rc, err)
			}
		}
		if _, err := acl.New(c, acl.Options{}); err != nil {
			t.Fatalf("accepted rules do not load: %v", err)
		}
		if got, has := aclInfo("app", c.RulesOf("app")); !has || len(got.Policies[0].Entries) == 0 {
			t.Fatalf("accepted rules show no entry")
		}
	})
}

// FuzzDecodeUserInfo: any body decodes or is refused, never a panic; a
// decoded user encodes (as the answers do) and decodes back to itself.
func FuzzDecodeUserInfo(f *testing.F) {
	f.Add([]byte(`{"username":"bob","password":"p","userType":"Super","userStatus":"enable"}`))
	f.Add([]byte(`{"password":1}`))
	f.Add([]byte(` `))
	f.Fuzz(func(t *testing.T, body []byte) {
		u, err := DecodeUserInfo(body)
		if err != nil {
			return
		}
		r := marshal(u)
		back, err := DecodeUserInfo(r.body)
		if err != nil || back != u {
			t.Fatalf("%+v encodes to %s and decodes to %+v, %v", u, r.body, back, err)
		}
	})
}
