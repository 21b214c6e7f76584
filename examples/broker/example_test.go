package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
)

// Example serves the broker's Handler in-process, the way a Go test of a
// host application can, and produces, pops and acks one message over HTTP.
func Example() {
	dir, err := os.MkdirTemp("", "broker-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	b, err := newBroker(Config{DataDir: dir})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(b.Handler())
	tr := &http.Transport{}
	defer func() {
		tr.CloseIdleConnections()
		srv.Close()
		_ = b.Close()
	}()
	post := func(path, body string, out any) {
		resp, err := (&http.Client{Transport: tr}).Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, out); err != nil {
			panic(err)
		}
	}

	var p produced
	post("/v1/messages", `{"topic":"orders","keys":["order-1"],"body":"order 1 paid"}`, &p)
	fmt.Printf("stored %s/%d at offset %d\n", p.Topic, p.QueueID, *p.QueueOffset)

	var res popOut
	post("/v1/pop", `{"group":"billing","topic":"orders","clientId":"c1","max":8,"invisible":"30s","poll":"5s"}`, &res)
	for _, d := range res.Messages {
		fmt.Printf("popped offset %d: %s (attempt %d)\n", d.QueueOffset, *d.Body, d.Attempts)
		var ack map[string]bool
		post("/v1/ack", `{"handle":"`+d.Handle+`"}`, &ack)
		fmt.Println("acked:", ack["acked"])
	}

	var bad apiError
	post("/v1/messages", `{"topic":"orders"}`, &bad)
	fmt.Printf("bad request: field %q, %s\n", bad.Field, bad.Message)
	// Output:
	// stored orders/0 at offset 0
	// popped offset 0: order 1 paid (attempt 1)
	// acked: true
	// bad request: field "body", body: must not be empty
}
