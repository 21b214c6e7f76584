//go:build !race

package e2e

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/internal/cpuclock"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/store"
)

const benchACLDoc = `{
  "users": [{"accessKey": "bench", "secretKey": "bench-secret"}, {"accessKey": "other", "secretKey": "x"}],
  "rules": [
    {"user": "bench", "resources": ["Topic:bench-*", "Group:g-bench*"], "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"user": "bench", "resources": ["Topic:bench-audit"], "actions": ["All"], "decision": "Deny"},
    {"user": "other", "resources": ["*"], "actions": ["Sub"], "decision": "Allow"}
  ]
}`

// benchCreds are the benchmark user's credentials (benchACLDoc).
var benchCreds = primitive.Credentials{AccessKey: "bench", SecretKey: "bench-secret"}

// aclChildEnv is the environment of a child broker (startChild) with flush
// and, when on, ACL from benchACLDoc; profile passes E2E_BROKER_CPUPROFILE
// on. ns is its name server's address.
func aclChildEnv(b *testing.B, flush string, on, profile bool) (ns string, env []string) {
	ns = freeAddr(b)
	env = []string{"E2E_DIR=" + b.TempDir(), "E2E_NS=" + ns, "E2E_BR=" + freeAddr(b), "E2E_FLUSH=" + flush}
	if profile {
		env = append(env, "E2E_CPUPROFILE="+os.Getenv("E2E_BROKER_CPUPROFILE"))
	}
	if on {
		path := filepath.Join(b.TempDir(), "acl.json")
		if err := os.WriteFile(path, []byte(benchACLDoc), 0o600); err != nil {
			b.Fatal(err)
		}
		env = append(env, "E2E_ACL="+path)
	}
	return ns, env
}

// aclBench starts the program with ACL off or on and returns the client
// credentials to use (empty when off).
func aclBench(b *testing.B, on bool) (*rmqtest.Broker, primitive.Credentials) {
	var cfg server.Config
	if !on {
		return rmqtest.StartConfig(b, cfg), primitive.Credentials{}
	}
	c, err := acl.Parse([]byte(benchACLDoc))
	if err != nil {
		b.Fatal(err)
	}
	if cfg.ACL, err = acl.New(c, acl.Options{}); err != nil {
		b.Fatal(err)
	}
	return rmqtest.StartConfig(b, cfg), benchCreds
}

// BenchmarkRemotingACL: the v2 client's 16 synchronous senders (1 KiB,
// flush=sync) and one push consumer draining b.N stored messages, with ACL
// off and on; cpu-µs/msg is the whole process (client and broker).
// broker=child runs the broker in a child process: broker-cpu-µs/msg is the
// broker's alone (under flush=sync it also moves with how many sends each
// fsync carries, which the clients' speed decides). The v2 client's own
// signing (HMAC and its map copies, ~20 µs a request) slows the senders, and
// slower senders cost the broker more per message under either setting:
// acl=off,client=signs has the client sign against a broker that checks
// nothing, so against acl=on only the broker's check differs. Alternate runs
// and compare medians:
//
//	go test -run '^$' -bench RemotingACL -benchtime 20000x -count 6 ./e2e/
func BenchmarkRemotingACL(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "acl=off"
		if on {
			name = "acl=on"
		}
		b.Run("send/"+name, func(b *testing.B) {
			br, cr := aclBench(b, on)
			benchACLSend(b, br, cr)
		})
		for _, flush := range []string{"sync", "async"} {
			b.Run("send/broker=child,flush="+flush+","+name, func(b *testing.B) { benchACLChildSend(b, flush, on, on) })
			if !on {
				// The client signs as with ACL on, the broker checks
				// nothing: against acl=on, only the broker's check differs.
				b.Run("send/broker=child,flush="+flush+",acl=off,client=signs", func(b *testing.B) { benchACLChildSend(b, flush, false, true) })
			}
		}
		b.Run("consume/"+name, func(b *testing.B) {
			br, cr := aclBench(b, on)
			benchACLConsume(b, br, cr)
		})
	}
}

