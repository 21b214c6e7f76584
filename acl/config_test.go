package acl

import (
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRefusesBadDocuments(t *testing.T) {
	cases := map[string]string{
		"not json":            `{`,
		"trailing data":       `{"users":[]} {}`,
		"unknown field":       `{"users":[{"accessKey":"a","secretKey":"s","supperUser":true}]}`,
		"empty access key":    `{"users":[{"accessKey":"","secretKey":"s"}]}`,
		"comma in access key": `{"users":[{"accessKey":"a,b","secretKey":"s"}]}`,
		"slash in access key": `{"users":[{"accessKey":"a/b","secretKey":"s"}]}`,
		"space in access key": `{"users":[{"accessKey":"a b","secretKey":"s"}]}`,
		"empty secret":        `{"users":[{"accessKey":"a","secretKey":""}]}`,
		"duplicate user":      `{"users":[{"accessKey":"a","secretKey":"s"},{"accessKey":"a","secretKey":"t"}]}`,
		"rule for nobody":     `{"users":[],"rules":[{"user":"x","resources":["*"],"actions":["Pub"],"decision":"Allow"}]}`,
		"no resources":        `{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":[],"actions":["Pub"],"decision":"Allow"}]}`,
		"bad resource":        `{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["Cluster:x"],"actions":["Pub"],"decision":"Allow"}]}`,
		"no actions":          `{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["*"],"decision":"Allow"}]}`,
		"bad action":          `{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["*"],"actions":["Publish"],"decision":"Allow"}]}`,
		"no decision":         `{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["*"],"actions":["Pub"]}]}`,
		"bad ip":              `{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["*"],"actions":["Pub"],"decision":"Allow","sourceIps":["10.0.0.300"]}]}`,
		"bad cidr":            `{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["*"],"actions":["Pub"],"decision":"Allow","sourceIps":["10.0.0.0/33"]}]}`,
	}
	for name, doc := range cases {
		_, err := Parse([]byte(doc))
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
}

func TestParseAcceptsTheDocumentedExample(t *testing.T) {
	c := mustParse(t, `{
	  "users": [
	    {"accessKey": "admin",      "secretKey": "change-me", "superUser": true},
	    {"accessKey": "orders-app", "secretKey": "s3cret"}
	  ],
	  "rules": [
	    {"user": "orders-app", "resources": ["Topic:orders-*", "Group:orders-workers"],
	     "actions": ["Pub", "Sub"], "decision": "Allow", "sourceIps": ["10.0.0.0/8", "127.0.0.1"]},
	    {"user": "orders-app", "resources": ["Topic:orders-audit"], "actions": ["All"], "decision": "Deny"}
	  ]
	}`)
	assert.Len(t, c.Users, 2)
	assert.Len(t, c.Rules, 2)
}

func TestReloadSwapsRulesAndABadFileKeepsTheOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acl.json")
	write := func(doc string) { require.NoError(t, os.WriteFile(path, []byte(doc), 0o600)) }
	write(`{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["Topic:t"],"actions":["Pub"],"decision":"Allow"}]}`)
	a, err := Open(path, Options{})
	require.NoError(t, err)
	ip := netip.Addr{}
	d, _ := a.Authorize("a", Topic("t"), Pub, ip)
	require.Equal(t, Allow, d)

	write(`{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["Topic:t"],"actions":["Pub"],"decision":"Deny"}]}`)
	require.NoError(t, a.ReloadFile(path))
	d, _ = a.Authorize("a", Topic("t"), Pub, ip)
	assert.Equal(t, Deny, d, "a reload takes effect on the next call")

	write(`{"users":[{"accessKey":"a","secretKey":"s"}],"rules":[{"user":"a","resources":["Topic:t"],"actions":["Pub"],"decision":"Perhaps"}]}`)
	assert.ErrorIs(t, a.ReloadFile(path), ErrInvalid)
	assert.Error(t, a.ReloadFile(filepath.Join(dir, "missing.json")))
	assert.ErrorIs(t, a.Reload(nil), ErrInvalid)
	d, _ = a.Authorize("a", Topic("t"), Pub, ip)
	assert.Equal(t, Deny, d, "a refused reload keeps the rules in force")
	s := a.Stats()
	assert.Equal(t, uint64(2), s.Reloads)
	assert.Equal(t, uint64(3), s.ReloadErrors)
}

func TestLoadRefusesAnOversizedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	require.NoError(t, os.WriteFile(path, make([]byte, MaxConfigSize+1), 0o600))
	_, err := Load(path)
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestReloadDuringDecisionsIsRaceFree(t *testing.T) {
	// Every decision reads one configuration: under -race, reloads racing
	// decisions must be clean, and each answer is one a configuration gives.
	docA := `{"users":[{"accessKey":"u","secretKey":"s"}],"rules":[
	  {"user":"u","resources":["Topic:x"],"actions":["Pub"],"decision":"Allow"}]}`
	docB := `{"users":[{"accessKey":"u","secretKey":"s"}],"rules":[
	  {"user":"u","resources":["Topic:x"],"actions":["Pub"],"decision":"Allow"},
	  {"user":"u","resources":["Topic:*"],"actions":["Pub"],"decision":"Deny"}]}`
	a := mustNew(t, docA, Options{})
	cA, cB := mustParse(t, docA), mustParse(t, docB)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				_ = a.Reload(cB)
			} else {
				_ = a.Reload(cA)
			}
		}
	}()
	for range 2000 {
		d, err := a.Authorize("u", Topic("x"), Pub, netip.Addr{})
		if d == Deny {
			require.ErrorIs(t, err, ErrDenied)
			assert.Contains(t, err.Error(), "denied by rule 1")
		}
	}
	close(stop)
	wg.Wait()
}
