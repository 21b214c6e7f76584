package acl_test

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/brokercore/brokercore/acl"
)

func Example() {
	cfg, err := acl.Parse([]byte(`{
	  "users": [{"accessKey": "orders-app", "secretKey": "s3cret"}],
	  "rules": [
	    {"user": "orders-app", "resources": ["Topic:orders-*"], "actions": ["Pub"], "decision": "Allow"},
	    {"user": "orders-app", "resources": ["Topic:orders-audit"], "actions": ["All"], "decision": "Deny"}
	  ]}`))
	if err != nil {
		panic(err)
	}
	a, err := acl.New(cfg, acl.Options{})
	if err != nil {
		panic(err)
	}
	from := netip.MustParseAddr("127.0.0.1")
	d, _ := a.Authorize("orders-app", acl.Topic("orders-eu"), acl.Pub, from)
	fmt.Println(d)
	d, err = a.Authorize("orders-app", acl.Topic("orders-audit"), acl.Pub, from)
	fmt.Println(d, errors.Is(err, acl.ErrDenied))
	fmt.Println(err)
	// Output:
	// Allow
	// Deny true
	// acl: user "orders-app" may not Pub Topic:orders-audit from 127.0.0.1: denied by rule 1
}

func ExampleAuthorizer_AuthenticateV5() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a, _ := acl.New(&acl.Config{Users: []acl.UserConfig{{AccessKey: "app", SecretKey: "s3cret"}}},
		acl.Options{Now: func() time.Time { return now }})

	// What a v5 client sends in its gRPC metadata.
	dateTime := now.Format(acl.V5DateTimeLayout)
	authorization := acl.V5Authorization("app", "s3cret", dateTime)

	user, err := a.AuthenticateV5(authorization, dateTime)
	fmt.Println(user, err)
	_, err = a.AuthenticateV5(acl.V5Authorization("app", "guess", dateTime), dateTime)
	fmt.Println(errors.Is(err, acl.ErrUnauthenticated), errors.Is(err, acl.ErrBadSignature))
	// Output:
	// app <nil>
	// true true
}

func ExampleAuthorizer_AuthenticateRemoting() {
	a, _ := acl.New(&acl.Config{Users: []acl.UserConfig{{AccessKey: "app", SecretKey: "s3cret"}}}, acl.Options{})
	body := []byte("hello")
	// The ext fields of a remoting request as a v2 client signs them.
	fields := map[string]string{"topic": "orders", "queueId": "0", acl.FieldAccessKey: "app"}
	fields[acl.FieldSignature] = acl.SignRemoting("s3cret", fields, body)

	user, err := a.AuthenticateRemoting(fields, body)
	fmt.Println(user, err)
	// Output:
	// app <nil>
}

func ExampleAuthorizer_Reload() {
	a, _ := acl.New(nil, acl.Options{}) // no users: everything refused
	d, _ := a.Authorize("app", acl.Topic("t"), acl.Pub, netip.Addr{})
	fmt.Println(d)
	cfg, _ := acl.Parse([]byte(`{"users":[{"accessKey":"app","secretKey":"s"}],
	  "rules":[{"user":"app","resources":["Topic:t"],"actions":["Pub"],"decision":"Allow"}]}`))
	_ = a.Reload(cfg)
	d, _ = a.Authorize("app", acl.Topic("t"), acl.Pub, netip.Addr{})
	fmt.Println(d)
	// Output:
	// Deny
	// Allow
}