// benchACLChildSend is the send workload against a broker in a child
// process, so its CPU (broker-cpu-µs/msg) is the broker's alone.
func benchACLChildSend(b *testing.B, flush string, on, signs bool) {
	ns, env := aclChildEnv(b, flush, on, true)
	var cr primitive.Credentials
	if signs {
		cr = benchCreds
	}
	c := startChild(b, "broker", env...)
	pid := c.cmd.Process.Pid
	benchACLSendTo(b, ns, cr, func() (time.Duration, bool) { return cpuclock.Process(pid) })
	c.stop(b)
}

func benchACLSend(b *testing.B, br *rmqtest.Broker, cr primitive.Credentials) {
	benchACLSendTo(b, br.NameSrv, cr, nil)
}

func benchACLSendTo(b *testing.B, ns string, cr primitive.Credentials, brokerCPU func() (time.Duration, bool)) {
	p := newProducer(b, ns, producer.WithCredentials(cr))
	body := make([]byte, 1024)
	sendSync(b, p, primitive.NewMessage("bench-send", body))
	var next atomic.Int64
	b.ResetTimer()
	cpu0 := cpuclock.Self()
	var bcpu0 time.Duration
	if brokerCPU != nil {
		bcpu0, _ = brokerCPU()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				r, err := p.SendSync(context.Background(), primitive.NewMessage("bench-send", body))
				if err != nil || r.Status != primitive.SendOK {
					b.Errorf("send: %v %v", err, r)
					return
				}
			}
		}()
	}
	wg.Wait()
	el, cpu := time.Since(start), cpuclock.Self()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	if brokerCPU == nil {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
		return
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "client-cpu-µs/msg")
	if bcpu, ok := brokerCPU(); ok {
		b.ReportMetric(float64((bcpu-bcpu0).Microseconds())/float64(b.N), "broker-cpu-µs/msg")
	}
}

func benchACLConsume(b *testing.B, br *rmqtest.Broker, cr primitive.Credentials) {
	const topic = "bench-consume"
	if _, err := br.Server.Topics().Ensure(topic, 4); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	batch := make([]*store.Message, 0, 256)
	for i := 0; i < b.N; i++ {
		batch = append(batch, &store.Message{Topic: topic, QueueID: i % 4, Body: body,
			Properties: map[string]string{"UNIQ_KEY": fmt.Sprintf("%032x", i)}})
		if len(batch) == cap(batch) || i == b.N-1 {
			if err := br.Server.Core().Store().Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	var got atomic.Int64
	done := make(chan struct{})
	c := newPushConsumer(b, br.NameSrv, "g-bench", consumer.WithCredentials(cr))
	if err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		if got.Add(int64(len(msgs))) == int64(b.N) {
			close(done)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := cpuclock.Self()
	start := time.Now()
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Shutdown() })
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", got.Load(), b.N)
	}
	el, cpu := time.Since(start), cpuclock.Self()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
}

// BenchmarkRemotingACLRaw isolates the broker's own cost of ACL from the
// clients': 4 connections pipeline one pre-encoded, pre-signed 1 KiB
// SEND_MESSAGE frame (up to 128 in flight each), and nothing else runs in
// the process but reading the answers, so cpu-µs/msg is (nearly) the
// broker's alone, and the same frames go to ACL off and on. msgs/append
// and records/sync show how the sends reached the store (its batches and
// group commits), which the CPU per message moves with.
func BenchmarkRemotingACLRaw(b *testing.B) {
	for _, flush := range []string{"sync", "async"} {
		for _, on := range []bool{false, true} {
			name := "flush=" + flush + ",acl=off"
			if on {
				name = "flush=" + flush + ",acl=on"
			}
			b.Run(name, func(b *testing.B) { benchACLRaw(b, flush, on) })
		}
	}
}

func benchACLRaw(b *testing.B, flush string, on bool) {
	br := rawBroker(b, flush, on)
	frame := rawSendFrame(b)
	st0 := br.Server.Core().Store().Stats()
	b.ResetTimer()
	cpu0 := cpuclock.Self()
	start := time.Now()
	pipelineSends(b, br.Broker, frame, b.N)
	el, cpu := time.Since(start), cpuclock.Self()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
	reportBatching(b, st0, br.Server.Core().Store().Stats())
}

