package acl

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/cpuclock"
)

// benchDoc is a realistic user: a handful of rules, one of them a Deny.
const benchDoc = `{"users":[{"accessKey":"app","secretKey":"s3cret"}],"rules":[
  {"user":"app","resources":["Topic:orders-*","Topic:payments"],"actions":["Pub"],"decision":"Allow"},
  {"user":"app","resources":["Topic:orders-*","Group:workers"],"actions":["Sub"],"decision":"Allow"},
  {"user":"app","resources":["Topic:orders-audit"],"actions":["All"],"decision":"Deny"},
  {"user":"app","resources":["Group:ops-*"],"actions":["All"],"decision":"Deny","sourceIps":["10.0.0.0/8"]}]}`

func BenchmarkAuthorize(b *testing.B) {
	a := mustNew(b, benchDoc, Options{})
	ip := netip.MustParseAddr("127.0.0.1")
	res := Topic("orders-eu")
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if d, _ := a.Authorize("app", res, Pub, ip); d != Allow {
			b.Fatal("denied")
		}
	}
}

// BenchmarkAuthenticateV5 is the per-call cost with the verified-signature
// cache hit (a client's calls within one second), and with a fresh
// signature every call (the worst case: parse + HMAC + insert).
func BenchmarkAuthenticateV5(b *testing.B) {
	b.Run("cached", func(b *testing.B) {
		a := mustNew(b, benchDoc, Options{Now: func() time.Time { return t0 }})
		dt, auth := clientV5Headers("app", "s3cret", t0)
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := a.AuthenticateV5(auth, dt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fresh", func(b *testing.B) {
		now := t0
		a := mustNew(b, benchDoc, Options{Now: func() time.Time { return now }, MaxSkew: 1000 * time.Hour})
		hdrs := make([][2]string, 4096)
		for i := range hdrs {
			dt, auth := clientV5Headers("app", "s3cret", t0.Add(-time.Duration(i)*time.Second))
			hdrs[i] = [2]string{dt, auth}
		}
		b.ReportAllocs()
		defer cpuPerOp(b)()
		i := 0
		for b.Loop() {
			h := hdrs[i%len(hdrs)]
			i++
			if i%len(hdrs) == 0 {
				now = now.Add(time.Hour) // new window: every signature fresh again
				a.replay.mu.Lock()
				clear(a.replay.m)
				a.replay.mu.Unlock()
			}
			if _, err := a.AuthenticateV5(h[1], h[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAuthenticateRemoting is a SEND_MESSAGE's header (15 fields) and
// a 1 KiB body.
func BenchmarkAuthenticateRemoting(b *testing.B) {
	a := mustNew(b, benchDoc, Options{})
	fields := map[string]string{
		"producerGroup": "pg", "topic": "orders-eu", "queueId": "3", "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(t0.UnixMilli(), 10), "flag": "0",
		"properties": "UNIQ_KEY\x01AC11000100002A9F00000000000000A1\x02WAIT\x01true\x02", "reconsumeTimes": "0",
		"unitMode": "false", "maxReconsumeTimes": "0", "batch": "false", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "bname": "broker-a",
	}
	body := make([]byte, 1024)
	sent := clientV2Sign("app", "s3cret", fields, body)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := a.AuthenticateRemoting(sent, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientV2Sign is what the v2 client's ACL interceptor costs per
// request (its code, copied in clientV2Sign), for the same SEND_MESSAGE.
func BenchmarkClientV2Sign(b *testing.B) {
	fields := map[string]string{
		"producerGroup": "pg", "topic": "orders-eu", "queueId": "3", "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(t0.UnixMilli(), 10), "flag": "0",
		"properties": "UNIQ_KEY\x01AC11000100002A9F00000000000000A1\x02WAIT\x01true\x02", "reconsumeTimes": "0",
		"unitMode": "false", "maxReconsumeTimes": "0", "batch": "false", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "bname": "broker-a",
	}
	body := make([]byte, 1024)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		_ = clientV2Sign("app", "s3cret", fields, body)
	}
}

// BenchmarkAuthenticateParallel is the remoting check (the SEND_MESSAGE of
// BenchmarkAuthenticateRemoting) followed by its Authorize, and the cached
// v5 check, on every core at once: a broker serves its connections in
// parallel, and what they share (the counters, the replay cache's lock, the
// user's pool of HMAC states) costs more than on one core.
func BenchmarkAuthenticateParallel(b *testing.B) {
	fields := map[string]string{
		"producerGroup": "pg", "topic": "orders-eu", "queueId": "3", "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(t0.UnixMilli(), 10), "flag": "0",
		"properties": "UNIQ_KEY\x01AC11000100002A9F00000000000000A1\x02WAIT\x01true\x02", "reconsumeTimes": "0",
		"unitMode": "false", "maxReconsumeTimes": "0", "batch": "false", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "bname": "broker-a",
	}
	body := make([]byte, 1024)
	sent := clientV2Sign("app", "s3cret", fields, body)
	ip := netip.MustParseAddr("127.0.0.1")
	b.Run("remoting", func(b *testing.B) {
		a := mustNew(b, benchDoc, Options{})
		b.ReportAllocs()
		defer cpuPerOp(b)()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				user, err := a.AuthenticateRemoting(sent, body)
				if err != nil {
					b.Error(err)
					return
				}
				if d, _ := a.Authorize(user, Topic("orders-eu"), Pub, ip); d != Allow {
					b.Error("denied")
					return
				}
			}
		})
	})
	b.Run("v5-cached", func(b *testing.B) {
		a := mustNew(b, benchDoc, Options{Now: func() time.Time { return t0 }})
		dt, auth := clientV5Headers("app", "s3cret", t0)
		b.ReportAllocs()
		defer cpuPerOp(b)()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				user, err := a.AuthenticateV5(auth, dt)
				if err != nil {
					b.Error(err)
					return
				}
				if d, _ := a.Authorize(user, Topic("orders-eu"), Pub, ip); d != Allow {
					b.Error("denied")
					return
				}
			}
		})
	})
}

// cpuPerOp reports the process's CPU time per op (cpu-ns/op) from when it
// is called to when the returned func is: on a loaded machine ns/op counts
// the time waiting for a core, cpu-ns/op only the work (and, in parallel,
// what the cores' contention costs).
func cpuPerOp(b *testing.B) func() {
	c0 := cpuclock.Self()
	return func() { b.ReportMetric(float64((cpuclock.Self()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op") }
}