// BenchmarkRemotingACLRawPaired is BenchmarkRemotingACLRaw with both
// brokers, ACL off and on, in one process on the same disk, the sends
// alternated between them in 2×pairedChunks slices (the order swapped every
// slice): the drift of a shared machine's disk and load, which moves
// records per fsync and so CPU per message by more than ACL's own cost
// from one run to the next, reaches both alike. off- and on-cpu-µs/msg are
// the process's CPU over each broker's slices; on/off their ratio. Each
// broker takes b.N sends. The control runs ACL off in both: how far from 1
// its on/off lands is what the method cannot tell apart on this machine.
func BenchmarkRemotingACLRawPaired(b *testing.B) {
	for _, flush := range []string{"sync", "async"} {
		for _, control := range []bool{false, true} {
			name := "flush=" + flush
			if control {
				name += ",control"
			}
			b.Run(name, func(b *testing.B) { benchACLRawPaired(b, flush, !control) })
		}
	}
}

func benchACLRawPaired(b *testing.B, flush string, on bool) {
	brs := [2]*rmqtest.Broker{rawBroker(b, flush, false), rawBroker(b, flush, on)}
	frame := rawSendFrame(b)
	var cpu [2]time.Duration
	st0 := [2]store.Stats{brs[0].Server.Core().Store().Stats(), brs[1].Server.Core().Store().Stats()}
	b.ResetTimer()
	alternateSlices(b, func(w, n int) {
		cpu0 := cpuclock.Self()
		pipelineSends(b, brs[w].Broker, frame, n)
		cpu[w] += cpuclock.Self() - cpu0
	})
	b.StopTimer()
	b.ReportMetric(float64(cpu[0].Microseconds())/float64(b.N), "off-cpu-µs/msg")
	b.ReportMetric(float64(cpu[1].Microseconds())/float64(b.N), "on-cpu-µs/msg")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "on/off")
	for w, side := range []string{"off-", "on-"} {
		st := brs[w].Server.Core().Store().Stats()
		if n := st.Appends - st0[w].Appends; n > 0 {
			b.ReportMetric(float64(st.Messages-st0[w].Messages)/float64(n), side+"msgs/append")
		}
		if n := st.Syncs - st0[w].Syncs; n > 0 {
			b.ReportMetric(float64(st.SyncedRecords-st0[w].SyncedRecords)/float64(n), side+"records/sync")
		}
	}
}

// pairedChunks is how many slices of its sends each broker of
// BenchmarkRemotingACLRawPaired takes.
const pairedChunks = 20

// alternateSlices runs b.N messages of each of two sides in pairedChunks
// slices, side 0 first in even slices and side 1 first in odd ones:
// slice(w, n) runs n messages of side w.
func alternateSlices(b *testing.B, slice func(w, n int)) {
	for i := range pairedChunks {
		n := b.N / pairedChunks
		if i < b.N%pairedChunks {
			n++
		}
		for k := range 2 {
			slice((i+k)%2, n)
		}
	}
}

// rawBroker is the program with flush and ACL off or on, topic bench-send
// created.
func rawBroker(b *testing.B, flush string, on bool) *rmqtest.Broker {
	cfg := server.Config{Flush: flush}
	if on {
		c, err := acl.Parse([]byte(benchACLDoc))
		if err != nil {
			b.Fatal(err)
		}
		if cfg.ACL, err = acl.New(c, acl.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	br := rmqtest.StartConfig(b, cfg)
	if _, err := br.Server.Topics().Ensure("bench-send", 4); err != nil {
		b.Fatal(err)
	}
	return br
}

// rawSendFrame is one pre-encoded SEND_MESSAGE of 1 KiB, signed as the
// benchmark's user (a broker with ACL off ignores the signature).
func rawSendFrame(b *testing.B) []byte {
	ext := map[string]string{"producerGroup": "pg", "topic": "bench-send", "queueId": "1", "sysFlag": "0",
		"bornTimestamp": "1700000000000", "flag": "0", "properties": "WAIT\x01true\x02", "reconsumeTimes": "0",
		"unitMode": "false", "maxReconsumeTimes": "16", "batch": "false", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "bname": "broker-a", acl.FieldAccessKey: "bench"}
	body := make([]byte, 1024)
	ext[acl.FieldSignature] = acl.SignRemoting("bench-secret", ext, body)
	frame, err := wire.Encode(&wire.Command{Code: wire.CodeSendMessage, Language: "GO", Version: 317, Opaque: 1,
		ExtFields: ext, Body: body})
	if err != nil {
		b.Fatal(err)
	}
	return frame
}

// pipelineSends sends frame n times to addr over 4 connections (n split
// evenly), up to 128 in flight on each, and reads every answer; a failed
// or unanswered send fails b.
func pipelineSends(b *testing.B, addr string, frame []byte, n int) {
	const conns, window = 4, 128
	var failed atomic.Int64
	var wg sync.WaitGroup
	for c := range conns {
		count := n / conns
		if c < n%conns {
			count++
		}
		if count == 0 {
			continue
		}
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		slots := make(chan struct{}, window)
		wg.Add(2)
		go func() { // writer
			defer wg.Done()
			for range count {
				slots <- struct{}{}
				if _, err := nc.Write(frame); err != nil {
					return // the reader fails on the missing answer
				}
			}
		}()
		go func() { // reader
			defer wg.Done()
			defer nc.Close()
			r := bufio.NewReaderSize(nc, 64<<10)
			_ = nc.SetReadDeadline(time.Now().Add(time.Minute))
			for range count {
				f, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
				if err != nil {
					failed.Add(1)
					for range window { // let a writer blocked on a slot end
						select {
						case <-slots:
						default:
						}
					}
					return
				}
				if resp, err := wire.Decode(f); err != nil || resp.Code != wire.Success {
					failed.Add(1)
				}
				<-slots
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d sends failed", failed.Load())
	}
}

// reportBatching reports how the sends reached the store between two of its
// Stats: messages per Append call (the read loop's batches) and records per
// fsync (group commits).
func reportBatching(b *testing.B, st0, st1 store.Stats) {
	if n := st1.Appends - st0.Appends; n > 0 {
		b.ReportMetric(float64(st1.Messages-st0.Messages)/float64(n), "msgs/append")
	}
	if n := st1.Syncs - st0.Syncs; n > 0 {
		b.ReportMetric(float64(st1.SyncedRecords-st0.SyncedRecords)/float64(n), "records/sync")
	}
}

// BenchmarkSignedContentHMAC is the least any remoting signature check can
// cost per send: one HMAC-SHA1, keyed state reused, over what rawSendFrame
// signs (its header's values and 1 KiB body), with nothing around it (no
// field lookups, no decision). The access control table adds it to the
// ACL-off send of BenchmarkRemotingACLRawPaired as the floor of its ratio.
func BenchmarkSignedContentHMAC(b *testing.B) {
	cmd, err := wire.Decode(rawSendFrame(b)[4:])
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 0, len(cmd.ExtFields))
	for k := range cmd.ExtFields {
		if k != acl.FieldSignature {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var content []byte
	for _, k := range keys {
		content = append(content, cmd.ExtFields[k]...)
	}
	content = append(content, cmd.Body...)
	want, err := base64.StdEncoding.DecodeString(cmd.ExtFields[acl.FieldSignature])
	if err != nil {
		b.Fatal(err)
	}
	h := hmac.New(sha1.New, []byte("bench-secret"))
	sum := make([]byte, 0, sha1.Size)
	b.ReportAllocs()
	cpu0 := cpuclock.Self()
	for b.Loop() {
		h.Reset()
		h.Write(content)
		if sum = h.Sum(sum[:0]); !hmac.Equal(sum, want) {
			b.Fatal("the frame's signature is not the HMAC of its content")
		}
	}
	b.ReportMetric(float64((cpuclock.Self()-cpu0).Nanoseconds())/1e3/float64(b.N), "hmac-cpu-µs/msg")
}
